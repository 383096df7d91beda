/**
 * Renderings against a real sidecar: `renderContext` in each format (a session with a tool call
 * and its result, a system instruction), `buildContext` with `render.since` and `requestPart` with
 * the held items, and `RenderedView`, whose parts must equal a fresh full rendering through
 * appends, a rewind, a compaction and a reset, while only the new items cross the wire.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import {
  ContextEngineClient,
  ContextEngineError,
  partItems,
  type RenderableFormat,
  RenderFormat,
  requestPart,
} from "../src/index.js";
import {
  recordBuildContext,
  said,
  serverTarget,
  stopServer,
  summarizeFirstEvent,
  uniqueApp,
} from "./helpers.js";

/** [base_items_count, number of items sent] of each rendering `ce` received. */
const sent: Array<[number, number]> = [];
/** A client that records what each BuildContext rendering carried on the wire. */
let ce: ContextEngineClient;

before(async () => {
  const record = recordBuildContext(sent, ({ rendered }) => [
    rendered?.baseItemsCount ?? -1,
    rendered?.items.length ?? -1,
  ]);
  ce = new ContextEngineClient(await serverTarget(), { timeoutMs: 5_000, interceptors: [record] });
});

after(() => {
  ce.close();
  stopServer();
});

const SYSTEM = { parts: [{ text: "You plan trips." }] };
const FORMATS: readonly RenderableFormat[] = [
  RenderFormat.OPENAI_CHAT,
  RenderFormat.OPENAI_RESPONSES,
  RenderFormat.ANTHROPIC_MESSAGES,
];

/** A session with a question, a tool call and its result, and the answer. */
async function newSession() {
  const { session } = await ce.createSession({ appName: uniqueApp(), userId: "u" });
  assert.ok(session);
  const address = { appName: session.appName, userId: "u", sessionId: session.id };
  const call = { id: "call_1", name: "lookup", args: { city: "Oslo" } };
  const result = { id: "call_1", name: "lookup", response: { weather: "sunny" } };
  await ce.appendEvents({
    ...address,
    events: [
      said("user", "i1", "Weather in Oslo?"),
      {
        author: "planner",
        invocationId: "i1",
        content: { role: "model", parts: [{ functionCall: call }] },
      },
      {
        author: "planner",
        invocationId: "i1",
        content: { role: "user", parts: [{ functionResponse: result }] },
      },
      said("planner", "i1", "Sunny."),
    ],
  });
  return address;
}

describe("renderContext", () => {
  it("OpenAI Chat: the system message first, the call and its result paired by id", async () => {
    const address = await newSession();
    const request = { ...address, agentName: "planner", systemInstruction: SYSTEM };
    const part = await ce.renderContext(request, RenderFormat.OPENAI_CHAT);
    assert.deepEqual(Object.keys(part), ["messages"]);
    const [system, user, assistant, tool, answer, ...rest] = part.messages;
    assert.deepEqual(system, { role: "system", content: "You plan trips." });
    assert.deepEqual(user, { role: "user", content: "Weather in Oslo?" });
    assert.ok(assistant?.role === "assistant");
    assert.deepEqual(assistant.tool_calls, [
      {
        type: "function",
        id: "call_1",
        function: { name: "lookup", arguments: '{"city": "Oslo"}' },
      },
    ]);
    assert.deepEqual(tool, {
      role: "tool",
      tool_call_id: "call_1",
      content: '{"weather": "sunny"}',
    });
    assert.deepEqual(answer, { role: "assistant", content: "Sunny." });
    // the context ends with the model's turn: the rendering adds the user turn google-adk adds
    assert.deepEqual(
      rest.map((m) => m.role),
      ["user"],
    );
  });

  it("OpenAI Responses: input items and the system instruction as instructions", async () => {
    const address = await newSession();
    const request = { ...address, agentName: "planner", systemInstruction: SYSTEM };
    const part = await ce.renderContext(request, RenderFormat.OPENAI_RESPONSES);
    assert.equal(part.instructions, "You plan trips.");
    assert.deepEqual(part.input.slice(0, 3), [
      {
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: "Weather in Oslo?" }],
      },
      { type: "function_call", call_id: "call_1", name: "lookup", arguments: '{"city": "Oslo"}' },
      { type: "function_call_output", call_id: "call_1", output: '{"weather": "sunny"}' },
    ]);
  });

  it("Anthropic Messages: the system parameter, tool_use and tool_result blocks", async () => {
    const address = await newSession();
    const request = { ...address, agentName: "planner", systemInstruction: SYSTEM };
    const part = await ce.renderContext(request, RenderFormat.ANTHROPIC_MESSAGES);
    assert.equal(part.system, "You plan trips.");
    assert.deepEqual(
      part.messages.map((m) => m.role),
      ["user", "assistant", "user", "assistant"],
    );
    const blocks = part.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
    assert.deepEqual(
      blocks.map((b) => b.type),
      ["text", "tool_use", "tool_result", "text"],
    );
  });

  it("equals requestPart of the raw answer; without a system instruction, no system", async () => {
    const address = await newSession();
    for (const format of FORMATS) {
      const part = await ce.renderContext({ ...address, agentName: "planner" }, format);
      const raw = await ce.buildContext({ ...address, agentName: "planner", render: { format } });
      assert.equal(raw.contents.length, 0, "a rendering answers without contents");
      assert.deepEqual(part, requestPart(raw.rendered, format));
      assert.ok(!("system" in part) && !("instructions" in part));
    }
  });

  it("a bad request is the server's INVALID_ARGUMENT naming the field", async () => {
    const address = await newSession();
    await assert.rejects(ce.renderContext(address, 42 as RenderableFormat), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.clientSide, false);
      assert.equal(err.metadata.field, "render.format");
      return true;
    });
  });
});

describe("buildContext with render.since", () => {
  it("sends only the items after the held ones; requestPart puts the held ones first", async () => {
    const address = await newSession();
    const request = { ...address, agentName: "planner" };
    const format = RenderFormat.ANTHROPIC_MESSAGES;
    const first = await ce.buildContext({ ...request, render: { format } });
    const held = partItems(requestPart(first.rendered, format));
    assert.equal(held.length, 4);
    await ce.appendEvent({ ...address, event: said("user", "i2", "And tomorrow?") });
    const since = { itemsCount: held.length, itemsDigest: first.rendered?.itemsDigest ?? "" };
    const next = await ce.buildContext({ ...request, render: { format, since } });
    assert.equal(next.rendered?.baseItemsCount, 4);
    assert.deepEqual(next.rendered?.items, [
      '{"role":"user","content":[{"type":"text","text":"And tomorrow?"}]}',
    ]);
    const whole = requestPart(next.rendered, format, held);
    assert.deepEqual(whole, await ce.renderContext(request, format));
  });
});

/** [base, items sent] the protocol prescribes for a view holding `held` whose whole rendering
 * is `whole`: only what follows the held items while they are its first ones, else all. */
function expectedWire(held: readonly unknown[], whole: readonly unknown[]): [number, number] {
  const first = held.length <= whole.length && held.every((x, i) => isDeepStrictEqual(x, whole[i]));
  const base = first ? held.length : 0;
  return [base, whole.length - base];
}

describe("RenderedView", () => {
  for (const format of FORMATS) {
    it(`${RenderFormat[format]}: whole parts through appends, a rewind, a compaction, a reset`, async () => {
      const address = await newSession();
      const request = { ...address, agentName: "planner", systemInstruction: SYSTEM };
      const view = ce.renderedView(request, format);
      assert.equal(view.format, format);
      assert.deepEqual(view.items, []);
      /** One build: its part equals a fresh full rendering, and the view holds its items. */
      const build = async (overrides = {}) => {
        const held = view.items;
        const wire = sent.length;
        const rendering = await view.build(overrides);
        // What crossed the wire is what the protocol prescribes.
        assert.deepEqual(sent[wire], expectedWire(held, partItems(rendering.part)));
        const full = await ce.renderContext(request, format);
        assert.deepEqual(rendering.part, full);
        assert.deepEqual(view.items, partItems(full));
        assert.equal(view.digest, rendering.answer.rendered?.itemsDigest);
        return rendering;
      };

      await build();
      const count = view.items.length;
      const unchanged = await build();
      assert.equal(unchanged.answer.rendered?.baseItemsCount, count);
      assert.equal(unchanged.answer.rendered?.items.length, 0);

      await ce.appendEvents({
        ...address,
        events: [said("planner", "i2", "Rain tomorrow."), said("user", "i2", "And after?")],
      });
      const grown = await build({ invocationId: "i2" });
      if (format === RenderFormat.ANTHROPIC_MESSAGES) {
        // no added tail: the held items stay the first ones
        assert.equal(grown.answer.rendered?.baseItemsCount, count);
      }
      const longer = view.items.length;
      await ce.appendEvent({ ...address, event: said("planner", "i2", "Sun.") });
      // the context ended with the user's turn (no added tail): the held items stay first
      const next = await build();
      assert.equal(next.answer.rendered?.baseItemsCount, longer);

      // A rewind drops the second turn: the held items are no longer the first ones.
      await ce.rewindSession({ ...address, rewindBeforeInvocationId: "i2" });
      const rewound = await build();
      assert.equal(rewound.answer.rendered?.baseItemsCount, 0);
      assert.equal(view.items.length, count);

      // A summary of the first turn replaces its contents.
      await summarizeFirstEvent(ce, address, "Asked about Oslo.");
      const compacted = await build();
      assert.ok(JSON.stringify(compacted.part).includes("Asked about Oslo."));

      view.reset();
      assert.equal(view.digest, "");
      assert.deepEqual(view.items, []);
      assert.equal((await build()).answer.rendered?.baseItemsCount, 0);
    });
  }

  it("a failed build keeps what the view held; the part's arrays are the caller's", async () => {
    const format = RenderFormat.ANTHROPIC_MESSAGES;
    const address = await newSession();
    const view = ce.renderedView({ ...address, agentName: "planner" }, format);
    const first = await view.build();
    const count = view.items.length;
    first.part.messages.push({ role: "user", content: "not the view's" });
    assert.equal(view.items.length, count);
    await assert.rejects(view.build({ sessionId: "" }), { code: "INVALID_ARGUMENT" });
    assert.equal(view.items.length, count);
    await ce.appendEvent({ ...address, event: said("user", "i2", "And tomorrow?") });
    const next = await view.build();
    assert.equal(next.answer.rendered?.baseItemsCount, count);
    assert.deepEqual(
      next.part,
      await ce.renderContext({ ...address, agentName: "planner" }, format),
    );
  });
});
