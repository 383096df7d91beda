/**
 * An agent loop around a fake model, the way a TypeScript agent uses the sidecar:
 *
 *   1. append the user's message,
 *   2. build the context and "call the model" with it,
 *   3. append the model's tool call, run the tool, append its result, build the context again,
 *   4. append the model's answer, end the invocation (the engine may compact in the background),
 *   5. print the context the next model call would get.
 *
 * Run it against a sidecar (`make run` in the repository root):
 *
 *   cd clients/typescript && npm run example -- --target 127.0.0.1:50151
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type Content,
  ContextEngineClient,
  ContextEngineError,
  type Init,
  ModelProvider,
  type PartSchema,
} from "../src/index.js";

const APP = "example-agent-loop";
const AGENT = "calculator";
const MODEL = { provider: ModelProvider.GEMINI, model: "fake-model-1" };

type PartInit = Init<typeof PartSchema>;

/** The fake model: calls `multiply` for a question about a product, then answers with its result. */
function fakeModel(contents: readonly Content[]): { parts: PartInit[]; promptTokens: number } {
  const promptTokens = JSON.stringify(contents).length / 4;
  const last = contents[contents.length - 1];
  const result = last?.parts.find((p) => p.functionResponse)?.functionResponse?.response;
  if (result !== undefined) {
    return { parts: [{ text: `17 * 23 = ${String(result.result)}` }], promptTokens };
  }
  const question = last?.parts.find((p) => p.text)?.text ?? "";
  const factors = /(\d+)\s*\*\s*(\d+)/.exec(question);
  if (factors === null) {
    return { parts: [{ text: "I can only multiply." }], promptTokens };
  }
  const args = { a: Number(factors[1]), b: Number(factors[2]) };
  return {
    parts: [{ functionCall: { id: `call-${randomUUID()}`, name: "multiply", args } }],
    promptTokens,
  };
}

const TOOLS: Record<string, (args: JsonObject) => JsonObject> = {
  multiply: (args) => ({ result: Number(args.a) * Number(args.b) }),
};

/** JSON with sorted keys: a Struct is a map on the wire, so its key order is not kept. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function render(content: Content): string {
  return content.parts
    .map((part) => {
      if (part.functionCall) {
        return `call ${part.functionCall.name}(${stableJson(part.functionCall.args ?? {})})`;
      }
      if (part.functionResponse) {
        const response = stableJson(part.functionResponse.response ?? {});
        return `${part.functionResponse.name} -> ${response}`;
      }
      return (part.text ?? "").replaceAll("\n", " ");
    })
    .join(" + ");
}

export async function agentLoop(target: string, question: string): Promise<Content[]> {
  const ce = new ContextEngineClient(target, { timeoutMs: 5_000 });
  try {
    const { session } = await ce.createSession({ appName: APP, userId: "ada" });
    const address = { appName: APP, userId: "ada", sessionId: session?.id ?? "" };
    const invocationId = `inv-${randomUUID()}`;

    // 1. The user's message (the client gives it an id, so a retried append is not a duplicate).
    await ce.appendEvent({
      ...address,
      event: {
        author: "user",
        invocationId,
        content: { role: "user", parts: [{ text: question }] },
      },
    });

    for (let turn = 0; turn < 4; turn++) {
      // 2. The context for this model call, then the (fake) model call itself.
      const context = await ce.buildContext({ ...address, agentName: AGENT, model: MODEL });
      const reply = fakeModel(context.contents);
      const recorded = await ce.appendEvent({
        ...address,
        expectedLastSequence: context.lastSequence, // nobody else wrote in between
        event: {
          author: AGENT,
          invocationId,
          content: { role: "model", parts: reply.parts },
          usageMetadata: { promptTokenCount: Math.round(reply.promptTokens) },
        },
      });
      const calls = reply.parts.flatMap((p) => (p.functionCall ? [p.functionCall] : []));
      if (calls.length === 0) {
        break;
      }
      // 3. Run the tools and record their results.
      await ce.appendEvents({
        ...address,
        expectedLastSequence: recorded.lastSequence,
        events: calls.map((call) => ({
          author: AGENT,
          invocationId,
          content: {
            role: "user",
            parts: [
              {
                functionResponse: {
                  id: call.id ?? "",
                  name: call.name ?? "",
                  response: TOOLS[call.name ?? ""]?.((call.args ?? {}) as JsonObject) ?? {},
                },
              },
            ],
          },
        })),
      });
    }

    // 4. The invocation is over: the engine decides in the background whether to compact.
    await ce.endInvocation({ ...address, invocationId });

    // 5. What the next model call would see.
    const context = await ce.buildContext({ ...address, agentName: AGENT, model: MODEL });
    console.log(
      `context for ${AGENT} in session ${address.sessionId}: ${context.contents.length} contents, ` +
        `${context.tokenEstimate?.tokens ?? 0} tokens (${context.tokenEstimate?.counter ?? "?"}), ` +
        `last sequence ${context.lastSequence}`,
    );
    for (const content of context.contents) {
      console.log(`  ${(content.role ?? "").padEnd(5)} | ${render(content)}`);
    }
    return context.contents;
  } finally {
    ce.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { target: { type: "string" }, question: { type: "string" } },
  });
  const target = values.target ?? process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";
  agentLoop(target, values.question ?? "What is 17 * 23?").catch((err: unknown) => {
    if (err instanceof ContextEngineError) {
      console.error(`error: ${err.message} (code ${err.code}, reason ${err.reason || "none"})`);
    } else {
      console.error(err);
    }
    process.exitCode = 1;
  });
}
