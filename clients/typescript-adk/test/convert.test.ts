/**
 * Event conversion loses no field: every golden event (tests/golden/events) converts to an ADK
 * TypeScript event and back to an equal message, and the events ADK TypeScript itself produces
 * (a run with a tool, a transfer to a sub-agent, a long-running call, state deltas) convert to
 * the proto and back, and through a real sidecar and back, unchanged.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { clone, equals, fromBinary } from "@bufbuild/protobuf";
import { EventSchema } from "@contextengine/client";
import {
  type Event,
  FunctionTool,
  InMemoryRunner,
  LlmAgent,
  LongRunningFunctionTool,
} from "@google/adk";
import { type Schema, Type } from "@google/genai";
import { REPO_ROOT, serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import {
  ContextEngineSessionService,
  EventConversionError,
  eventFromProto,
  eventToProto,
  secondsToMs,
} from "../src/index.js";
import { ScriptedModel } from "../support/scripted_model.js";

const GOLDEN = join(REPO_ROOT, "tests", "golden", "events");
const NAMES = readdirSync(GOLDEN)
  .filter((f) => f.endsWith(".binpb"))
  .map((f) => f.slice(0, -".binpb".length))
  .sort();

after(() => stopServer());

/** JSON as a reader sees it (undefined properties and symbols gone). */
function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

describe("golden events", () => {
  it("there are golden vectors", () => {
    assert.ok(NAMES.length >= 12, `${NAMES.length} vectors`);
  });

  for (const name of NAMES) {
    it(`${name}: proto -> ADK TypeScript event -> proto is the same message`, () => {
      const original = fromBinary(
        EventSchema,
        new Uint8Array(readFileSync(join(GOLDEN, `${name}.binpb`))),
      );
      const expected = clone(EventSchema, original);
      expected.sequence = 0n; // the engine's own fields are not part of ADK's event
      expected.pinned = false;
      if (expected.actions?.compaction) {
        expected.actions.compaction.startSequence = 0n;
        expected.actions.compaction.endSequence = 0n;
      }
      const adk = eventFromProto(original);
      assert.equal(adk.timestamp, secondsToMs(original.timestamp), "timestamp in ms");
      const back = eventToProto(adk);
      assert.ok(equals(EventSchema, expected, back), `${JSON.stringify(plain(adk)).slice(0, 400)}`);
    });
  }
});

function schema(name: string, type: Type): Schema {
  return { type: Type.OBJECT, properties: { [name]: { type } }, required: [name] };
}

/** Runs a small multi-agent conversation on ADK's own in-memory runner; its session's events. */
async function adkEvents(): Promise<Event[]> {
  const model = new ScriptedModel();
  const lookup = new FunctionTool({
    name: "lookup",
    description: "Weather.",
    parameters: schema("city", Type.STRING),
    execute: (input, ctx) => {
      ctx?.state.set("last_city", (input as { city: string }).city);
      ctx?.state.set("temp:scratch", 1);
      return { weather: "sunny", degrees: 21, ratio: 0.5, tags: ["a", null, true] };
    },
  });
  const refund = new LongRunningFunctionTool({
    name: "start_refund",
    description: "Refund.",
    parameters: schema("order", Type.STRING),
    execute: () => ({ status: "pending" }),
  });
  const helper = new LlmAgent({ name: "helper", model, description: "Helps.", tools: [refund] });
  const root = new LlmAgent({
    name: "root",
    model,
    instruction: "Plan.",
    tools: [lookup],
    subAgents: [helper],
  });
  const runner = new InMemoryRunner({ agent: root, appName: "convert-app" });
  const session = await runner.sessionService.createSession({
    appName: "convert-app",
    userId: "u",
  });
  const turns: [string, Parameters<ScriptedModel["script"]>[0]][] = [
    [
      "weather?",
      [
        {
          calls: [
            { id: "c1", name: "lookup", args: { city: "Paris" } },
            { id: "c2", name: "lookup", args: { city: "Rome" } },
          ],
        },
        { text: "sunny" },
      ],
    ],
    [
      "refund",
      [
        { calls: [{ id: "t1", name: "transfer_to_agent", args: { agentName: "helper" } }] },
        { calls: [{ id: "r1", name: "start_refund", args: { order: "o1" } }] },
        { text: "pending" },
      ],
    ],
  ];
  for (const [text, answers] of turns) {
    model.script(answers);
    for await (const _ of runner.runAsync({
      userId: "u",
      sessionId: session.id,
      newMessage: { role: "user", parts: [{ text }] },
    })) {
      // the events are read from the session below
    }
    assert.equal(model.left, 0);
  }
  const stored = await runner.sessionService.getSession({
    appName: "convert-app",
    userId: "u",
    sessionId: session.id,
  });
  assert.ok(stored);
  return stored.events;
}

describe("events ADK TypeScript produces", async () => {
  const events = await adkEvents();

  it("the run made the events the test is about", () => {
    assert.ok(events.length >= 8, `${events.length} events`);
    assert.ok(events.some((e) => e.actions.transferToAgent === "helper"));
    assert.ok(events.some((e) => (e.longRunningToolIds ?? []).includes("r1")));
    assert.ok(events.some((e) => e.actions.stateDelta.last_city !== undefined));
    assert.ok(events.some((e) => e.usageMetadata !== undefined));
  });

  it("each converts to the proto and back unchanged", () => {
    for (const event of events) {
      assert.deepEqual(plain(eventFromProto(eventToProto(event))), plain(event));
    }
  });

  it("each comes back from the sidecar unchanged", async () => {
    const service = new ContextEngineSessionService({ target: await serverTarget() });
    try {
      const app = uniqueApp();
      const session = await service.createSession({ appName: app, userId: "u", sessionId: "s" });
      for (const event of events) {
        await service.appendEvent({ session, event: structuredClone(event) });
      }
      const got = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
      assert.deepEqual(plain(got?.events), plain(events));
    } finally {
      service.close();
    }
  });

  it("a field the engine's Event does not have is an error, not dropped", () => {
    const first = events[0];
    assert.ok(first);
    const odd = { ...first, notAnAdkField: 1 } as Event;
    assert.throws(() => eventToProto(odd), EventConversionError);
  });
});
