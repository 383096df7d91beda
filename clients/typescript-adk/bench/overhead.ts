/**
 * Per model call overhead of the drop-ins against ADK TypeScript's own in-memory session service
 * and in-process context building, at 100 / 1,000 / 10,000 events, both sides in the same run.
 *
 * Sides (one `@google/adk` Runner each, the same single LlmAgent on a scripted model that answers
 * every call with one text at once):
 *
 * - `ADK in-memory`: `InMemorySessionService`, ADK building the contents itself;
 * - `drop-ins sidecar`: `ContextEngineSessionService` + `ContextEnginePlugin` +
 *   `ContextEngineMemoryService` against a sidecar (`--target` / CONTEXTENGINE_TARGET, or a
 *   `contextengine serve --db :memory:` started from the repository's .venv).
 *
 * Per side and size: a session prefilled with that many events (alternating user and agent
 * turns, not timed: ADK's own `appendEvent` for ADK, the client's batched `appendEvents` for the
 * engine), then one untimed warm-up invocation and `--invocations` timed ones: `runAsync` with a
 * new user message until its generator is exhausted (the session read, the user event appended,
 * the contents built, the model call, the answer appended, `EndInvocation` for the drop-ins). No
 * compaction on either side. Printed: median and mean ms per invocation (one model call each)
 * and the ratio drop-ins / ADK at each size.
 *
 * Checks: every invocation's reply arrived, and the last model request of both sides had the
 * same contents.
 *
 *   cd clients/typescript-adk && npx tsx bench/overhead.ts [--invocations 20] [--sizes 100,1000,10000]
 */
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import type { ContextEngineClient } from "@contextengine/client";
import {
  type BaseSessionService,
  createEvent,
  type Event,
  InMemorySessionService,
  LlmAgent,
  Runner,
} from "@google/adk";
import type { Content } from "@google/genai";
import { serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import {
  ContextEngineMemoryService,
  ContextEnginePlugin,
  ContextEngineSessionService,
  eventToProto,
} from "../src/index.js";
import { ScriptedModel } from "../support/scripted_model.js";

const USER = "bench-user";
const BATCH = 500;

/** The prefill: alternating user and agent turns, `n` events, timestamps in the past (ms). */
function prefill(n: number): Event[] {
  const start = Date.now() - n * 1000;
  return Array.from({ length: n }, (_, i) =>
    createEvent({
      id: `e-${i}`,
      invocationId: `inv-${Math.floor(i / 2)}`,
      author: i % 2 === 0 ? "user" : "agent",
      content: {
        role: i % 2 === 0 ? "user" : "model",
        parts: [
          { text: `${i % 2 === 0 ? "question" : "answer"} ${i}: ${"lorem ipsum ".repeat(4)}` },
        ],
      },
      timestamp: start + i * 1000,
    }),
  );
}

interface Side {
  name: string;
  sessions: BaseSessionService;
  plugins: ContextEnginePlugin[];
  memory?: ContextEngineMemoryService;
  fill(app: string, sessionId: string, events: Event[]): Promise<void>;
}

async function timeSide(side: Side, size: number, invocations: number) {
  const app = uniqueApp("bench-ts-adk");
  const model = new ScriptedModel();
  const agent = new LlmAgent({ name: "agent", model, instruction: "Answer." });
  const runner = new Runner({
    appName: app,
    agent,
    sessionService: side.sessions,
    plugins: side.plugins,
    ...(side.memory ? { memoryService: side.memory } : {}),
  });
  const session = await side.sessions.createSession({ appName: app, userId: USER });
  await side.fill(app, session.id, prefill(size));
  const times: number[] = [];
  for (let i = 0; i <= invocations; i++) {
    model.script([{ text: `reply ${i}` }]);
    const started = performance.now();
    let replied = false;
    for await (const event of runner.runAsync({
      userId: USER,
      sessionId: session.id,
      newMessage: { role: "user", parts: [{ text: `message ${i}` }] },
    })) {
      if (event.errorMessage) {
        throw new Error(`${side.name}, ${size} events: ${event.errorCode} ${event.errorMessage}`);
      }
      replied ||= event.content?.parts?.[0]?.text === `reply ${i}`;
    }
    const elapsed = performance.now() - started;
    assert.ok(replied, `${side.name}: invocation ${i} had no reply`);
    if (i > 0) {
      times.push(elapsed); // the first is the warm-up
    }
  }
  const last = model.calls.at(-1)?.contents ?? [];
  return { times, last: JSON.parse(JSON.stringify(last)) as Content[] };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

async function engineFill(
  client: ContextEngineClient,
  app: string,
  sessionId: string,
  events: Event[],
): Promise<void> {
  for (let i = 0; i < events.length; i += BATCH) {
    await client.appendEvents({
      appName: app,
      userId: USER,
      sessionId,
      events: events.slice(i, i + BATCH).map(eventToProto),
    });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      target: { type: "string" },
      invocations: { type: "string", default: "20" },
      sizes: { type: "string", default: "100,1000,10000" },
    },
  });
  const invocations = Number(values.invocations);
  const sizes = (values.sizes ?? "").split(",").map(Number);
  const target = values.target ?? (await serverTarget());
  // large sessions on a loaded machine: a deadline well above the 10 s default
  const engine = new ContextEngineSessionService({ target, clientOptions: { timeoutMs: 120_000 } });
  const connection = engine.connection;
  const sides: Side[] = [
    {
      name: "ADK in-memory",
      sessions: new InMemorySessionService(),
      plugins: [],
      async fill(app, sessionId, events) {
        const session = await this.sessions.getSession({ appName: app, userId: USER, sessionId });
        assert.ok(session);
        for (const event of events) {
          await this.sessions.appendEvent({ session, event });
        }
      },
    },
    {
      name: "drop-ins sidecar",
      sessions: engine,
      plugins: [new ContextEnginePlugin({ connection })],
      memory: new ContextEngineMemoryService({ connection }),
      fill: (app, sessionId, events) => engineFill(engine.client, app, sessionId, events),
    },
  ];
  console.log(`invocations per side and size: ${invocations} (after 1 warm-up); target ${target}`);
  console.log("events   side               median ms   mean ms   drop-ins / ADK (median, mean)");
  try {
    for (const size of sizes) {
      const results = [];
      for (const side of sides) {
        results.push({ side, ...(await timeSide(side, size, invocations)) });
      }
      const [adk, dropIns] = results;
      assert.ok(adk && dropIns);
      assert.deepEqual(dropIns.last, adk.last, `${size}: the last model requests differ`);
      for (const r of results) {
        const ratio =
          r === dropIns
            ? `${(median(r.times) / median(adk.times)).toFixed(2)}x, ${(mean(r.times) / mean(adk.times)).toFixed(2)}x`
            : "";
        console.log(
          `${String(size).padStart(6)}   ${r.side.name.padEnd(18)} ${median(r.times).toFixed(2).padStart(9)} ${mean(r.times).toFixed(2).padStart(9)}   ${ratio}`,
        );
      }
    }
  } finally {
    engine.close();
    stopServer();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
