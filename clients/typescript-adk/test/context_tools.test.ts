/**
 * The context tools in a real ADK TypeScript `Runner`, through the toolset drop-in, against a
 * real sidecar (as tests/adk/test_context_tools.py does for google-adk): a scripted model reads a
 * bulky report, then calls `context_status`, hides the report's call and result, and searches
 * for a fact in it. The runner appends the calls and answers as for any tool; the engine records
 * the hide on the answer, the next model call gets a stub instead of the report, and a rewind
 * before the hiding turn brings the report back. ADK TypeScript has no rewind of its own, so the
 * rewind is the engine's `RewindSession`; the session service then gives the runner the log with
 * the rewind applied.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  type CallContextToolRequest,
  CONTEXT_TOOL_NAMES,
  ContextEngineClient,
  type ContextEngineClientOptions,
} from "@contextengine/client";
import { FunctionTool, LlmAgent, Runner } from "@google/adk";
import { type Content, type FunctionDeclaration, Type } from "@google/genai";
import { serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import {
  Connection,
  ContextEngineContextTools,
  ContextEnginePlugin,
  ContextEngineSessionService,
  type ContextEngineTool,
} from "../src/index.js";
import { type Answer, ScriptedModel } from "../support/scripted_model.js";

type Interceptor = NonNullable<ContextEngineClientOptions["interceptors"]>[number];

const USER = "u";
/** The seven tools, in the engine's order (the client's tests check the list itself). */
const NAMES = [...CONTEXT_TOOL_NAMES];

const target = await serverTarget();
/** Every CallContextTool request the drop-ins send. */
const sent: CallContextToolRequest[] = [];
const record: Interceptor = (next) => async (request) => {
  if (request.method.name === "CallContextTool") {
    sent.push(request.message as CallContextToolRequest);
  }
  return next(request);
};
const client = new ContextEngineClient(target, { interceptors: [record] });
const connection = Connection.over(client);

after(() => {
  client.close();
  stopServer();
});

const fetchReport = new FunctionTool({
  name: "fetch_report",
  description: "Fetches a long report on a topic.",
  parameters: {
    type: Type.OBJECT,
    properties: { topic: { type: Type.STRING } },
    required: ["topic"],
  },
  execute: (input) => {
    const topic = (input as { topic: string }).topic;
    const rows = Array.from(
      { length: 60 },
      (_, i) => `row ${i}: measurements of ${topic} with many digits 0123456789`,
    );
    return { report: rows, code: "7Q-ALPHA" };
  },
});

async function say(runner: Runner, sessionId: string, text: string): Promise<void> {
  for await (const event of runner.runAsync({
    userId: USER,
    sessionId,
    newMessage: { role: "user", parts: [{ text }] },
  })) {
    assert.equal(event.errorMessage, undefined, event.errorMessage);
  }
}

/** The last content of a model request: the answer the model reads. */
function lastResponse(contents: Content[]): Record<string, unknown> {
  const response = contents.at(-1)?.parts?.[0]?.functionResponse?.response;
  assert.ok(response, `the last content answers a call: ${JSON.stringify(contents.at(-1))}`);
  return response;
}

function calls(...answers: [string, string, Record<string, unknown>][]): Answer[] {
  return answers.map(([id, name, args]) => ({ calls: [{ id, name, args }] }));
}

describe("ContextEngineContextTools", () => {
  it("the model hides a report and finds a fact in it again", async () => {
    const app = uniqueApp("ts-adk-tools");
    await client.updateAppConfig({ config: { appName: app, contextTools: { enabled: true } } });
    const model = new ScriptedModel();
    const toolset = new ContextEngineContextTools({ connection });
    const sessions = new ContextEngineSessionService({ connection });
    const runner = new Runner({
      appName: app,
      agent: new LlmAgent({
        name: "root",
        model,
        instruction: "You read reports.",
        tools: [fetchReport, toolset],
      }),
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await sessions.createSession({ appName: app, userId: USER });
    // events: 1 user, 2 call, 3 report, 4 text
    model.script([...calls(["c1", "fetch_report", { topic: "tides" }]), { text: "In it." }]);
    await say(runner, session.id, "Read the tides report.");
    // 5 user, 6 status call, 7 status, 8 hide call, 9 hide answer, 10 text
    model.script([
      ...calls(
        ["c2", "context_status", {}],
        ["c3", "context_hide", { first: 2, last: 3, stub: "The tides report." }],
      ),
      { text: "Hidden." },
    ]);
    await say(runner, session.id, "Tidy up your context.");
    // 11 user, 12 search call, 13 results, 14 text
    model.script([...calls(["c4", "context_search", { query: "code" }]), { text: "7Q-ALPHA" }]);
    await say(runner, session.id, "What was the code?");
    assert.equal(model.left, 0);

    // every tool is declared to the model, as the engine declares it
    const declared = (await toolset.getTools()).map(
      (tool) => (tool as ContextEngineTool)._getDeclaration().name,
    );
    assert.deepEqual(declared, NAMES);
    const config = model.calls[0]?.request.config;
    const sentDeclarations = (config?.tools ?? []).flatMap(
      (tool) => (tool as { functionDeclarations?: FunctionDeclaration[] }).functionDeclarations,
    );
    assert.deepEqual(
      sentDeclarations.map((d) => d?.name).sort(),
      [...NAMES, "fetch_report"].sort(),
    );
    const hideDeclaration = sentDeclarations.find((d) => d?.name === "context_hide");
    assert.deepEqual(hideDeclaration?.parameters?.required, ["first"]);

    const requests = model.calls.map((call) => call.contents);
    const status = lastResponse(requests[3] ?? []);
    assert.equal(status.ok, true);
    assert.equal(status.current_turn_starts_at, 5);
    assert.equal((status.largest_events as { sequence: number }[])[0]?.sequence, 3);
    const hidden = lastResponse(requests[4] ?? []);
    assert.equal(hidden.ok, true);
    assert.equal(hidden.stub, "The tides report.");
    // the model call after the hide gets the stub, not the report
    const before = JSON.stringify(requests[3]);
    const afterHide = JSON.stringify(requests[4]);
    assert.match(before, /row 59/);
    assert.doesNotMatch(afterHide, /row 59/);
    assert.match(afterHide, /The tides report\./);
    const results = lastResponse(requests[6] ?? []).results as {
      sequence: number;
      where: string;
    }[];
    const found = new Map(results.map((r) => [r.sequence, r.where]));
    assert.equal(found.get(3), "hidden (2..3)");
    assert.equal(found.has(11), false);

    // each call named the agent, its invocation and the model's call id
    const adkSession = await sessions.getSession({
      appName: app,
      userId: USER,
      sessionId: session.id,
    });
    assert.ok(adkSession);
    const hiding = adkSession.events[4]?.invocationId ?? "";
    assert.deepEqual(
      sent
        .filter((request) => request.appName === app)
        .map((request) => [request.agentName, request.invocationId, request.call?.id]),
      [
        ["root", hiding, "c2"],
        ["root", hiding, "c3"],
        ["root", adkSession.events[10]?.invocationId, "c4"],
      ],
    );
    assert.equal(hiding, adkSession.events[7]?.invocationId);

    // the engine recorded the edit on the answer event; ADK's events do not carry it
    const stored = await client.listEvents({ appName: app, userId: USER, sessionId: session.id });
    const recorded = stored.events.filter((event) => event.contextEdits.length > 0);
    assert.deepEqual(
      recorded.map((event) => event.sequence),
      [9n],
    );
    const edit = recorded[0]?.contextEdits[0]?.edit;
    assert.equal(edit?.case === "hide" ? edit.value.range?.first : undefined, 2n);
    assert.equal("contextEdits" in (adkSession.events[8] ?? {}), false);

    // a rewind before the hiding turn (the engine's RewindSession) brings the report back
    await client.rewindSession({
      appName: app,
      userId: USER,
      sessionId: session.id,
      rewindBeforeInvocationId: hiding,
    });
    model.script([{ text: "Back." }]);
    await say(runner, session.id, "Again?");
    const last = JSON.stringify(model.calls.at(-1)?.contents);
    assert.match(last, /row 59/);
    assert.doesNotMatch(last, /Tidy up your context/);
  });

  it("keeps only the tools toolFilter names, and tells the model when the app has them off", async () => {
    const app = uniqueApp("ts-adk-tools");
    const toolset = new ContextEngineContextTools({
      connection,
      toolFilter: ["context_status", "context_search"],
    });
    assert.deepEqual(
      (await toolset.getTools()).map((tool) => tool.name),
      ["context_status", "context_search"],
    );
    const model = new ScriptedModel();
    const sessions = new ContextEngineSessionService({ connection });
    const runner = new Runner({
      appName: app,
      agent: new LlmAgent({ name: "root", model, tools: [toolset] }),
      sessionService: sessions,
      plugins: [new ContextEnginePlugin({ connection })],
    });
    const session = await sessions.createSession({ appName: app, userId: USER });
    model.script([...calls(["s1", "context_status", {}]), { text: "Off." }]);
    await say(runner, session.id, "Status?");
    const error = String(lastResponse(model.calls[1]?.contents ?? []).error);
    assert.match(error, /CONTEXT_TOOLS_DISABLED/);
    // ADK closes the toolsets after every run: the shared connection stays usable
    await toolset.close();
    assert.equal((await client.listContextTools({ appName: app })).functionDeclarations.length, 7);
  });
});
