/**
 * The client retries exactly the RPCs whose proto declares an `idempotency_level`: the proto
 * text, the generated descriptors the client reads (src/retries.ts) and the client's behaviour
 * against a "server" that answers every call UNAVAILABLE must agree.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport, type ServiceImpl } from "@connectrpc/connect";
import {
  CompactionService,
  ContextEngineClient,
  ContextService,
  ContextToolsService,
  MemoryService,
  SessionService,
  SubscriptionService,
} from "../src/index.js";
import { ALL_METHODS, isRetryable, RETRYABLE_METHODS } from "../src/retries.js";
import { REPO_ROOT } from "./helpers.js";

const PROTO_DIR = join(REPO_ROOT, "proto", "contextengine", "v1");

/** The RPCs a repeat could do twice: never retried. */
const NEVER_RETRIED = new Set([
  "SessionService/CreateSession",
  "SessionService/RewindSession",
  "CompactionService/Compact",
  "CompactionService/CommitCompaction",
  "ContextToolsService/CallContextTool",
]);

/** [every RPC, those with an idempotency_level option], from the .proto files' text. */
function declaredInProtoText(): [Set<string>, Set<string>] {
  const every = new Set<string>();
  const declared = new Set<string>();
  const rpc =
    /rpc (\w+)\([^)]*\) returns \([^)]*\)\s*(;|\{\s*option idempotency_level = (NO_SIDE_EFFECTS|IDEMPOTENT);\s*\})/g;
  for (const file of readdirSync(PROTO_DIR).filter((f) => f.endsWith("_service.proto"))) {
    const text = readFileSync(join(PROTO_DIR, file), "utf8");
    const service = /^service (\w+) \{/m.exec(text)?.[1];
    assert.ok(service, file);
    let found = 0;
    for (const match of text.matchAll(rpc)) {
      found += 1;
      const name = `${service}/${match[1]}`;
      every.add(name);
      if (match[3] !== undefined) {
        declared.add(name);
      }
    }
    assert.equal(found, text.split("rpc ").length - 1, file);
  }
  return [every, declared];
}

const sorted = (set: ReadonlySet<string>) => [...set].sort();

describe("retryability from the proto", () => {
  it("the retry set is the protos' declaration", () => {
    const [every, declared] = declaredInProtoText();
    assert.deepEqual(sorted(ALL_METHODS), sorted(every));
    assert.deepEqual(sorted(RETRYABLE_METHODS), sorted(declared));
    const never = new Set([...ALL_METHODS].filter((m) => !RETRYABLE_METHODS.has(m)));
    assert.deepEqual(sorted(never), sorted(NEVER_RETRIED));
  });

  it("an unknown method name is an error, not a silent no-retry", () => {
    assert.equal(isRetryable("SessionService/GetSession"), true);
    assert.equal(isRetryable("SessionService/CreateSession"), false);
    assert.throws(() => isRetryable("SessionService/GetSesion"), /no such RPC/);
  });

  it("the client retries exactly the declared RPCs", async () => {
    const ATTEMPTS = 3;
    const attempts = new Map<string, number>();
    function refuseAll<T extends DescService>(service: T): Partial<ServiceImpl<T>> {
      const impl: Record<string, () => never> = {};
      for (const m of service.methods) {
        impl[m.localName] = () => {
          const name = `${service.name}/${m.name}`;
          attempts.set(name, (attempts.get(name) ?? 0) + 1);
          throw new ConnectError("try again", Code.Unavailable);
        };
      }
      return impl as unknown as Partial<ServiceImpl<T>>;
    }
    const transport = createRouterTransport(({ service }) => {
      service(SessionService, refuseAll(SessionService));
      service(ContextService, refuseAll(ContextService));
      service(CompactionService, refuseAll(CompactionService));
      service(MemoryService, refuseAll(MemoryService));
      service(ContextToolsService, refuseAll(ContextToolsService));
      service(SubscriptionService, refuseAll(SubscriptionService));
    });
    const ce = new ContextEngineClient("127.0.0.1:1", {
      transport,
      attempts: ATTEMPTS,
      retryBackoffMs: 1,
    });
    const app = { appName: "a" };
    const user = { ...app, userId: "u" };
    const s = { ...user, sessionId: "s" };
    const event = { author: "user" };
    const calls: Record<string, () => Promise<unknown>> = {
      "SessionService/CreateSession": () => ce.createSession(user),
      "SessionService/GetSession": () => ce.getSession(s),
      "SessionService/ListSessions": () => ce.listSessions(app),
      "SessionService/DeleteSession": () => ce.deleteSession({ ...s, allowMissing: true }),
      "SessionService/AppendEvent": () => ce.appendEvent({ ...s, event }),
      "SessionService/AppendEvents": () => ce.appendEvents({ ...s, events: [event] }),
      "SessionService/ListEvents": () => ce.listEvents(s),
      "SessionService/RewindSession": () =>
        ce.rewindSession({ ...s, rewindBeforeInvocationId: "i" }),
      "SessionService/GetAppConfig": () => ce.getAppConfig(app),
      "SessionService/UpdateAppConfig": () => ce.updateAppConfig({ config: app }),
      "SessionService/GetSessionConfig": () => ce.getSessionConfig(s),
      "SessionService/UpdateSessionConfig": () => ce.updateSessionConfig({ ...s, config: {} }),
      "ContextService/BuildContext": () => ce.buildContext(s),
      "CompactionService/EndInvocation": () => ce.endInvocation(s),
      "CompactionService/Compact": () => ce.compact(s),
      "CompactionService/PlanCompaction": () => ce.planCompaction(s),
      "CompactionService/CommitCompaction": () => ce.commitCompaction(s),
      "CompactionService/ExpandSummary": () => ce.expandSummary(s),
      "CompactionService/GetCompactionStatus": () => ce.getCompactionStatus(s),
      "MemoryService/AddSessionToMemory": () => ce.addSessionToMemory(s),
      "MemoryService/AddEventsToMemory": () => ce.addEventsToMemory(s),
      "MemoryService/SearchMemory": () => ce.searchMemory({ ...user, query: "q" }),
      "MemoryService/DeleteMemory": () => ce.deleteMemory(user),
      "ContextToolsService/ListContextTools": () => ce.listContextTools(app),
      "ContextToolsService/CallContextTool": () =>
        ce.callContextTool({ ...s, call: { name: "context_summarize" } }),
    };
    // The streams resubscribe by their own policy; GetUserState has no wrapper here (raw only).
    const unwrapped = [
      "SubscriptionService/SubscribeEvents",
      "SubscriptionService/WatchSessionState",
      "SessionService/GetUserState",
    ];
    const wrapped = sorted(ALL_METHODS).filter((m) => !unwrapped.includes(m));
    assert.deepEqual(Object.keys(calls).sort(), wrapped);
    for (const [name, call] of Object.entries(calls)) {
      await assert.rejects(call(), { code: "UNAVAILABLE" }, name);
    }
    await assert.rejects(ce.deleteSession(s), { code: "UNAVAILABLE" }); // without allowMissing: once
    const expected = Object.fromEntries(
      Object.keys(calls).map((name) => [name, RETRYABLE_METHODS.has(name) ? ATTEMPTS : 1]),
    );
    expected["SessionService/DeleteSession"] = ATTEMPTS + 1;
    assert.deepEqual(Object.fromEntries([...attempts].sort()), expected);
  });
});
