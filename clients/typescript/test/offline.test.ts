/**
 * The client without a real server: error decoding, client-side validation, which calls are
 * retried (and with the same event ids), deadlines and cancellation. An in-memory Connect router
 * plays the server.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import {
  AppendEventResponseSchema,
  ContextEngineClient,
  ContextEngineError,
  ErrorInfoSchema,
  type Event,
  GetSessionResponseSchema,
  SessionService,
  SubscriptionService,
  toContextEngineError,
} from "../src/index.js";

function errorWithInfo(code: Code, reason: string, metadata: Record<string, string>) {
  const info = { reason, domain: "contextengine.v1", metadata };
  return new ConnectError("server says no", code, undefined, [
    { desc: ErrorInfoSchema, value: info },
  ]);
}

/** A client on an in-memory router; `calls` counts what reached the "server". */
function fakeClient(
  impl: Parameters<typeof createRouterTransport>[0],
  options: { attempts?: number; timeoutMs?: number } = {},
) {
  const transport = createRouterTransport(impl);
  return new ContextEngineClient("127.0.0.1:1", { ...options, transport, retryBackoffMs: 1 });
}

describe("errors", () => {
  it("exposes the gRPC code and the ErrorInfo reason and metadata", () => {
    const err = toContextEngineError(
      errorWithInfo(Code.NotFound, "SESSION_NOT_FOUND", { session_id: "s1" }),
      "SessionService/GetSession",
    );
    assert.ok(err instanceof ContextEngineError);
    assert.equal(err.code, "NOT_FOUND");
    assert.equal(err.grpcCode, 5);
    assert.equal(err.reason, "SESSION_NOT_FOUND");
    assert.equal(err.domain, "contextengine.v1");
    assert.deepEqual(err.metadata, { session_id: "s1" });
    assert.equal(err.detail, "server says no");
    assert.equal(err.clientSide, false);
    assert.equal(
      err.message,
      "SessionService/GetSession: NOT_FOUND SESSION_NOT_FOUND: server says no",
    );
  });

  it("a status without details has an empty reason", () => {
    const err = toContextEngineError(new ConnectError("boom", Code.Internal));
    assert.equal(err.code, "INTERNAL");
    assert.equal(err.reason, "");
    assert.deepEqual(err.metadata, {});
  });

  it("gRPC's own refusal of an oversized request is REQUEST_TOO_LARGE", () => {
    const server = toContextEngineError(
      new ConnectError(
        "Received message larger than max (9437201 vs. 8388608)",
        Code.ResourceExhausted,
      ),
    );
    assert.equal(server.reason, "REQUEST_TOO_LARGE");
    assert.deepEqual(server.metadata, {
      request_bytes: "9437201",
      transport_limit_bytes: "8388608",
      refused_by: "server_transport",
    });
    assert.equal(server.clientSide, false);
    const client = toContextEngineError(
      new ConnectError(
        "message size 70000000 is larger than configured writeMaxBytes 67108864",
        Code.ResourceExhausted,
      ),
    );
    assert.equal(client.reason, "REQUEST_TOO_LARGE");
    assert.equal(client.metadata.refused_by, "client");
    assert.equal(client.clientSide, true);
    const other = toContextEngineError(new ConnectError("quota", Code.ResourceExhausted));
    assert.equal(other.reason, "");
  });

  it("anything else becomes UNKNOWN", () => {
    const err = toContextEngineError(new TypeError("oops"));
    assert.equal(err.code, "UNKNOWN");
    assert.match(err.message, /oops/);
  });
});

describe("client-side validation", () => {
  let reached = 0;
  const ce = fakeClient(({ service }) => {
    service(SessionService, {
      getSession: () => {
        reached += 1;
        return create(GetSessionResponseSchema);
      },
    });
  });

  const cases: Array<[string, () => unknown, string]> = [
    [
      "getSession without a session id",
      () => ce.getSession({ appName: "a", userId: "u" }),
      "session_id",
    ],
    ["getSession without an app", () => ce.getSession({ userId: "u", sessionId: "s" }), "app_name"],
    ["createSession without a user", () => ce.createSession({ appName: "a" }), "user_id"],
    [
      "appendEvent without an event",
      () => ce.appendEvent({ appName: "a", userId: "u", sessionId: "s" }),
      "event",
    ],
    [
      "appendEvent without an author",
      () => ce.appendEvent({ appName: "a", userId: "u", sessionId: "s", event: { id: "e" } }),
      "event.author",
    ],
    [
      "appendEvents with an author missing",
      () =>
        ce.appendEvents({
          appName: "a",
          userId: "u",
          sessionId: "s",
          events: [{ author: "user" }, {}],
        }),
      "events[1].author",
    ],
    [
      "rewindSession without an invocation",
      () => ce.rewindSession({ appName: "a", userId: "u", sessionId: "s" }),
      "rewind_before_invocation_id",
    ],
    [
      "buildContext without a session",
      () => ce.buildContext({ appName: "a", userId: "u" }),
      "session_id",
    ],
    ["updateAppConfig without a config", () => ce.updateAppConfig({}), "config"],
    ["updateAppConfig without an app", () => ce.updateAppConfig({ config: {} }), "config.app_name"],
    [
      "getSessionConfig without a session id",
      () => ce.getSessionConfig({ appName: "a", userId: "u" }),
      "session_id",
    ],
    [
      "updateSessionConfig without a user",
      () => ce.updateSessionConfig({ appName: "a", sessionId: "s", config: {} }),
      "user_id",
    ],
    [
      "updateSessionConfig without a config",
      () => ce.updateSessionConfig({ appName: "a", userId: "u", sessionId: "s" }),
      "config",
    ],
    ["compact without a user", () => ce.compact({ appName: "a", sessionId: "s" }), "user_id"],
    [
      "subscribeEvents (session scope) without a session",
      () => ce.subscribeEvents({ appName: "a", userId: "u" }),
      "session_id",
    ],
    [
      "searchMemory without a user",
      () => ce.searchMemory({ appName: "a", query: "peanuts" }),
      "user_id",
    ],
    [
      "watchSessionState without a session",
      () => ce.watchSessionState({ appName: "a", userId: "u", sessionId: "" }),
      "session_id",
    ],
    ["listContextTools without an app", () => ce.listContextTools({ userId: "u" }), "app_name"],
    [
      "callContextTool without a session",
      () => ce.callContextTool({ appName: "a", userId: "u", call: { name: "context_status" } }),
      "session_id",
    ],
  ];
  for (const [name, call, field] of cases) {
    it(`${name}: MISSING_FIELD ${field}, before sending`, () => {
      assert.throws(call, (err: unknown) => {
        assert.ok(err instanceof ContextEngineError);
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.equal(err.reason, "MISSING_FIELD");
        assert.deepEqual(err.metadata, { field });
        assert.equal(err.clientSide, true);
        assert.match(err.message, new RegExp(`${field.replace(/[[\]]/g, "\\$&")} is required`));
        return true;
      });
      assert.equal(reached, 0);
    });
  }

  it("Unix sockets are refused with a clear message", () => {
    assert.throws(() => new ContextEngineClient("unix:/run/ce.sock"), /Unix sockets/);
  });
});

describe("retries", () => {
  it("an append is retried after UNAVAILABLE with the same event id and timestamp", async () => {
    const seen: Event[] = [];
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        appendEvent: (req) => {
          if (req.event) {
            seen.push(req.event);
          }
          if (seen.length < 3) {
            throw new ConnectError("connection reset", Code.Unavailable);
          }
          return create(AppendEventResponseSchema, { event: req.event, stored: true });
        },
      });
    });
    const response = await ce.appendEvent({
      appName: "a",
      userId: "u",
      sessionId: "s",
      event: { author: "user" },
    });
    assert.equal(seen.length, 3);
    const ids = new Set(seen.map((e) => e.id));
    const timestamps = new Set(seen.map((e) => e.timestamp));
    assert.equal(ids.size, 1);
    assert.equal(timestamps.size, 1);
    assert.match(response.event?.id ?? "", /^[0-9a-f-]{36}$/);
    assert.ok((response.event?.timestamp ?? 0) > 1.7e9);
  });

  it("events of one batch get distinct, increasing timestamps", async () => {
    let timestamps: number[] = [];
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        appendEvents: (req) => {
          timestamps = req.events.map((e) => e.timestamp);
          return {};
        },
      });
    });
    await ce.appendEvents({
      appName: "a",
      userId: "u",
      sessionId: "s",
      events: [{ author: "a" }, { author: "b" }, { author: "c", timestamp: 5 }],
    });
    assert.equal(timestamps.length, 3);
    assert.ok((timestamps[0] ?? 0) < (timestamps[1] ?? 0));
    assert.equal(timestamps[2], 5);
  });

  it("the session configuration calls are retried after UNAVAILABLE", async () => {
    const calls = { get: 0, update: 0 };
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        getSessionConfig: () => {
          calls.get += 1;
          if (calls.get < 2) {
            throw new ConnectError("connection reset", Code.Unavailable);
          }
          return { effectiveCompactionConfig: { compactionInterval: 2, overlapSize: 0 } };
        },
        updateSessionConfig: (req) => {
          calls.update += 1;
          if (calls.update < 3) {
            throw new ConnectError("connection reset", Code.Unavailable);
          }
          return {
            config: req.config,
            effectiveCompactionConfig: req.config?.eventsCompactionConfig,
          };
        },
      });
    });
    const address = { appName: "a", userId: "u", sessionId: "s" };
    const got = await ce.getSessionConfig(address);
    assert.equal(got.effectiveCompactionConfig?.compactionInterval, 2);
    const config = { eventsCompactionConfig: { tokenThreshold: 100, eventRetentionSize: 1 } };
    const updated = await ce.updateSessionConfig({ ...address, config });
    assert.equal(updated.effectiveCompactionConfig?.tokenThreshold, 100);
    assert.deepEqual(calls, { get: 2, update: 3 });
  });

  it("createSession is never retried", async () => {
    let calls = 0;
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        createSession: () => {
          calls += 1;
          throw new ConnectError("down", Code.Unavailable);
        },
      });
    });
    await assert.rejects(ce.createSession({ appName: "a", userId: "u" }), { code: "UNAVAILABLE" });
    assert.equal(calls, 1);
  });

  it("server errors are not retried and keep their code and reason", async () => {
    let calls = 0;
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        getSession: () => {
          calls += 1;
          throw errorWithInfo(Code.NotFound, "SESSION_NOT_FOUND", { session_id: "s" });
        },
      });
    });
    await assert.rejects(ce.getSession({ appName: "a", userId: "u", sessionId: "s" }), {
      code: "NOT_FOUND",
      reason: "SESSION_NOT_FOUND",
      metadata: { session_id: "s" },
      clientSide: false,
    });
    assert.equal(calls, 1);
  });

  it("attempts: 1 disables retries", async () => {
    let calls = 0;
    const ce = fakeClient(
      ({ service }) => {
        service(SessionService, {
          getSession: () => {
            calls += 1;
            throw new ConnectError("down", Code.Unavailable);
          },
        });
      },
      { attempts: 1 },
    );
    await assert.rejects(ce.getSession({ appName: "a", userId: "u", sessionId: "s" }));
    assert.equal(calls, 1);
  });

  it("the deadline covers the retries", async () => {
    let calls = 0;
    const ce = fakeClient(
      ({ service }) => {
        service(SessionService, {
          getSession: async () => {
            calls += 1;
            await new Promise((r) => setTimeout(r, 40));
            throw new ConnectError("down", Code.Unavailable);
          },
        });
      },
      { attempts: 100, timeoutMs: 150 },
    );
    const started = Date.now();
    await assert.rejects(ce.getSession({ appName: "a", userId: "u", sessionId: "s" }));
    const took = Date.now() - started;
    assert.ok(took < 400, `took ${took} ms`);
    assert.ok(calls >= 2 && calls <= 5, `${calls} calls`);
  });

  it("an aborted signal cancels the call with CANCELLED", async () => {
    const ce = fakeClient(({ service }) => {
      service(SessionService, {
        // Never answers; gives up when the call goes away.
        getSession: (_req, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
          }),
      });
    });
    const controller = new AbortController();
    const pending = ce.getSession(
      { appName: "a", userId: "u", sessionId: "s" },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(new Error("user left")), 20);
    await assert.rejects(pending, (err: unknown) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "CANCELLED");
      assert.match(err.message, /user left/);
      return true;
    });
  });
});

describe("followed streams (in memory)", () => {
  it("a lagged subscriber resumes from the cursor in the error", async () => {
    const requests: bigint[] = [];
    const ce = fakeClient(({ service }) => {
      service(SubscriptionService, {
        async *subscribeEvents(req) {
          requests.push(req.afterSequence);
          const from = Number(req.afterSequence);
          for (let seq = from + 1; seq <= from + 2; seq++) {
            yield {
              frame: {
                case: "event",
                value: { cursor: String(seq), event: { sequence: BigInt(seq) } },
              },
            };
          }
          if (from === 0) {
            throw errorWithInfo(Code.ResourceExhausted, "SUBSCRIBER_LAGGED", { cursor: "2" });
          }
        },
      });
    });
    const seen: string[] = [];
    for await (const frame of ce.subscribeEvents({ appName: "a", userId: "u", sessionId: "s" })) {
      if (frame.frame.case === "event") {
        seen.push(frame.frame.value.cursor);
      }
    }
    assert.deepEqual(seen, ["1", "2", "3", "4"]);
    assert.deepEqual(requests, [0n, 2n]);
  });

  it("gives up after maxFailures failures in a row", async () => {
    let opened = 0;
    const ce = fakeClient(({ service }) => {
      service(SubscriptionService, {
        // biome-ignore lint/correctness/useYield: a stream that fails before its first frame
        async *subscribeEvents() {
          opened += 1;
          throw new ConnectError("gone", Code.Unavailable);
        },
      });
    });
    const frames = ce.subscribeEvents(
      { appName: "a", userId: "u", sessionId: "s" },
      { maxFailures: 3 },
    );
    await assert.rejects(frames.next(), { code: "UNAVAILABLE" });
    assert.equal(opened, 3);
  });

  it("a non-resumable error ends the iteration at once", async () => {
    const ce = fakeClient(({ service }) => {
      service(SubscriptionService, {
        // biome-ignore lint/correctness/useYield: a stream that fails before its first frame
        async *subscribeEvents() {
          throw errorWithInfo(Code.InvalidArgument, "INVALID_CURSOR", { field: "after_sequence" });
        },
      });
    });
    const frames = ce.subscribeEvents({
      appName: "a",
      userId: "u",
      sessionId: "s",
      afterSequence: 9n,
    });
    await assert.rejects(frames.next(), { code: "INVALID_ARGUMENT", reason: "INVALID_CURSOR" });
  });

  it("a silent stream is reopened after the idle timeout", async () => {
    let opened = 0;
    const ce = fakeClient(({ service }) => {
      service(SubscriptionService, {
        async *subscribeEvents() {
          opened += 1;
          if (opened === 1) {
            await new Promise(() => undefined); // silent forever
          }
          yield { frame: { case: "caughtUp", value: { cursor: "0" } } };
        },
      });
    });
    const frames = ce.subscribeEvents(
      { appName: "a", userId: "u", sessionId: "s" },
      { idleTimeoutMs: 50 },
    );
    const first = await frames.next();
    assert.equal(first.done, false);
    assert.equal(opened, 2);
    await frames.return();
  });
});
