/**
 * The TypeScript driver of the cross-language ADK parity run (clients/conformance/adk/README.md):
 * `@google/adk` 2.0 with this package's drop-ins runs conversation.json against one sidecar and
 * writes the report compare.py reads.
 *
 *   tsx parity/driver.ts --target HOST:PORT --conversation ../conformance/adk/conversation.json \
 *       --app APP --user USER --session SESSION --out REPORT.jsonl
 *
 * Port notes: ADK TypeScript's `transfer_to_agent` takes `{agentName}` (Python's and Java's
 * `{agent_name}`), so a scripted transfer call's `agent_name` is sent as `agentName`.
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { fromJson } from "@bufbuild/protobuf";
import { AppConfigSchema, type ContextEngineClient } from "@contextengine/client";
import {
  BasePlugin,
  type Context,
  type Event,
  FunctionTool,
  LlmAgent,
  type LlmRequest,
  type LlmResponse,
  LongRunningFunctionTool,
  Runner,
} from "@google/adk";
import { type Content, type Schema, Type } from "@google/genai";
import {
  ContextEngineMemoryService,
  ContextEnginePlugin,
  ContextEngineSessionService,
} from "../src/index.js";
import { type Answer, ScriptedModel } from "../support/scripted_model.js";

interface Turn {
  id: string;
  rewind?: string;
  user: { text: string } | { function_response: { id: string; name: string; response: object } };
  answers: Answer[];
}

interface Conversation {
  agents: Record<string, { instruction: string; description: string }>;
  engine_app_config: Record<string, unknown>;
  turns: Turn[];
}

class DriverFailure extends Error {}

function objectSchema(name: string, type: Type): Schema {
  return { type: Type.OBJECT, properties: { [name]: { type } }, required: [name] };
}

/** The three tools of the contract, exactly. */
function tools() {
  const lookup = new FunctionTool({
    name: "lookup",
    description: "Looks up the weather of a city.",
    parameters: objectSchema("city", Type.STRING),
    execute: (input) => ({ weather: `sunny in ${(input as { city: string }).city}` }),
  });
  const convert = new FunctionTool({
    name: "convert",
    description: "Converts an amount to USD.",
    parameters: objectSchema("amount", Type.NUMBER),
    execute: (input) => ({ usd: (input as { amount: number }).amount * 2 }),
  });
  const startRefund = new LongRunningFunctionTool({
    name: "start_refund",
    description: "Starts a refund (long-running).",
    parameters: objectSchema("order", Type.STRING),
    execute: (input) => ({ status: `${(input as { order: string }).order} pending` }),
  });
  return { lookup, convert, startRefund };
}

/** ADK TypeScript's transfer tool names its argument `agentName`. */
function portAnswers(answers: Answer[]): Answer[] {
  return answers.map((answer) =>
    "calls" in answer
      ? {
          calls: answer.calls.map((call) => {
            if (call.name !== "transfer_to_agent" || !("agent_name" in call.args)) {
              return call;
            }
            const { agent_name: agentName, ...rest } = call.args;
            return { ...call, args: { ...rest, agentName } };
          }),
        }
      : answer,
  );
}

/** Records which agent each model call belongs to (runs after ContextEnginePlugin). */
class CallAgent extends BasePlugin {
  current = "";
  constructor() {
    super("parity-call-agent");
  }
  override async beforeModelCallback({
    callbackContext,
  }: {
    callbackContext: Context;
    llmRequest: LlmRequest;
  }): Promise<LlmResponse | undefined> {
    this.current = callbackContext.agentName;
    return undefined;
  }
}

async function waitForCompaction(
  client: ContextEngineClient,
  key: { appName: string; userId: string; sessionId: string },
  turn: string,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await client.getCompactionStatus(key);
    if (status.failures > 0n) {
      throw new DriverFailure(`turn ${turn}: the summarizer failed: ${status.lastError}`);
    }
    if (!status.running) {
      return;
    }
    if (Date.now() > deadline) {
      throw new DriverFailure(`turn ${turn}: compaction still running after 30 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function userMessage(turn: Turn): Content {
  if ("text" in turn.user) {
    return { role: "user", parts: [{ text: turn.user.text }] };
  }
  const { id, name, response } = turn.user.function_response;
  return {
    role: "user",
    parts: [{ functionResponse: { id, name, response: response as Record<string, unknown> } }],
  };
}

/** The arguments every run shares. */
interface Common {
  target: string;
  user: string;
  session: string;
}

/**
 * The runs the command line asks for: (conversation, app, report) of one conversation, or of
 * every `*.json` of a directory, each on app `APP-<name>` with its report `<name>.jsonl` in the
 * `--out` directory.
 */
function jobs(path: string, app: string, out: string): [string, string, string][] {
  if (!statSync(path).isDirectory()) {
    return [[path, app, out]];
  }
  return readdirSync(path)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => {
      const stem = name.slice(0, -".json".length);
      return [join(path, name), `${app}-${stem}`, join(out, `${stem}.jsonl`)];
    });
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      target: { type: "string" },
      conversation: { type: "string" },
      app: { type: "string" },
      user: { type: "string" },
      session: { type: "string" },
      out: { type: "string" },
    },
    strict: true,
  });
  const { target, conversation: path, app, user, session, out } = values;
  if (!target || !path || !app || !user || !session || !out) {
    throw new DriverFailure(
      "usage: driver.ts --target HOST:PORT --conversation FILE|DIR --app APP --user USER " +
        "--session SESSION --out REPORT.jsonl|DIR",
    );
  }
  let status = 0;
  for (const [source, jobApp, report] of jobs(path, app, out)) {
    const lines: object[] = [];
    try {
      await run({ target, user, session }, source, jobApp, lines);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      lines.push({ kind: "failed", message });
      process.stderr.write(`parity driver (typescript): ${basename(source)}: ${message}\n`);
      status = 1;
    } finally {
      mkdirSync(dirname(report), { recursive: true });
      writeFileSync(report, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
    }
  }
  return status;
}

/** Runs one conversation, pushing the report's lines onto `lines`. */
async function run(
  { target, user, session }: Common,
  path: string,
  app: string,
  lines: object[],
): Promise<void> {
  const conversation = JSON.parse(await readFile(path, "utf8")) as Conversation;
  const sessions = new ContextEngineSessionService({ target });
  const connection = sessions.connection;
  const client = sessions.client;
  try {
    await client.updateAppConfig({
      config: fromJson(AppConfigSchema, { ...conversation.engine_app_config, appName: app }),
    });
    const model = new ScriptedModel();
    const { lookup, convert, startRefund } = tools();
    const spec = (name: string) => {
      const agent = conversation.agents[name];
      if (agent === undefined) {
        throw new DriverFailure(`conversation.json has no agent ${name}`);
      }
      return agent;
    };
    const helper = new LlmAgent({
      name: "helper",
      model,
      instruction: spec("helper").instruction,
      description: spec("helper").description,
      tools: [convert],
    });
    const root = new LlmAgent({
      name: "root",
      model,
      instruction: spec("root").instruction,
      description: spec("root").description,
      tools: [lookup, startRefund],
      subAgents: [helper],
    });
    const callAgent = new CallAgent();
    const runner = new Runner({
      appName: app,
      agent: root,
      sessionService: sessions,
      memoryService: new ContextEngineMemoryService({ connection }),
      plugins: [new ContextEnginePlugin({ connection }), callAgent],
    });
    await sessions.createSession({ appName: app, userId: user, sessionId: session });
    const key = { appName: app, userId: user, sessionId: session };
    const invocations = new Map<string, string>();
    let calls = 0;
    let turnId = "";
    let index = 0;
    model.onCall = async (request) => {
      const stored = await client.getSession({ ...key, numRecentEvents: 1 });
      lines.push({
        kind: "model_call",
        turn: turnId,
        index,
        agent: callAgent.current,
        last_sequence: Number(stored.session?.lastSequence ?? 0n),
        contents: JSON.parse(JSON.stringify(request.contents)),
      });
      index += 1;
      calls += 1;
    };
    for (const turn of conversation.turns) {
      turnId = turn.id;
      index = 0;
      if (turn.rewind !== undefined) {
        const invocationId = invocations.get(turn.rewind);
        if (invocationId === undefined) {
          throw new DriverFailure(`turn ${turn.id}: rewind to unknown turn ${turn.rewind}`);
        }
        await client.rewindSession({ ...key, rewindBeforeInvocationId: invocationId });
      }
      model.script(portAnswers(turn.answers));
      const events: Event[] = [];
      try {
        for await (const event of runner.runAsync({
          userId: user,
          sessionId: session,
          newMessage: userMessage(turn),
        })) {
          if (event.errorCode || event.errorMessage) {
            throw new DriverFailure(
              `turn ${turn.id}: the run yielded an error: ${event.errorCode} ${event.errorMessage}`,
            );
          }
          events.push(event);
        }
      } catch (err) {
        if (err instanceof DriverFailure) {
          throw err;
        }
        throw new DriverFailure(`turn ${turn.id}: the run failed: ${String(err)}`, { cause: err });
      }
      if (model.left > 0) {
        throw new DriverFailure(`turn ${turn.id}: ${model.left} scripted answer(s) left over`);
      }
      const invocationId = events[0]?.invocationId;
      if (!invocationId) {
        throw new DriverFailure(`turn ${turn.id}: the runner yielded no event`);
      }
      invocations.set(turn.id, invocationId);
      await waitForCompaction(client, key, turn.id);
      lines.push({ kind: "turn", turn: turn.id, invocation_id: invocationId });
    }
    lines.push({
      kind: "done",
      app,
      user,
      session,
      port: "typescript",
      model_calls: calls,
    });
  } finally {
    sessions.close();
  }
}

main().then(
  (status) => process.exit(status),
  (err: unknown) => {
    process.stderr.write(
      `parity driver (typescript): ${err instanceof Error ? err.message : err}\n`,
    );
    process.exit(1);
  },
);
