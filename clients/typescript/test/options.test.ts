/**
 * BuildContext's options (prompt caching, memory preload, skipCompaction) and the memory calls,
 * through the client against a real sidecar: the fingerprint the client computes equals the
 * server's, and google-adk's cache decisions follow one another as an agent records them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type BuildContextInit,
  type BuildContextOptions,
  CacheAction,
  ContextEngineClient,
  fingerprint,
  ModelProvider,
} from "../src/index.js";
import { said, serverTarget, stopServer, uniqueApp } from "./helpers.js";

let ce: ContextEngineClient;

before(async () => {
  ce = new ContextEngineClient(await serverTarget(), { timeoutMs: 5_000 });
});

after(() => {
  ce.close();
  stopServer();
});

async function newSession(appName: string, userId = "u") {
  const { session } = await ce.createSession({ appName, userId });
  assert.ok(session);
  return { appName, userId, sessionId: session.id };
}

const TOOLS: JsonObject[] = [
  {
    function_declarations: [
      { name: "get_weather", description: "A city's weather.", parameters: { type: "OBJECT" } },
      { name: "get_time", description: "A city's local time." },
    ],
  },
  { google_search: {} },
];

describe("BuildContext: prompt caching", () => {
  it("the client's fingerprint equals the server's; FINGERPRINT_ONLY, CREATE, REUSE", async () => {
    const appName = uniqueApp();
    await ce.updateAppConfig({
      config: { appName, contextCacheConfig: { ttlSeconds: 600, cacheIntervals: 5 } },
    });
    const address = await newSession(appName);
    const options: BuildContextOptions = {
      systemInstruction: { parts: [{ text: "You report the weather." }] },
      tools: TOOLS,
      toolConfig: { function_calling_config: { mode: "AUTO" } },
    };
    const actions: string[] = [];
    for (const [invocationId, question] of [
      ["i1", "Weather in Paris?"],
      ["i2", "And in Rome? café 漢字 😀"],
      ["i3", "And in Oslo?"],
    ] as const) {
      await ce.appendEvent({ ...address, event: said("user", invocationId, question) });
      const request: BuildContextInit = {
        ...address,
        ...options,
        agentName: "forecaster",
        model: { provider: ModelProvider.GEMINI, model: "gemini-2.0-flash" },
        invocationId,
      };
      const context = await ce.buildContext(request);
      assert.equal(context.cacheableContentsCount, context.contents.length - 1);
      assert.match(context.fingerprint, /^[0-9a-f]{64}$/);
      assert.equal(
        fingerprint(request, context.contents, context.cacheableContentsCount),
        context.fingerprint,
      );
      const decision = context.cacheDecision;
      assert.ok(decision?.cacheMetadata);
      const metadata = decision.cacheMetadata;
      assert.equal(
        fingerprint(request, context.contents, metadata.contentsCount ?? 0),
        metadata.fingerprint,
      );
      actions.push(CacheAction[decision.action]);
      if (decision.action === CacheAction.CREATE) {
        // What the agent does after creating the cache with google-genai.
        assert.equal(decision.ttlSeconds, 600);
        metadata.cacheName = "cachedContents/ts-test";
        metadata.invocationsUsed = 1;
        metadata.createdAt = Date.now() / 1000;
        metadata.expireTime = metadata.createdAt + decision.ttlSeconds;
      }
      if (decision.action === CacheAction.REUSE) {
        assert.equal(decision.cacheName, "cachedContents/ts-test");
        assert.equal(metadata.invocationsUsed, 2);
        assert.ok(decision.sendFromIndex > 0);
      }
      await ce.appendEvent({
        ...address,
        event: {
          ...said("forecaster", invocationId, "Sunny."),
          cacheMetadata: metadata,
          usageMetadata: { promptTokenCount: 3000 },
        },
      });
    }
    assert.deepEqual(actions, ["FINGERPRINT_ONLY", "CREATE", "REUSE"]);
  });

  it("a plain request object has a fingerprint; the answer has one only with a cache config", async () => {
    const appName = uniqueApp();
    const address = await newSession(appName);
    await ce.appendEvent({ ...address, event: said("user", "i1", "Weather in Paris?") });
    await ce.appendEvent({ ...address, event: said("forecaster", "i1", "Sunny.") });
    // As the guide writes it: no annotation, and none of the fingerprinted fields.
    const request = { ...address, agentName: "forecaster" };
    const mine = fingerprint(request, [], 0);
    assert.equal(mine, fingerprint({}, [], 0));
    const plain = await ce.buildContext(request);
    assert.equal(plain.contents.length, 2);
    assert.equal(plain.fingerprint, ""); // no contextCacheConfig: no prompt caching at all
    assert.equal(plain.cacheableContentsCount, 0);
    assert.equal(plain.cacheDecision, undefined);
    await ce.updateAppConfig({ config: { appName, contextCacheConfig: {} } });
    const cached = await ce.buildContext(request);
    assert.equal(cached.cacheableContentsCount, 2);
    assert.equal(
      fingerprint(request, cached.contents, cached.cacheableContentsCount),
      cached.fingerprint,
    );
    assert.notEqual(cached.fingerprint, mine);
  });

  it("invalid tools and tool configs are INVALID_MODEL_INPUT naming the field", async () => {
    const appName = uniqueApp();
    await ce.updateAppConfig({ config: { appName, contextCacheConfig: {} } });
    const address = await newSession(appName);
    await assert.rejects(
      ce.buildContext({ ...address, tools: [{ google_search: {} }, { x: 1 }] }),
      {
        code: "INVALID_ARGUMENT",
        reason: "INVALID_MODEL_INPUT",
        metadata: { field: "tools[1]" },
      },
    );
    await assert.rejects(
      ce.buildContext({ ...address, toolConfig: { function_calling_config: { mode: "OFTEN" } } }),
      {
        code: "INVALID_ARGUMENT",
        reason: "INVALID_MODEL_INPUT",
        metadata: { field: "tool_config" },
      },
    );
  });

  it("without a cache configuration the cache fields stay empty", async () => {
    const address = await newSession(uniqueApp());
    await ce.appendEvent({ ...address, event: said("user", "i1", "Hi") });
    const context = await ce.buildContext({ ...address, tools: TOOLS, invocationId: "i1" });
    assert.equal(context.fingerprint, "");
    assert.equal(context.cacheDecision, undefined);
    assert.equal(context.contents.length, 1);
  });
});

describe("memory", () => {
  it("add, search, preload into BuildContext, delete", async () => {
    const appName = uniqueApp();
    const old = await newSession(appName, "gina");
    await ce.appendEvents({
      ...old,
      events: [
        said("user", "i1", "I am allergic to peanuts."),
        said("chef", "i1", "Noted: no peanuts, ever."),
        said("user", "i2", "私は東京に住んでいます。"),
      ],
    });
    const added = await ce.addSessionToMemory(old);
    assert.equal(added.entryCount, 3n);
    assert.equal(added.addedCount, 3n);

    const found = await ce.searchMemory({ appName, userId: "gina", query: "peanuts" });
    assert.equal(found.memories.length, 2);
    assert.ok(found.memories.every((m) => m.sessionId === old.sessionId && m.score > 0));
    const tokyo = await ce.searchMemory({ appName, userId: "gina", query: "東京" });
    assert.deepEqual(
      tokyo.memories.map((m) => m.sequence),
      [3n],
    );
    await assert.rejects(ce.searchMemory({ appName, userId: "gina", query: "  " }), {
      code: "INVALID_ARGUMENT",
      reason: "MISSING_FIELD",
      metadata: { field: "query" },
    });

    const now = await newSession(appName, "gina");
    await ce.appendEvent({ ...now, event: said("user", "j1", "A satay sauce with peanuts?") });
    const context = await ce.buildContext({
      ...now,
      agentName: "chef",
      preloadMemory: true,
      skipCompaction: true,
    });
    assert.equal(context.memoryPreload?.query, "A satay sauce with peanuts?");
    assert.equal(context.memoryPreload?.memories.length, 2);
    assert.match(context.memoryPreload?.text ?? "", /allergic to peanuts/);
    assert.equal(context.contents.length, 1, "the contents are unchanged");
    assert.equal(context.compactionSequence, 0n);

    const queried = await ce.buildContext({
      ...now,
      preloadMemory: true,
      memoryQuery: "Tokyo 東京",
    });
    assert.equal(queried.memoryPreload?.query, "Tokyo 東京");
    assert.deepEqual(
      queried.memoryPreload?.memories.map((m) => m.sequence),
      [3n],
    );

    const deleted = await ce.deleteMemory({ appName, userId: "gina", sessionId: old.sessionId });
    assert.equal(deleted.deletedCount, 3n);
    const none = await ce.searchMemory({ appName, userId: "gina", query: "peanuts" });
    assert.deepEqual(none.memories, []);
  });
});
