/**
 * "Contents since" from the TypeScript client: per BuildContext after one appended event, the
 * response bytes on the wire and the client's wall time of a full answer against a `ContextView`
 * answer (reassembled, checked equal to the full one), in one run, at growing history lengths.
 *
 *   npx tsx bench/contents_since.ts --target 127.0.0.1:50151 [--sizes 1000,10000] [--rounds 20]
 */
import { parseArgs } from "node:util";
import { toBinary } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import {
  type BuildContextResponse,
  BuildContextResponseSchema,
  ContextEngineClient,
} from "../src/index.js";

function said(n: number) {
  const user = n % 2 === 0;
  return {
    author: user ? "user" : "agent",
    invocationId: `inv-${Math.floor(n / 2)}`,
    content: { role: user ? "user" : "model", parts: [{ text: `message ${n} `.repeat(20) }] },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      target: { type: "string", default: "127.0.0.1:50151" },
      sizes: { type: "string", default: "1000,10000" },
      rounds: { type: "string", default: "20" },
    },
  });
  const rounds = Number(values.rounds);
  const bytes: number[] = [];
  const record: Interceptor = (next) => async (request) => {
    const response = await next(request);
    if (!response.stream) {
      const answer = response.message as unknown as BuildContextResponse;
      bytes.push(toBinary(BuildContextResponseSchema, answer).length);
    }
    return response;
  };
  const ce = new ContextEngineClient(values.target, { timeoutMs: 60_000 });
  const spied = new ContextEngineClient(values.target, {
    timeoutMs: 60_000,
    interceptors: [record],
  });
  try {
    const { session } = await ce.createSession({ appName: `since-${Date.now()}`, userId: "u" });
    const address = { appName: session?.appName ?? "", userId: "u", sessionId: session?.id ?? "" };
    const view = spied.contextView({ ...address, agentName: "agent" });
    let n = 0;
    for (const size of values.sizes.split(",").map(Number)) {
      while (n < size) {
        const events = [];
        for (let k = 0; k < 500 && n < size; k++, n++) {
          events.push(said(n));
        }
        await ce.appendEvents({ ...address, events });
      }
      await view.build();
      let fullBytes = 0;
      let viewBytes = 0;
      let fullMs = 0;
      let viewMs = 0;
      for (let r = 0; r < rounds; r++) {
        await ce.appendEvent({ ...address, event: said(n++) });
        bytes.length = 0;
        let started = performance.now();
        const full = await spied.buildContext({ ...address, agentName: "agent" });
        fullMs += performance.now() - started;
        started = performance.now();
        const whole = await view.build();
        viewMs += performance.now() - started;
        const [fullSize = 0, viewSize = 0] = bytes;
        fullBytes += fullSize;
        viewBytes += viewSize;
        if (
          whole.contentsDigest !== full.contentsDigest ||
          whole.contents.length !== full.contents.length
        ) {
          throw new Error(`the view's answer differs from the full one at ${n} events`);
        }
      }
      console.log(
        `${size} events: full ${Math.round(fullBytes / rounds)} B ${(fullMs / rounds).toFixed(1)} ms` +
          ` | view ${Math.round(viewBytes / rounds)} B ${(viewMs / rounds).toFixed(1)} ms` +
          ` | bytes ${(fullBytes / viewBytes).toFixed(0)}x, time ${(fullMs / viewMs).toFixed(2)}x`,
      );
    }
  } finally {
    ce.close();
    spied.close();
  }
}

await main();
