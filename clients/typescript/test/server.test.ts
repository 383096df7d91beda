/**
 * The client against a real sidecar (CONTEXTENGINE_TARGET, or one started for this file): typed
 * server errors, idempotent appends, paging, a session's own configuration, followed streams that
 * survive a cut connection, and what happens when the server is down or hangs.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create, toJson } from "@bufbuild/protobuf";
import {
  ContextEngineClient,
  ContextEngineError,
  type EventsCompactionConfig,
  EventsCompactionConfigSchema,
  eventsOf,
  type Init,
  SessionConfigSchema,
  type SubscribeEventsResponse,
  SubscriptionScope,
} from "../src/index.js";
import { blackHole, closedPort, serverTarget, stopServer, tcpProxy, uniqueApp } from "./helpers.js";

let target: string;
let ce: ContextEngineClient;

before(async () => {
  target = await serverTarget();
  ce = new ContextEngineClient(target, { timeoutMs: 5_000 });
});

after(() => {
  ce.close();
  stopServer();
});

function said(text: string, extra: Record<string, unknown> = {}) {
  return { author: "user", content: { role: "user", parts: [{ text }] }, ...extra };
}

async function newSession(appName = uniqueApp()) {
  const { session } = await ce.createSession({ appName, userId: "u" });
  assert.ok(session);
  return { appName, userId: "u", sessionId: session.id };
}

describe("unary calls", () => {
  it("server errors keep their code, reason and metadata", async () => {
    const appName = uniqueApp();
    await assert.rejects(ce.getSession({ appName, userId: "u", sessionId: "nope" }), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "NOT_FOUND");
      assert.equal(err.reason, "SESSION_NOT_FOUND");
      assert.equal(err.domain, "contextengine.v1");
      assert.deepEqual(err.metadata, { app_name: appName, user_id: "u", session_id: "nope" });
      assert.equal(err.clientSide, false);
      assert.equal(err.method, "SessionService/GetSession");
      return true;
    });
  });

  it("a server-side validation error is surfaced unchanged", async () => {
    const address = await newSession();
    await assert.rejects(ce.appendEvent({ ...address, event: said("x", { timestamp: -1 }) }), {
      code: "INVALID_ARGUMENT",
      reason: "INVALID_EVENT",
      metadata: { field: "event.timestamp" },
    });
    await assert.rejects(
      ce.appendEvent({ ...address, expectedLastSequence: 7n, event: said("x") }),
      {
        code: "ABORTED",
        reason: "SEQUENCE_MISMATCH",
        metadata: { expected_last_sequence: "7", current_last_sequence: "0" },
      },
    );
  });

  it("an oversized request is REQUEST_TOO_LARGE at any size", async () => {
    const ref = await newSession();
    // The server's default limit is 4 MiB; its transport refuses beyond 8 MiB without ErrorInfo.
    for (const size of [5 * 1024 * 1024, 9 * 1024 * 1024]) {
      await assert.rejects(ce.appendEvent({ ...ref, event: said("x".repeat(size)) }), (err) => {
        assert.ok(err instanceof ContextEngineError);
        assert.equal(err.code, "RESOURCE_EXHAUSTED");
        assert.equal(err.reason, "REQUEST_TOO_LARGE");
        assert.ok(Number(err.metadata.request_bytes) > size, JSON.stringify(err.metadata));
        return true;
      });
    }
    await ce.appendEvent({ ...ref, event: said("fits") });
  });

  it("an append with a client-assigned id is idempotent", async () => {
    const address = await newSession();
    const first = await ce.appendEvent({ ...address, event: said("hello") });
    const id = first.event?.id ?? "";
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(first.duplicate, false);
    // The same event again (what a retry after a lost answer sends).
    const again = await ce.appendEvent({ ...address, event: first.event ?? {} });
    assert.equal(again.duplicate, true);
    assert.equal(again.event?.sequence, 1n);
    assert.equal(again.lastSequence, 1n);
  });

  it("iterateEvents pages through the whole log", async () => {
    const address = await newSession();
    await ce.appendEvents({
      ...address,
      events: Array.from({ length: 7 }, (_, i) => said(`m${i}`)),
    });
    const sequences: bigint[] = [];
    for await (const event of ce.iterateEvents({ ...address, pageSize: 3 })) {
      sequences.push(event.sequence);
    }
    assert.deepEqual(sequences, [1n, 2n, 3n, 4n, 5n, 6n, 7n]);
    const names: string[] = [];
    for await (const session of ce.iterateSessions({ appName: address.appName, pageSize: 1 })) {
      names.push(session.id);
    }
    assert.deepEqual(names, [address.sessionId]);
  });

  it("state in plain JSON, in and out", async () => {
    const appName = uniqueApp();
    const { session } = await ce.createSession({
      appName,
      userId: "u",
      state: { "app:model": "m", "user:tags": ["a", "b"], nested: { x: null, y: 1.5 } },
    });
    assert.deepEqual(session?.state, {
      "app:model": "m",
      "user:tags": ["a", "b"],
      nested: { x: null, y: 1.5 },
    });
  });
});

describe("session configuration", () => {
  const SLIDING = { compactionInterval: 2, overlapSize: 1 };
  const TOKENS = { tokenThreshold: 5_000, eventRetentionSize: 3 };

  function sameCompaction(
    actual: EventsCompactionConfig | undefined,
    expected: Init<typeof EventsCompactionConfigSchema>,
  ) {
    assert.ok(actual, "a compaction configuration");
    const want = create(EventsCompactionConfigSchema, expected);
    assert.deepEqual(
      toJson(EventsCompactionConfigSchema, actual),
      toJson(EventsCompactionConfigSchema, want),
    );
  }

  it("round trip: empty until set, then the stored configuration", async () => {
    const address = await newSession();
    const empty = await ce.getSessionConfig(address);
    assert.equal(empty.config?.updateTime, 0);
    assert.equal(empty.config?.eventsCompactionConfig, undefined);
    assert.equal(empty.effectiveCompactionConfig, undefined); // neither the app nor the session

    const updated = await ce.updateSessionConfig({
      ...address,
      config: { eventsCompactionConfig: TOKENS },
    });
    assert.ok((updated.config?.updateTime ?? 0) > 1.7e9, "the server's update time");
    sameCompaction(updated.config?.eventsCompactionConfig, TOKENS);
    sameCompaction(updated.effectiveCompactionConfig, TOKENS);

    const got = await ce.getSessionConfig(address, { timeoutMs: 2_000 });
    assert.ok(updated.config && got.config);
    assert.deepEqual(
      toJson(SessionConfigSchema, got.config),
      toJson(SessionConfigSchema, updated.config),
    );
    sameCompaction(got.effectiveCompactionConfig, TOKENS);
  });

  it("the configuration in effect: the app's, the session's override, the app's again", async () => {
    const appName = uniqueApp();
    await ce.updateAppConfig({ config: { appName, eventsCompactionConfig: SLIDING } });
    const address = await newSession(appName);
    const other = await newSession(appName);

    const before = await ce.getSessionConfig(address);
    assert.equal(before.config?.eventsCompactionConfig, undefined);
    sameCompaction(before.effectiveCompactionConfig, SLIDING); // the app's

    const override = await ce.updateSessionConfig({
      ...address,
      config: { eventsCompactionConfig: TOKENS },
    });
    sameCompaction(override.effectiveCompactionConfig, TOKENS);
    sameCompaction((await ce.getSessionConfig(address)).effectiveCompactionConfig, TOKENS);
    // Another session of the app keeps the app's.
    sameCompaction((await ce.getSessionConfig(other)).effectiveCompactionConfig, SLIDING);

    // An empty configuration removes the override.
    const cleared = await ce.updateSessionConfig({ ...address, config: {} });
    assert.equal(cleared.config?.eventsCompactionConfig, undefined);
    sameCompaction(cleared.effectiveCompactionConfig, SLIDING);
    const after = await ce.getSessionConfig(address);
    assert.equal(after.config?.eventsCompactionConfig, undefined);
    sameCompaction(after.effectiveCompactionConfig, SLIDING);
  });

  it("a missing session is NOT_FOUND / SESSION_NOT_FOUND", async () => {
    const appName = uniqueApp();
    const address = { appName, userId: "u", sessionId: "nope" };
    await assert.rejects(ce.getSessionConfig(address), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "NOT_FOUND");
      assert.equal(err.reason, "SESSION_NOT_FOUND");
      assert.deepEqual(err.metadata, { app_name: appName, user_id: "u", session_id: "nope" });
      assert.equal(err.clientSide, false);
      assert.equal(err.method, "SessionService/GetSessionConfig");
      return true;
    });
    await assert.rejects(
      ce.updateSessionConfig({ ...address, config: { eventsCompactionConfig: SLIDING } }),
      (err) => {
        assert.ok(err instanceof ContextEngineError);
        assert.equal(err.code, "NOT_FOUND");
        assert.equal(err.reason, "SESSION_NOT_FOUND");
        assert.equal(err.metadata.session_id, "nope");
        assert.equal(err.method, "SessionService/UpdateSessionConfig");
        return true;
      },
    );
  });

  it("an invalid configuration is INVALID_COMPACTION_CONFIG naming the field", async () => {
    const address = await newSession();
    await assert.rejects(
      ce.updateSessionConfig({
        ...address,
        config: { eventsCompactionConfig: { compactionInterval: 2 } },
      }),
      {
        code: "INVALID_ARGUMENT",
        reason: "INVALID_COMPACTION_CONFIG",
        metadata: { field: "config.events_compaction_config.compaction_interval" },
        clientSide: false,
      },
    );
    await assert.rejects(
      ce.updateSessionConfig({ ...address, config: { eventsCompactionConfig: {} } }),
      {
        code: "INVALID_ARGUMENT",
        reason: "INVALID_COMPACTION_CONFIG",
        metadata: { field: "config.events_compaction_config" },
      },
    );
    // Nothing was stored.
    const got = await ce.getSessionConfig(address);
    assert.equal(got.config?.updateTime, 0);
    assert.equal(got.config?.eventsCompactionConfig, undefined);
  });

  it("a missing id or configuration is rejected before sending", () => {
    const cases: Array<[() => unknown, string]> = [
      [() => ce.getSessionConfig({ appName: "a", userId: "u", sessionId: "" }), "session_id"],
      [() => ce.getSessionConfig({ appName: "a", sessionId: "s" }), "user_id"],
      [() => ce.updateSessionConfig({ userId: "u", sessionId: "s", config: {} }), "app_name"],
      [() => ce.updateSessionConfig({ appName: "a", userId: "u", sessionId: "s" }), "config"],
    ];
    for (const [call, field] of cases) {
      assert.throws(call, (err: unknown) => {
        assert.ok(err instanceof ContextEngineError);
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.equal(err.reason, "MISSING_FIELD");
        assert.deepEqual(err.metadata, { field });
        assert.equal(err.clientSide, true);
        return true;
      });
    }
  });
});

describe("a server that is down or hangs", () => {
  it("a closed port: a clear UNAVAILABLE error, quickly, after the retries", async () => {
    const port = await closedPort();
    const down = new ContextEngineClient(`127.0.0.1:${port}`, { timeoutMs: 3_000 });
    const started = Date.now();
    await assert.rejects(down.getSession({ appName: "a", userId: "u", sessionId: "s" }), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "UNAVAILABLE");
      assert.equal(err.clientSide, true);
      assert.match(err.message, /cannot reach the contextengine sidecar at http:\/\/127\.0\.0\.1:/);
      assert.match(err.message, /ECONNREFUSED/);
      assert.match(err.message, /4 attempts/);
      return true;
    });
    assert.ok(Date.now() - started < 3_000);
    down.close();
  });

  it("a hung server: DEADLINE_EXCEEDED after the deadline, not a hang", async () => {
    const hole = await blackHole();
    const hung = new ContextEngineClient(hole.target);
    const started = Date.now();
    await assert.rejects(
      hung.buildContext({ appName: "a", userId: "u", sessionId: "s" }, { timeoutMs: 700 }),
      (err) => {
        assert.ok(err instanceof ContextEngineError);
        assert.equal(err.code, "DEADLINE_EXCEEDED");
        assert.match(err.message, /within the 700 ms deadline/);
        return true;
      },
    );
    const took = Date.now() - started;
    assert.ok(took >= 650 && took < 2_500, `took ${took} ms`);
    hung.close();
    await hole.close();
  });

  it("a subscription to a closed port fails after maxFailures attempts", async () => {
    const port = await closedPort();
    const down = new ContextEngineClient(`127.0.0.1:${port}`, { retryBackoffMs: 5 });
    const frames = down.subscribeEvents(
      { appName: "a", userId: "u", sessionId: "s" },
      { maxFailures: 3 },
    );
    await assert.rejects(frames.next(), { code: "UNAVAILABLE" });
    down.close();
  });
});

describe("followed streams", () => {
  it("replay, caught up, live; resumes transparently after the connection is cut", async () => {
    const address = await newSession();
    await ce.appendEvents({ ...address, events: [said("one"), said("two")] });
    const proxy = await tcpProxy(target);
    const viaProxy = new ContextEngineClient(proxy.target, { retryBackoffMs: 10 });
    const reconnects: string[] = [];
    const frames = viaProxy.subscribeEvents(address, {
      onReconnect: (err) => reconnects.push(err.code),
    });
    const seen: string[] = [];
    const kinds: string[] = [];
    for await (const frame of frames) {
      kinds.push(frame.frame.case ?? "");
      for (const event of eventsOf(frame)) {
        seen.push(event.event?.content?.parts[0]?.text ?? "");
      }
      if (frame.frame.case === "caughtUp" && kinds.filter((k) => k === "caughtUp").length === 1) {
        await ce.appendEvent({ ...address, event: said("three") });
      }
      if (seen.at(-1) === "three") {
        proxy.cut(); // the connection dies; events are recorded while the client is away
        await ce.appendEvents({ ...address, events: [said("four"), said("five")] });
      }
      if (seen.at(-1) === "five" && frame.frame.case === "caughtUp") {
        break; // the replay after the reconnection ends with a new caughtUp
      }
    }
    assert.deepEqual(seen, ["one", "two", "three", "four", "five"]);
    assert.ok(reconnects.length >= 1, "the stream was reopened");
    // A cut HTTP/2 connection surfaces as one of these, depending on when it is noticed.
    const resumable = ["UNAVAILABLE", "INTERNAL", "CANCELLED"];
    assert.ok(
      reconnects.every((code) => resumable.includes(code)),
      `${reconnects}`,
    );
    assert.ok(proxy.connections() >= 2);
    assert.equal(kinds.filter((k) => k === "caughtUp").length, 2);
    viaProxy.close();
    await proxy.close();
  });

  it("an app subscription resumes from its global cursor", async () => {
    const appName = uniqueApp();
    const a = await newSession(appName);
    const proxy = await tcpProxy(target);
    const viaProxy = new ContextEngineClient(proxy.target, { retryBackoffMs: 10 });
    const frames = viaProxy.subscribeEvents({ scope: SubscriptionScope.APP, appName });
    const texts: string[] = [];
    let last: SubscribeEventsResponse | undefined;
    for await (const frame of frames) {
      last = frame;
      if (frame.frame.case === "caughtUp" && texts.length === 0) {
        await ce.appendEvent({ ...a, event: said("a1") });
      }
      for (const event of eventsOf(frame)) {
        texts.push(event.event?.content?.parts[0]?.text ?? "");
        if (texts.length === 1) {
          proxy.cut();
          const b = await newSession(appName);
          await ce.appendEvent({ ...b, event: said("b1") });
        }
      }
      if (texts.length === 2) {
        break;
      }
    }
    assert.deepEqual(texts, ["a1", "b1"]);
    assert.equal(last?.frame.case, "event");
    viaProxy.close();
    await proxy.close();
  });

  it("an AbortSignal ends a subscription with CANCELLED", async () => {
    const address = await newSession();
    const controller = new AbortController();
    const frames = ce.subscribeEvents(address, { signal: controller.signal });
    const first = await frames.next();
    assert.equal(first.value?.frame.case, "caughtUp");
    const pending = frames.next(); // nothing will come
    setTimeout(() => controller.abort(), 30);
    await assert.rejects(pending, { code: "CANCELLED" });
  });

  it("break closes the stream (the server sees the cancellation)", async () => {
    const address = await newSession();
    await ce.appendEvent({ ...address, event: said("x") });
    for await (const frame of ce.subscribeEvents(address)) {
      assert.equal(frame.frame.case, "event");
      break;
    }
    // The client still works on the same connection.
    const { session } = await ce.getSession(address);
    assert.equal(session?.lastSequence, 1n);
  });

  it("watchSessionState: snapshot, deltas, and a new snapshot after a cut", async () => {
    const appName = uniqueApp();
    const { session } = await ce.createSession({ appName, userId: "u", state: { turns: 0 } });
    const address = { appName, userId: "u", sessionId: session?.id ?? "" };
    const proxy = await tcpProxy(target);
    const viaProxy = new ContextEngineClient(proxy.target, { retryBackoffMs: 10 });
    const kinds: string[] = [];
    let state: Record<string, unknown> = {};
    for await (const frame of viaProxy.watchSessionState(address)) {
      kinds.push(frame.frame.case ?? "");
      if (frame.frame.case === "snapshot") {
        state = { ...frame.frame.value.state };
        if (kinds.length === 1) {
          await ce.appendEvent({
            ...address,
            event: said("t", { actions: { stateDelta: { turns: 1 } } }),
          });
        } else {
          break;
        }
      } else if (frame.frame.case === "delta") {
        Object.assign(state, frame.frame.value.delta);
        proxy.cut();
        await ce.appendEvent({
          ...address,
          event: said("t", { actions: { stateDelta: { turns: 2 } } }),
        });
      }
    }
    assert.deepEqual(kinds, ["snapshot", "delta", "snapshot"]);
    assert.deepEqual(state, { turns: 2 });
    viaProxy.close();
    await proxy.close();
  });
});
