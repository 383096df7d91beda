/**
 * W3C trace context from the client: a real `contextengine serve` started here with traces on
 * (`--tracing-otlp-endpoint` to a port nobody listens on: spans are made, their export fails
 * quietly) and JSON logs, whose line of each RPC names the trace id of the RPC's span. When the
 * call is made under a span of the agent's, that span's trace id must be the one logged (the
 * sidecar's span is its child); with `traceContext: false` it must not.
 */
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import {
  type Context,
  type ContextManager,
  context,
  ROOT_CONTEXT,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { ContextEngineClient } from "../src/index.js";
import { type Sidecar, startSidecar } from "./sidecar.js";

/** The API's context made current per async flow (what the SDK's context manager does). */
class StorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

let sidecar: Sidecar;
let target: string;
let logFile: string;

before(async () => {
  assert.ok(context.setGlobalContextManager(new StorageContextManager()));
  sidecar = await startSidecar({
    args: ["--log-format", "json", "--tracing-otlp-endpoint", "http://127.0.0.1:9"],
    logLevel: "INFO",
  });
  target = sidecar.target;
  logFile = sidecar.logFile;
});

after(() => {
  sidecar?.stop();
  context.disable();
});

/** The trace id the sidecar logged for the CreateSession of `appName` (waits for its line). */
async function loggedTraceId(appName: string): Promise<string | undefined> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    for (const line of readFileSync(logFile, "utf8").split("\n")) {
      if (!line.startsWith("{")) continue;
      const record = JSON.parse(line) as Record<string, unknown>;
      if (record.app === appName && String(record.method).endsWith("CreateSession")) {
        return record.trace_id as string | undefined;
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`no CreateSession line for ${appName} in the sidecar's log`);
}

/** Creates a session of a new app under a span of `traceId` (sampled), with the client given. */
async function createUnderSpan(client: ContextEngineClient, traceId: string): Promise<string> {
  const appName = `ts-trace-${randomBytes(4).toString("hex")}`;
  const span = trace.wrapSpanContext({
    traceId,
    spanId: randomBytes(8).toString("hex"),
    traceFlags: TraceFlags.SAMPLED,
  });
  await context.with(trace.setSpan(context.active(), span), () =>
    client.createSession({ appName, userId: "u" }),
  );
  return appName;
}

describe("W3C trace context", () => {
  it("makes the sidecar's RPC span part of the current span's trace", async () => {
    const client = new ContextEngineClient(target);
    try {
      const traceId = randomBytes(16).toString("hex");
      const appName = await createUnderSpan(client, traceId);
      assert.equal(await loggedTraceId(appName), traceId);
    } finally {
      client.close();
    }
  });

  it("sends nothing with traceContext: false", async () => {
    const client = new ContextEngineClient(target, { traceContext: false });
    try {
      const traceId = randomBytes(16).toString("hex");
      const appName = await createUnderSpan(client, traceId);
      const logged = await loggedTraceId(appName);
      assert.match(logged ?? "", /^[0-9a-f]{32}$/, "the sidecar traces the RPC on its own");
      assert.notEqual(logged, traceId);
    } finally {
      client.close();
    }
  });
});
