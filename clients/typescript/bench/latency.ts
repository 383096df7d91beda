/**
 * Latency of AppendEvent and BuildContext from the TypeScript client, one call at a time, in the
 * agent-loop pattern: a session with a prefilled conversation, then per iteration one appended
 * event and one context built for the next model call. `python -m bench clients` runs the same
 * workload with the Python client against the same sidecar and prints both side by side.
 *
 *   npx tsx bench/latency.ts --target 127.0.0.1:50151 [--iterations 500] [--json]
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { ContextEngineClient } from "../src/index.js";

export interface LatencyOptions {
  iterations: number;
  prefill: number;
  warmup: number;
}

export interface LatencyResult {
  client: string;
  iterations: number;
  prefill: number;
  append_ms: number[];
  build_context_ms: number[];
}

function turn(i: number) {
  const user = i % 2 === 0;
  return {
    author: user ? "user" : "assistant",
    invocationId: `inv-${Math.floor(i / 2)}`,
    content: {
      role: user ? "user" : "model",
      parts: [
        {
          text: user
            ? `Question number ${i}: what about city ${i}?`
            : `Answer ${i}: sunny, ${i % 30} C.`,
        },
      ],
    },
  };
}

async function runSession(
  ce: ContextEngineClient,
  appName: string,
  iterations: number,
  prefill: number,
  append: number[],
  build: number[],
): Promise<void> {
  const { session } = await ce.createSession({ appName, userId: "bench" });
  const address = { appName, userId: "bench", sessionId: session?.id ?? "" };
  await ce.appendEvents({ ...address, events: Array.from({ length: prefill }, (_, i) => turn(i)) });
  for (let i = 0; i < iterations; i++) {
    let t0 = performance.now();
    await ce.appendEvent({ ...address, event: turn(prefill + i) });
    append.push(performance.now() - t0);
    t0 = performance.now();
    const context = await ce.buildContext({ ...address, agentName: "assistant" });
    build.push(performance.now() - t0);
    if (context.lastSequence !== BigInt(prefill + i + 1)) {
      throw new Error(
        `the context reflects sequence ${context.lastSequence}, not ${prefill + i + 1}`,
      );
    }
  }
}

export async function measure(target: string, options: LatencyOptions): Promise<LatencyResult> {
  const ce = new ContextEngineClient(target, { timeoutMs: 10_000 });
  const appName = `bench-ts-${randomBytes(4).toString("hex")}`;
  try {
    await runSession(ce, appName, options.warmup, options.prefill, [], []);
    const append: number[] = [];
    const build: number[] = [];
    await runSession(ce, appName, options.iterations, options.prefill, append, build);
    return {
      client: "typescript",
      iterations: options.iterations,
      prefill: options.prefill,
      append_ms: append,
      build_context_ms: build,
    };
  } finally {
    ce.close();
  }
}

/** The value at `fraction` of the sorted samples (nearest rank, as bench/__init__.py). */
export function percentile(samples: readonly number[], fraction: number): number {
  const ordered = [...samples].sort((a, b) => a - b);
  const index = Math.min(
    ordered.length - 1,
    Math.max(0, Math.round(fraction * ordered.length) - 1),
  );
  return ordered[index] ?? Number.NaN;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      target: { type: "string" },
      iterations: { type: "string", default: "500" },
      prefill: { type: "string", default: "40" },
      warmup: { type: "string", default: "30" },
      json: { type: "boolean", default: false },
    },
  });
  const target = values.target ?? process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";
  const result = await measure(target, {
    iterations: Number(values.iterations),
    prefill: Number(values.prefill),
    warmup: Number(values.warmup),
  });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else {
    for (const [name, samples] of [
      ["AppendEvent", result.append_ms],
      ["BuildContext", result.build_context_ms],
    ] as const) {
      console.log(
        `typescript ${name}: p50 ${percentile(samples, 0.5).toFixed(2)} ms, ` +
          `p99 ${percentile(samples, 0.99).toFixed(2)} ms (${samples.length} calls)`,
      );
    }
  }
}
