/**
 * examples/renderings.ts against the sidecar and the fake OpenAI and Anthropic APIs
 * (tests/fakes/provider_server.py, run as a process from the repository's .venv): the real
 * `openai` and `@anthropic-ai/sdk` clients send each rendering, the fake checks every body
 * against the providers' own SDK types (400 otherwise) and records it.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import OpenAI from "openai";
import {
  type FakeProviders,
  PACKAGE_DIR,
  serverTarget,
  startFakeProviders,
  stopServer,
} from "./helpers.js";

let fake: FakeProviders;

before(async () => {
  fake = await startFakeProviders();
});

after(() => {
  fake.stop();
  stopServer();
});

it("examples/renderings.ts sends each rendering through the providers' SDKs", async () => {
  const target = await serverTarget();
  const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
  const { stdout } = await promisify(execFile)(
    tsx,
    [join(PACKAGE_DIR, "examples", "renderings.ts"), "--target", target],
    {
      timeout: 60_000,
      env: {
        ...process.env,
        OPENAI_BASE_URL: fake.openaiBaseUrl,
        ANTHROPIC_BASE_URL: fake.anthropicBaseUrl,
      },
    },
  );
  // The fake's answers say what it received: the number of messages and the last one's text.
  assert.deepEqual(stdout.trim().split("\n"), [
    "OpenAI chat: Seen 4 messages; the last said: And where do we stay?.",
    "OpenAI responses: Seen 3 messages; the last said: And where do we stay?.",
    "Anthropic (0 held, 3 new): Seen 3 messages; the last said: And where do we stay?.",
    "Anthropic (3 held, 2 new): Seen 5 messages; the last said: Somewhere near the river?.",
  ]);

  const requests = fake.requests();
  assert.deepEqual(
    requests.map((r) => [r.path, r.status]),
    [
      ["/v1/chat/completions", 200],
      ["/v1/responses", 200],
      ["/v1/messages", 200],
      ["/v1/messages", 200],
    ],
  );
  const [chat, responses, first, second] = requests.map((r) => r.body);
  assert.ok(chat && responses && first && second);
  assert.deepEqual((chat.messages as unknown[])[0], {
    role: "system",
    content: "You plan trips.",
  });
  assert.equal(chat.model, "gpt-4o");
  assert.equal(responses.instructions, "You plan trips.");
  assert.equal((responses.input as unknown[]).length, 3);
  assert.equal(first.system, "You plan trips.");
  assert.equal(first.max_tokens, 1024);
  // The view's second rendering reached Anthropic whole: the held items first, then the new ones.
  const held = first.messages as unknown[];
  const whole = second.messages as unknown[];
  assert.equal(whole.length, 5);
  assert.deepEqual(whole.slice(0, 3), held);
  assert.deepEqual(whole[3], {
    role: "assistant",
    content: [{ type: "text", text: "Seen 3 messages; the last said: And where do we stay?." }],
  });
});

it("the fake refuses what the provider's types refuse", async () => {
  const openai = new OpenAI({ baseURL: fake.openaiBaseUrl, apiKey: "-", maxRetries: 0 });
  const before = fake.requests().length;
  const robot = { role: "robot", content: "Beep." } as unknown as OpenAI.ChatCompletionMessageParam;
  await assert.rejects(
    openai.chat.completions.create({ model: "gpt-4o", messages: [robot] }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 400);
      return true;
    },
  );
  assert.deepEqual(
    fake
      .requests()
      .slice(before)
      .map((r) => [r.path, r.status]),
    [["/v1/chat/completions", 400]],
  );
});
