/**
 * The context tools in an agent loop: the model hides a bulky tool result it has finished with.
 *
 *   1. enable the tools for the app (`ContextToolsConfig.enabled`) and declare them to the model
 *      next to the agent's own tool (`tools.declarations("genai")`),
 *   2. turn 1: the model fetches a long report and answers from it,
 *   3. turn 2: the model calls `context_status`, then `context_hide` on the report's call and
 *      result; each call is appended, run by the engine (`tools.answer`) and its answer appended,
 *      which is when the engine records the hide,
 *   4. print the context the next model call gets: a stub instead of the report.
 *
 * The fake model follows a script; a real one would choose the calls from the declarations.
 * Run it against a sidecar (`make run` in the repository root):
 *
 *   cd clients/typescript && npx tsx examples/context_tools.ts --target 127.0.0.1:50151
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type Content,
  ContextEngineClient,
  ContextEngineError,
  type FunctionCallInit,
  type FunctionResponseSchema,
  type Init,
  type PartSchema,
} from "../src/index.js";

const APP = "example-context-tools";
const AGENT = "reader";

type PartInit = Init<typeof PartSchema>;

/** The agent's own tool: a long report. */
function fetchReport(topic: string): JsonObject {
  const rows = Array.from({ length: 40 }, (_, i) => `row ${i}: ${topic} at station S${i}`);
  return { rows, code: "TIDE-7" };
}

/** What the fake model answers, model call after model call. */
const SCRIPT: PartInit[] = [
  { functionCall: { id: "c1", name: "fetch_report", args: { topic: "tides" } } },
  { text: "High tide at 06:12; the code is TIDE-7." },
  { functionCall: { id: "c2", name: "context_status", args: {} } },
  {
    functionCall: {
      id: "c3",
      name: "context_hide",
      args: { first: 2, last: 3, stub: "The tides report (40 rows; code TIDE-7)." },
    },
  },
  { text: "Done: the report is out of my context." },
];

function render(content: Content): string {
  return content.parts
    .map((part) => {
      if (part.functionCall) {
        return `call ${part.functionCall.name}(${JSON.stringify(part.functionCall.args ?? {})})`;
      }
      if (part.functionResponse) {
        const response = part.functionResponse.response ?? {};
        const said =
          "ok" in response ? `ok ${response.ok}` : Object.keys(response).sort().join(", ");
        return `${part.functionResponse.name} -> ${said}`;
      }
      return (part.text ?? "").replaceAll("\n", " ");
    })
    .join(" + ");
}

export async function contextToolsLoop(target: string): Promise<Content[]> {
  const ce = new ContextEngineClient(target, { timeoutMs: 5_000 });
  try {
    // 1. The app enables the tools; the model is told about them with the agent's own tool.
    await ce.updateAppConfig({ config: { appName: APP, contextTools: { enabled: true } } });
    const { session } = await ce.createSession({ appName: APP, userId: "ada" });
    const address = { appName: APP, userId: "ada", sessionId: session?.id ?? "" };
    const tools = ce.contextTools({ ...address, agentName: AGENT });
    const declared = await tools.declarations("genai");
    console.log(`declared to the model: fetch_report, ${declared.map((d) => d.name).join(", ")}`);

    const script = [...SCRIPT];
    for (const question of ["Fetch the tides report.", "Tidy up your context."]) {
      const invocationId = `inv-${randomUUID()}`;
      const said = (role: string, parts: PartInit[], author = AGENT) =>
        ce.appendEvent({ ...address, event: { author, invocationId, content: { role, parts } } });
      await said("user", [{ text: question }], "user");
      for (;;) {
        const context = await ce.buildContext({ ...address, agentName: AGENT });
        const reply = script.shift();
        if (reply === undefined) {
          throw new Error("the script ran out");
        }
        const report = context.contents.some((c) => render(c).includes("fetch_report ->"));
        console.log(
          `model call: ${context.contents.length} contents, report: ${report ? "yes" : "no"}`,
        );
        // 2. The model's call (or its answer) is appended first, as an agent loop does.
        await said("model", [reply]);
        const call: FunctionCallInit | undefined = reply.functionCall;
        if (call === undefined) {
          break;
        }
        // 3. A context tool is run by the engine; any other tool by the agent.
        const response: Init<typeof FunctionResponseSchema> = tools.handles(call.name)
          ? await tools.answer(call, { invocationId })
          : { id: call.id ?? "", name: call.name ?? "", response: fetchReport("tides") };
        const answered = await said("user", [{ functionResponse: response }]);
        const edits = answered.event?.contextEdits ?? [];
        for (const { edit } of edits) {
          if (edit.case === "hide") {
            const { first, last } = edit.value.range ?? {};
            console.log(`  event ${answered.event?.sequence} records: hide ${first}..${last}`);
          }
        }
        if (call.name === "context_status") {
          const status = response.response ?? {};
          console.log(
            `  context_status: the current turn starts at ${status.current_turn_starts_at}`,
          );
        }
      }
    }

    // 4. What the next model call gets.
    const context = await ce.buildContext({ ...address, agentName: AGENT });
    console.log(`the next model call gets ${context.contents.length} contents:`);
    for (const content of context.contents) {
      console.log(`  ${(content.role ?? "").padEnd(5)} | ${render(content)}`);
    }
    return context.contents;
  } finally {
    ce.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { target: { type: "string" } } });
  const target = values.target ?? process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";
  contextToolsLoop(target).catch((err: unknown) => {
    if (err instanceof ContextEngineError) {
      console.error(`error: ${err.message} (code ${err.code}, reason ${err.reason || "none"})`);
    } else {
      console.error(err);
    }
    process.exitCode = 1;
  });
}
