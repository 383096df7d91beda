/**
 * An ADK TypeScript agent on the contextengine sidecar: a root agent with a tool (`lookup`) and
 * a sub-agent (`helper`, with its own tool `convert`), on a scripted fake model, run by ADK's own
 * Runner with the three drop-ins. Its sessions live in the engine, every model call gets the
 * engine's contents, and the engine compacts after each invocation (app config below).
 *
 * Run it against a sidecar (`make run` in the repository root, or CONTEXTENGINE_TARGET):
 *
 *   cd clients/typescript-adk && npx tsx examples/travel_agent.ts [--target 127.0.0.1:50151]
 */
import { parseArgs } from "node:util";
import { ContextEngineError } from "@contextengine/client";
import { FunctionTool, LlmAgent, Runner } from "@google/adk";
import { type Schema, Type } from "@google/genai";
import {
  ContextEngineMemoryService,
  ContextEnginePlugin,
  ContextEngineSessionService,
} from "../src/index.js";
import { type Answer, ScriptedModel } from "../support/scripted_model.js";

const APP = "example-adk-typescript";

function schema(name: string, type: Type): Schema {
  return { type: Type.OBJECT, properties: { [name]: { type } }, required: [name] };
}

/** The conversation: each user message with the model's scripted answers for that turn. */
const TURNS: [string, Answer[]][] = [
  [
    "What is the weather in Lisbon?",
    [
      { calls: [{ id: "w-1", name: "lookup", args: { city: "Lisbon" } }] },
      { text: "It is sunny in Lisbon." },
    ],
  ],
  [
    "How much is 40 EUR in USD?",
    [
      { calls: [{ id: "t-1", name: "transfer_to_agent", args: { agentName: "helper" } }] },
      { calls: [{ id: "c-1", name: "convert", args: { amount: 40 } }] },
      { text: "40 EUR is 80 USD." },
    ],
  ],
  [
    "And 5 EUR?",
    [{ calls: [{ id: "c-2", name: "convert", args: { amount: 5 } }] }, { text: "10 USD." }],
  ],
];

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { target: { type: "string" } } });
  const target = values.target ?? process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";
  const sessions = new ContextEngineSessionService({ target });
  const connection = sessions.connection;
  try {
    // compaction is the engine's: every 2 invocations, extractive summaries
    await sessions.client.updateAppConfig({
      config: {
        appName: APP,
        eventsCompactionConfig: { compactionInterval: 2, overlapSize: 1 },
        summarizer: { kind: { case: "extractive", value: {} } },
      },
    });
    const model = new ScriptedModel();
    const helper = new LlmAgent({
      name: "helper",
      model,
      description: "Converts currencies.",
      instruction: "You convert currencies.",
      tools: [
        new FunctionTool({
          name: "convert",
          description: "EUR to USD.",
          parameters: schema("amount", Type.INTEGER),
          execute: (input) => ({ usd: (input as { amount: number }).amount * 2 }),
        }),
      ],
    });
    const root = new LlmAgent({
      name: "root",
      model,
      instruction: "You plan trips.",
      tools: [
        new FunctionTool({
          name: "lookup",
          description: "The weather of a city.",
          parameters: schema("city", Type.STRING),
          execute: (input) => ({ weather: `sunny in ${(input as { city: string }).city}` }),
        }),
      ],
      subAgents: [helper],
    });
    const runner = new Runner({
      appName: APP,
      agent: root,
      sessionService: sessions,
      memoryService: new ContextEngineMemoryService({ connection }),
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await sessions.createSession({
      appName: APP,
      userId: "traveller",
      state: { "user:name": "Ada" },
    });
    for (const [text, answers] of TURNS) {
      model.script(answers);
      console.log(`user: ${text}`);
      for await (const event of runner.runAsync({
        userId: "traveller",
        sessionId: session.id,
        newMessage: { role: "user", parts: [{ text }] },
      })) {
        if (event.errorMessage) {
          throw new Error(`the run failed: ${event.errorMessage}`);
        }
        for (const part of event.content?.parts ?? []) {
          if (part.text) {
            console.log(`${event.author}: ${part.text}`);
          } else if (part.functionCall) {
            console.log(`${event.author}: calls ${part.functionCall.name}`);
          }
        }
      }
      const contents = model.calls.at(-1)?.contents.length ?? 0;
      console.log(`  (the last model call got ${contents} contents from the engine)`);
    }
    const stored = await sessions.getSession({
      appName: APP,
      userId: "traveller",
      sessionId: session.id,
    });
    console.log(
      `session ${session.id}: ${stored?.events.length} events in the engine, ` +
        `${model.calls.length} model calls, user:name=${String(stored?.state["user:name"])}`,
    );
  } finally {
    sessions.close();
  }
}

main().catch((err: unknown) => {
  const down = err instanceof ContextEngineError && err.code === "UNAVAILABLE";
  console.error(
    down
      ? `cannot reach the sidecar (${err.message}); start it with \`make run\` or set CONTEXTENGINE_TARGET`
      : err,
  );
  process.exit(1);
});
