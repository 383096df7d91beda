/**
 * ContextEnginePlugin and ContextEngineMemoryService on ADK TypeScript's Runner against a real
 * sidecar: the model receives the engine's contents (equal to ADK TypeScript's own for a
 * conversation where google-adk 2.13 and ADK TypeScript agree: tool calls, parallel calls, a
 * transfer), EndInvocation after a run lets the engine compact (the next call sees the summary),
 * a session the plugin's engine does not have is a clear error, and memory search finds what
 * was added.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  type BuildContextResponse,
  ContextEngineClient,
  type ContextEngineClientOptions,
  ContextEngineError,
} from "@contextengine/client";
import {
  type BaseSessionService,
  FunctionTool,
  InMemorySessionService,
  LlmAgent,
  PreloadMemoryTool,
  Runner,
} from "@google/adk";
import { type Content, type Schema, Type } from "@google/genai";
import { serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import {
  applyCacheDecision,
  Connection,
  ContextEngineMemoryService,
  ContextEnginePlugin,
  ContextEngineSessionService,
} from "../src/index.js";
import { type Answer, ScriptedModel } from "../support/scripted_model.js";

type Interceptor = NonNullable<ContextEngineClientOptions["interceptors"]>[number];

const target = await serverTarget();
const sessions = new ContextEngineSessionService({ target });
const connection = sessions.connection;

after(() => {
  sessions.close();
  stopServer();
});

function schema(name: string, type: Type): Schema {
  return { type: Type.OBJECT, properties: { [name]: { type } }, required: [name] };
}

const SCRIPT: [string, Answer[]][] = [
  ["hello", [{ text: "hi from root" }]],
  [
    "weather in two cities?",
    [
      {
        calls: [
          { id: "w1", name: "lookup", args: { city: "Oslo" } },
          { id: "w2", name: "lookup", args: { city: "Lima" } },
        ],
      },
      { text: "both sunny" },
    ],
  ],
  [
    "ask the helper",
    [
      { calls: [{ id: "t1", name: "transfer_to_agent", args: { agentName: "helper" } }] },
      { text: "helper here" },
    ],
  ],
  ["thanks", [{ text: "you are welcome" }]],
];

interface Setup {
  sessionService: BaseSessionService;
  plugins: ContextEnginePlugin[];
  memoryService?: ContextEngineMemoryService;
  afterTurn?: (sessionId: string) => Promise<void>;
}

/** Waits until the engine's background compaction of the session is done. */
async function compacted(app: string, sessionId: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const status = await sessions.client.getCompactionStatus({
      appName: app,
      userId: "u",
      sessionId,
    });
    assert.equal(status.failures, 0n, status.lastError);
    if (!status.running) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail("compaction still running after 30 s");
}

/** Runs SCRIPT; the contents of every model call, in order. */
async function run(app: string, setup: Setup, script = SCRIPT): Promise<Content[][]> {
  const model = new ScriptedModel();
  const lookup = new FunctionTool({
    name: "lookup",
    description: "Weather.",
    parameters: schema("city", Type.STRING),
    execute: (input) => ({ weather: `sunny in ${(input as { city: string }).city}` }),
  });
  const helper = new LlmAgent({
    name: "helper",
    model,
    description: "Helps.",
    instruction: "Help.",
  });
  const root = new LlmAgent({
    name: "root",
    model,
    instruction: "Plan.",
    tools: [lookup],
    subAgents: [helper],
  });
  const { afterTurn, ...services } = setup;
  const runner = new Runner({ appName: app, agent: root, ...services });
  const session = await setup.sessionService.createSession({ appName: app, userId: "u" });
  for (const [text, answers] of script) {
    model.script(answers);
    for await (const event of runner.runAsync({
      userId: "u",
      sessionId: session.id,
      newMessage: { role: "user", parts: [{ text }] },
    })) {
      assert.equal(event.errorMessage, undefined, event.errorMessage);
    }
    assert.equal(model.left, 0, `answers left after ${text}`);
    await afterTurn?.(session.id);
  }
  return model.calls.map((call) => JSON.parse(JSON.stringify(call.contents)) as Content[]);
}

describe("ContextEnginePlugin", () => {
  it("the model receives the engine's contents, equal to ADK TypeScript's own", async () => {
    const own = await run("own-app", { sessionService: new InMemorySessionService(), plugins: [] });
    const app = uniqueApp();
    const engine = await run(app, {
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
    });
    assert.equal(engine.length, own.length);
    assert.ok(own.length >= 6);
    // root alone (calls 0-3: text, parallel calls and their responses): the two ports agree
    for (let i = 0; i < 4; i++) {
      assert.deepEqual(engine[i], own[i], `model call ${i}`);
    }
    // the helper's calls: the engine quotes another agent's turn between markers after its
    // default other-agent preamble (the app's other_agent_preamble sets ADK's text) where ADK
    // TypeScript 2.0 writes "For context:"; the engine's contents are the same in every port
    const helperCall = JSON.stringify(engine[4]);
    assert.match(helperCall, /<<<BEGIN_QUOTED_AGENT_CONTENT>>>/);
    assert.doesNotMatch(helperCall, /For context:/);
    assert.match(JSON.stringify(own[4]), /For context:/);
  });

  it("after a run the engine compacts; the next model call sees the summary", async () => {
    const app = uniqueApp();
    await sessions.client.updateAppConfig({
      config: {
        appName: app,
        eventsCompactionConfig: { compactionInterval: 2, overlapSize: 0 },
        summarizer: { kind: { case: "extractive", value: {} } },
      },
    });
    const calls = await run(app, {
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
      afterTurn: (sessionId) => compacted(app, sessionId),
    });
    const texts = calls.map((contents) =>
      contents.flatMap((c) => (c.parts ?? []).map((p) => p.text ?? "")).join("\n"),
    );
    assert.ok(
      texts.some((t) => t.includes("User requests:")),
      `no summary in any call: ${texts.at(-1)}`,
    );
    const last = calls.at(-1) ?? [];
    assert.ok(last.length < 8, `the last call still has ${last.length} contents`);
  });

  it("with contents since the model receives the same contents; the engine sent only new ones", async () => {
    const sent: Array<[number, number]> = [];
    const record: Interceptor = (next) => async (request) => {
      const response = await next(request);
      if (!response.stream && response.method.name === "BuildContext") {
        const answer = response.message as unknown as BuildContextResponse;
        sent.push([answer.baseContentsCount, answer.contents.length]);
      }
      return response;
    };
    const spied = new ContextEngineClient(target, { interceptors: [record] });
    try {
      const whole = await run(uniqueApp(), {
        sessionService: sessions,
        plugins: [new ContextEnginePlugin({ connection, contextViews: 0 })],
      });
      const since = await run(uniqueApp(), {
        sessionService: sessions,
        plugins: [new ContextEnginePlugin({ connection: Connection.over(spied) })],
      });
      assert.deepEqual(since, whole);
      assert.equal(sent.length, since.length);
      // root's four calls, then the helper's two (a transfer starts the helper's view): each call
      // after a view's first held the earlier contents and received only the new turn
      assert.deepEqual(
        sent.map(([base, count]) => [base > 0, base + count]),
        since.map((contents, i) => [i !== 0 && i !== 4, contents.length]),
      );
      const onWire = sent.reduce((n, [, count]) => n + count, 0);
      const received = since.reduce((n, contents) => n + contents.length, 0);
      assert.ok(onWire <= received / 2, `${onWire} contents sent for ${received} received`);
    } finally {
      spied.close();
    }
    assert.throws(() => new ContextEnginePlugin({ connection, contextViews: -1 }), RangeError);
  });

  it("a session the plugin's engine does not have is a clear error", async () => {
    const app = uniqueApp();
    const model = new ScriptedModel();
    const runner = new Runner({
      appName: app,
      agent: new LlmAgent({ name: "root", model }),
      sessionService: new InMemorySessionService(),
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await runner.sessionService.createSession({ appName: app, userId: "u" });
    model.script([{ text: "never" }]);
    const run = async () => {
      for await (const event of runner.runAsync({
        userId: "u",
        sessionId: session.id,
        newMessage: { role: "user", parts: [{ text: "hi" }] },
      })) {
        if (event.errorMessage) {
          throw new Error(event.errorMessage);
        }
      }
    };
    await assert.rejects(run, /is not in the plugin's engine/);
    assert.equal(model.calls.length, 0, "the model was called without the engine's contents");
  });
});

describe("prompt caching", () => {
  it("the engine's cache decision is recorded on the model's events", async () => {
    const app = uniqueApp();
    await sessions.client.updateAppConfig({
      config: { appName: app, contextCacheConfig: { minTokens: 0 } },
    });
    const model = new ScriptedModel();
    const runner = new Runner({
      appName: app,
      agent: new LlmAgent({ name: "root", model, instruction: "Plan." }),
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await sessions.createSession({ appName: app, userId: "u" });
    for (const text of ["one", "two"]) {
      model.script([{ text: `answer ${text}` }]);
      for await (const _ of runner.runAsync({
        userId: "u",
        sessionId: session.id,
        newMessage: { role: "user", parts: [{ text }] },
      })) {
        // read back below
      }
    }
    const stored = await sessions.client.getSession({
      appName: app,
      userId: "u",
      sessionId: session.id,
    });
    const answers = (stored.session?.events ?? []).filter((e) => e.author === "root");
    assert.equal(answers.length, 2);
    for (const answer of answers) {
      assert.ok(answer.cacheMetadata?.fingerprint, "no cache metadata on the model's event");
      assert.ok((answer.cacheMetadata?.contentsCount ?? 0) >= 0);
      assert.equal(answer.cacheMetadata?.cacheName, undefined);
    }
    // without a cache to reuse, the whole request went out
    assert.ok(model.calls.every((call) => call.request.config?.systemInstruction !== undefined));
  });

  it("a cache to reuse is sent as cachedContent, without what it holds", () => {
    const request = {
      contents: [
        { role: "user", parts: [{ text: "one" }] },
        { role: "model", parts: [{ text: "two" }] },
        { role: "user", parts: [{ text: "three" }] },
      ],
      config: { systemInstruction: "Plan.", tools: [{ functionDeclarations: [] }], toolConfig: {} },
      liveConnectConfig: {},
      toolsDict: {},
    };
    applyCacheDecision(request, { cacheName: "cachedContents/abc", sendFromIndex: 2 });
    assert.deepEqual(request.config, { cachedContent: "cachedContents/abc" });
    assert.deepEqual(request.contents, [{ role: "user", parts: [{ text: "three" }] }]);
    const whole = {
      contents: [{ role: "user", parts: [{ text: "x" }] }],
      config: {},
      liveConnectConfig: {},
      toolsDict: {},
    };
    applyCacheDecision(whole, { cacheName: "", sendFromIndex: 1 });
    assert.equal(whole.contents.length, 1);
  });

  it("an agent with PreloadMemoryTool is refused at the model call", async () => {
    const app = uniqueApp();
    const model = new ScriptedModel();
    const runner = new Runner({
      appName: app,
      agent: new LlmAgent({ name: "root", model, tools: [new PreloadMemoryTool()] }),
      sessionService: sessions,
      memoryService: new ContextEngineMemoryService({ connection }),
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await sessions.createSession({ appName: app, userId: "u" });
    model.script([{ text: "never" }]);
    const run = async () => {
      for await (const event of runner.runAsync({
        userId: "u",
        sessionId: session.id,
        newMessage: { role: "user", parts: [{ text: "hi" }] },
      })) {
        if (event.errorMessage) {
          throw new Error(event.errorMessage);
        }
      }
    };
    await assert.rejects(run, /PreloadMemoryTool/);
    assert.equal(model.calls.length, 0);
  });
});

describe("ContextEngineMemoryService", () => {
  it("a session added to memory is found by keyword", async () => {
    const app = uniqueApp();
    const memory = new ContextEngineMemoryService({ connection });
    await run(app, {
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
      memoryService: memory,
    });
    const listed = await sessions.listSessions({ appName: app, userId: "u" });
    const session = await sessions.getSession({
      appName: app,
      userId: "u",
      sessionId: listed.sessions[0]?.id ?? "",
    });
    assert.ok(session);
    await memory.addSessionToMemory(session);
    const found = await memory.searchMemory({ appName: app, userId: "u", query: "two cities" });
    assert.ok(found.memories.length > 0);
    const first = found.memories[0];
    assert.deepEqual(first?.content, { role: "user", parts: [{ text: "weather in two cities?" }] });
    assert.equal(first?.author, "user");
    assert.match(first?.timestamp ?? "", /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(await memory.searchMemory({ appName: app, userId: "u", query: "  " }), {
      memories: [],
    });
    const nobody = await memory.searchMemory({ appName: app, userId: "other", query: "cities" });
    assert.equal(nobody.memories.length, 0);
    await assert.rejects(
      memory.addSessionToMemory({ ...session, id: "not-in-the-engine" }),
      (err: unknown) => err instanceof ContextEngineError && err.reason === "SESSION_NOT_FOUND",
    );
  });
});
