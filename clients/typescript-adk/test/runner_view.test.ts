/**
 * ADK TypeScript's Runner on the drop-ins acts as google-adk 2.13 does where ADK TypeScript alone
 * does not: routing after a rewind, an answer to a long-running call goes to the agent that made
 * it (also when another agent spoke last), the answer resumes the call's invocation, a transfer
 * is answered as google-adk answers it, and a negative zero survives the conversion. Against a
 * real sidecar; the generated conversations of `make adk-parity` check the same against
 * google-adk itself.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { Event as EventMessage } from "@contextengine/client";
import {
  BasePlugin,
  type Context,
  createEvent,
  type Event,
  LlmAgent,
  type LlmRequest,
  type LlmResponse,
  LongRunningFunctionTool,
  Runner,
} from "@google/adk";
import { type Content, Type } from "@google/genai";
import { serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import { plain } from "../src/convert.js";
import { ContextEnginePlugin, ContextEngineSessionService } from "../src/index.js";
import { resumedInvocation } from "../src/invocation_aliases.js";
import { callerOf, liveEvents } from "../src/runner_view.js";
import { type Answer, ScriptedModel } from "../support/scripted_model.js";

const target = await serverTarget();
const sessions = new ContextEngineSessionService({ target });
const connection = sessions.connection;

after(() => {
  sessions.close();
  stopServer();
});

/** root (a long-running start_refund, sub-agent helper) on one scripted model. */
async function app(prefix: string) {
  const name = uniqueApp(prefix);
  const model = new ScriptedModel();
  const agents: string[] = [];
  model.onCall = () => {
    agents.push(currentAgent);
  };
  let currentAgent = "";
  const startRefund = new LongRunningFunctionTool({
    name: "start_refund",
    description: "Starts a refund.",
    parameters: { type: Type.OBJECT, properties: { order: { type: Type.STRING } } },
    execute: (input) => ({ status: `${(input as { order: string }).order} pending` }),
  });
  const helper = new LlmAgent({
    name: "helper",
    model,
    description: "Helps.",
    instruction: "Help.",
  });
  const root = new LlmAgent({ name: "root", model, tools: [startRefund], subAgents: [helper] });
  const plugin = new ContextEnginePlugin({ connection });
  const recorder = new (class extends BasePlugin {
    override async beforeModelCallback({
      callbackContext,
    }: {
      callbackContext: Context;
      llmRequest: LlmRequest;
    }): Promise<LlmResponse | undefined> {
      currentAgent = callbackContext.agentName;
      return undefined;
    }
  })("recorder");
  const runner = new Runner({
    appName: name,
    agent: root,
    sessionService: sessions,
    plugins: [plugin, recorder],
  });
  await sessions.createSession({ appName: name, userId: "u", sessionId: "s" });
  const run = async (message: Content, answers: Answer[]): Promise<Event[]> => {
    model.script(answers);
    const events: Event[] = [];
    for await (const event of runner.runAsync({
      userId: "u",
      sessionId: "s",
      newMessage: message,
    })) {
      assert.equal(event.errorMessage, undefined, event.errorMessage);
      events.push(event);
    }
    assert.equal(model.left, 0, "every scripted answer was used");
    return events;
  };
  const stored = async (): Promise<EventMessage[]> => {
    const events: EventMessage[] = [];
    for await (const event of sessions.client.iterateEvents({
      appName: name,
      userId: "u",
      sessionId: "s",
    })) {
      events.push(event);
    }
    return events;
  };
  return { name, agents, run, stored };
}

const say = (text: string): Content => ({ role: "user", parts: [{ text }] });
const answer = (id: string): Content => ({
  role: "user",
  parts: [{ functionResponse: { id, name: "start_refund", response: { status: "done" } } }],
});
const transfer = (id: string, agentName: string): Answer => ({
  calls: [{ id, name: "transfer_to_agent", args: { agentName } }],
});

describe("the runner's session", () => {
  it("routes a turn after a rewind as google-adk does", async () => {
    const a = await app("ts-rewind-route");
    await a.run(say("one"), [{ text: "hi" }]);
    const second = await a.run(say("ask the helper"), [
      transfer("t-1", "helper"),
      { text: "helper here" },
    ]);
    assert.deepEqual(a.agents, ["root", "root", "helper"]);
    await sessions.client.rewindSession({
      appName: a.name,
      userId: "u",
      sessionId: "s",
      rewindBeforeInvocationId: second[0]?.invocationId ?? "",
    });
    await a.run(say("three"), [{ text: "root again" }]);
    assert.equal(a.agents.at(-1), "root");
    const session = await sessions.getSession({ appName: a.name, userId: "u", sessionId: "s" });
    assert.deepEqual(
      session?.events.map((e) => e.author),
      ["user", "root", "user", "root"],
    );
  });

  it("sends an answer to the agent that made the call, and resumes its invocation", async () => {
    const a = await app("ts-answer-route");
    const first = await a.run(say("refund"), [
      { calls: [{ id: "r-1", name: "start_refund", args: { order: "o1" } }] },
      { text: "started" },
    ]);
    await a.run(say("ask the helper"), [transfer("t-1", "helper"), { text: "helper here" }]);
    // ADK TypeScript alone gives the answer to the helper, which spoke last
    const answered = await a.run(answer("r-1"), [{ text: "refunded" }]);
    assert.equal(a.agents.at(-1), "root");
    const call = first[0]?.invocationId;
    assert.ok(answered.every((event) => event.invocationId === call));
    const stored = await a.stored();
    const user = stored.filter((e) => e.author === "user").at(-1);
    assert.equal(user?.invocationId, call, "stored with the call's invocation");
    // the transfer's answer is google-adk's {result: null}
    const transferred = stored.find((e) => e.actions?.transferToAgent === "helper");
    assert.deepEqual(transferred?.content?.parts[0]?.functionResponse?.response, { result: null });
  });
});

function event(invocationId: string, text: string, rewindTo?: string): Event {
  return createEvent({
    invocationId,
    author: "user",
    ...(rewindTo === undefined
      ? { content: { role: "user", parts: [{ text }] } }
      : { actions: { rewindBeforeInvocationId: rewindTo } as unknown as Event["actions"] }),
  });
}

const texts = (events: Event[]) => events.map((e) => e.content?.parts?.[0]?.text ?? "R");

describe("google-adk's rules", () => {
  it("applies rewinds as google-adk does", () => {
    // adk-semantics 6.1: a(i1) b(i1) c(i2) d(i2) REWIND(i2) e(i3) -> a, b, e
    const log = [
      event("i1", "a"),
      event("i1", "b"),
      event("i2", "c"),
      event("i2", "d"),
      event("r", "", "i2"),
      event("i3", "e"),
    ];
    assert.deepEqual(texts(liveEvents(log)), ["a", "b", "e"]);
    assert.deepEqual(
      texts(liveEvents([event("i1", "a"), event("r", "", "nope"), event("i1", "b")])),
      ["a", "b"],
    );
    const nested = [
      event("i1", "a"),
      event("i2", "b"),
      event("r1", "", "i1"),
      event("i3", "c"),
      event("r2", "", "i2"),
      event("i4", "d"),
    ];
    assert.deepEqual(texts(liveEvents(nested)), ["a", "d"]);
  });

  it("finds the invocation an answer resumes, and the agent it goes to", () => {
    const call = (invocationId: string, id: string): Event =>
      createEvent({
        invocationId,
        author: "root",
        content: {
          role: "model",
          parts: [{ functionCall: { id, name: "start_refund", args: {} } }],
        },
      });
    const reply = (...ids: string[]): Event =>
      createEvent({
        invocationId: "i3",
        author: "user",
        content: {
          role: "user",
          parts: ids.map((id) => ({
            functionResponse: { id, name: "start_refund", response: {} },
          })),
        },
      });
    const log = [call("i1", "a"), call("i2", "b")];
    assert.equal(resumedInvocation(log, reply("b")), "i2");
    assert.equal(resumedInvocation(log, reply("a", "b")), undefined);
    assert.equal(resumedInvocation(log, reply("c")), undefined);
    assert.equal(resumedInvocation(log, event("i3", "text")), undefined);
    assert.equal(callerOf([...log, reply("a")]), "root");
    assert.equal(callerOf([...log, reply("c")]), undefined);
  });

  it("keeps a negative zero", () => {
    const converted = plain({
      a: -0,
      b: [undefined, Number.NaN, 2],
      c: undefined,
      d: { toJSON: () => "x" },
    });
    assert.ok(Object.is((converted as { a: number }).a, -0));
    assert.deepEqual(converted, { a: -0, b: [null, null, 2], d: "x" });
  });
});
