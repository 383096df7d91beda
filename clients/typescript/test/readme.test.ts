/** The TypeScript guide's blocks (clients/typescript/README.md) run as written (against the test
 * server) and print what their comments say. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { promisify } from "node:util";
import {
  type FakeProviders,
  guideBlocks,
  PACKAGE_DIR,
  serverTarget,
  startFakeProviders,
  stopServer,
} from "./helpers.js";

let fake: FakeProviders | undefined;

after(() => {
  fake?.stop();
  stopServer();
});

/** The ```ts blocks of the TypeScript guide. */
function readmeBlocks(): string[] {
  const blocks = guideBlocks("clients/typescript/README.md", "ts");
  assert.equal(blocks.length, 5, "clients/typescript/README.md has five ```ts blocks");
  return blocks;
}

const SOURCE = JSON.stringify(join(PACKAGE_DIR, "src", "index.ts"));

/** Runs a module with tsx (with `env` added to this process's); its output lines. */
async function runModule(source: string, env: Record<string, string> = {}): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "ce-readme-"));
  try {
    const file = join(dir, "readme.mts");
    writeFileSync(file, source);
    const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
    const { stdout } = await promisify(execFile)(tsx, [file], {
      timeout: 60_000,
      env: { ...process.env, ...env },
    });
    return stdout.trim().split("\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

it("the guide's first example runs and prints what it says", async () => {
  const target = await serverTarget();
  const [block = ""] = readmeBlocks();
  const source = block
    .replace('"@contextengine/client"', SOURCE)
    .replace('"127.0.0.1:50151"', JSON.stringify(target));
  assert.deepEqual(await runModule(source), ["1 1n", "NOT_FOUND SESSION_NOT_FOUND"]);
});

/** A client and a session with one user content, before a block that needs them. */
function sessionPrelude(target: string): string {
  return [
    `import { ContextEngineClient } from ${SOURCE};`,
    `const ce = new ContextEngineClient(${JSON.stringify(target)});`,
    'const { session } = await ce.createSession({ appName: "demo", userId: "zoe" });',
    'const address = { appName: "demo", userId: "zoe", sessionId: session?.id ?? "" };',
    "await ce.appendEvent({",
    "  ...address,",
    '  event: { author: "user", content: { role: "user", parts: [{ text: "Hi!" }] } },',
    "});",
  ].join("\n");
}

it("the guide's contents since example runs (after a session with one content)", async () => {
  const target = await serverTarget();
  const block = readmeBlocks()[1] ?? "";
  const lines = await runModule(`${sessionPrelude(target)}\n${block}\nce.close();\n`);
  assert.deepEqual(lines, ["1 2 0", "2 0"]);
});

it("the guide's renderings example runs against the fake OpenAI and Anthropic APIs", async () => {
  const target = await serverTarget();
  fake = await startFakeProviders();
  const block = (readmeBlocks()[2] ?? "")
    .replace('"@contextengine/client"', SOURCE)
    .replace('"openai"', JSON.stringify(import.meta.resolve("openai")))
    .replace('"@anthropic-ai/sdk"', JSON.stringify(import.meta.resolve("@anthropic-ai/sdk")));
  const lines = await runModule(`${sessionPrelude(target)}\n${block}\nce.close();\n`, {
    OPENAI_BASE_URL: fake.openaiBaseUrl,
    OPENAI_API_KEY: "-",
    ANTHROPIC_BASE_URL: fake.anthropicBaseUrl,
    ANTHROPIC_API_KEY: "-",
  });
  assert.deepEqual(lines, [
    "system Be brief. completed",
    "Seen 2 messages; the last said: Hi!.",
    "1 3 1",
    "end_turn",
  ]);
  assert.deepEqual(
    fake.requests().map((r) => [r.path, r.status]),
    [
      ["/v1/chat/completions", 200],
      ["/v1/responses", 200],
      ["/v1/messages", 200],
    ],
  );
});

it("the guide's context tools example runs (after a session with one content)", async () => {
  const target = await serverTarget();
  const block = readmeBlocks()[3] ?? "";
  assert.match(block, /contextTools/);
  const lines = await runModule(`${sessionPrelude(target)}\n${block}\nce.close();\n`);
  assert.deepEqual(lines, ["7 true true"]);
});

it("the guide's compaction block is examples/compaction.ts, which summarises and expands", async () => {
  const example = join(PACKAGE_DIR, "examples", "compaction.ts");
  const text = readFileSync(example, "utf8");
  const region = /^\/\/ README begin\n([\s\S]*?)^\/\/ README end$/m.exec(text)?.[1];
  assert.ok(region, "examples/compaction.ts has the README begin / end markers");
  const block = readmeBlocks()[4] ?? "";
  assert.match(block, /expandSummary/);
  assert.equal(block, region.replace('"../src/index.js"', '"@contextengine/client"'));
  const target = await serverTarget();
  const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
  const { stdout } = await promisify(execFile)(tsx, [example], {
    timeout: 60_000,
    env: { ...process.env, CONTEXTENGINE_TARGET: target },
  });
  const lines = stdout.trim().split("\n");
  assert.equal(lines[0], "1", "one content: the summary");
  assert.match(lines.slice(1, -1).join("\n"), /TP1351[\s\S]*Memmo Alfama/);
  assert.equal(lines.at(-1), "1 2 3 4");
});
