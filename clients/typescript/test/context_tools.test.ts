/**
 * The context tools: `listContextTools`, `callContextTool` and the `contextTools()` helper. First
 * without a server (an in-memory Connect router records what the client sends: the whole
 * address of the call, retries, the declarations read once), then against a real sidecar as an
 * agent loop uses them: a hide answered, appended and recorded, the stub in the next context,
 * expand, a rewind undoing the hide, refusals answered to the model and the caller's mistakes
 * as errors.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create, type JsonObject, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import {
  type CallContextToolRequest,
  CallContextToolResponseSchema,
  CONTEXT_TOOL_NAMES,
  ContentSchema,
  ContextEngineClient,
  ContextEngineError,
  ContextToolsService,
  genaiDeclaration,
  type Init,
  ListContextToolsResponseSchema,
  type PartSchema,
  toolArguments,
} from "../src/index.js";
import { serverTarget, stopServer, uniqueApp } from "./helpers.js";

const NAMES = [...CONTEXT_TOOL_NAMES];

type PartInit = Init<typeof PartSchema>;

/** What a fake ListContextTools answers: one declaration with every kind of schema key. */
const LISTED = create(ListContextToolsResponseSchema, {
  functionDeclarations: [
    {
      name: "context_expand",
      description: "Reads back.",
      parameters: {
        type: "OBJECT",
        properties: {
          max_chars: { type: "INTEGER", description: "The most characters." },
          picks: {
            type: "ARRAY",
            max_items: 3,
            items: { type: "STRING", min_length: 1 },
            any_of: [{ type: "STRING", max_length: 2 }],
          },
        },
        required: ["max_chars"],
        property_ordering: ["max_chars", "picks"],
      },
    },
  ],
  openaiChatTools: ['{"type": "function", "function": {"name": "context_expand"}}'],
  openaiResponsesTools: ['{"type": "function", "name": "context_expand"}'],
  anthropicTools: ['{"name": "context_expand", "input_schema": {"type": "object"}}'],
});

interface Fake {
  client: ContextEngineClient;
  readonly lists: number;
  calls: CallContextToolRequest[];
}

/**
 * A client on an in-memory router that records what reaches the "server"; the first `failLists`
 * ListContextTools and `failCalls` CallContextTool attempts fail with UNAVAILABLE.
 */
function fake(options: { failLists?: number; failCalls?: number; attempts?: number } = {}): Fake {
  const { failLists = 0, failCalls = 0, attempts = 4 } = options;
  const seen: { lists: number; calls: CallContextToolRequest[] } = { lists: 0, calls: [] };
  const transport = createRouterTransport(({ service }) => {
    service(ContextToolsService, {
      listContextTools: () => {
        seen.lists += 1;
        if (seen.lists <= failLists) {
          throw new ConnectError("connection reset", Code.Unavailable);
        }
        return LISTED;
      },
      callContextTool: (request) => {
        seen.calls.push(request);
        if (seen.calls.length <= failCalls) {
          throw new ConnectError("connection reset", Code.Unavailable);
        }
        return create(CallContextToolResponseSchema, {
          response: {
            id: request.call?.id ?? "",
            name: request.call?.name ?? "",
            response: { ok: true, sequence: 12, echo: request.call?.args ?? {} },
          },
        });
      },
    });
  });
  const client = new ContextEngineClient("127.0.0.1:1", { transport, attempts, retryBackoffMs: 1 });
  return {
    client,
    get lists() {
      return seen.lists;
    },
    calls: seen.calls,
  };
}

const ADDRESS = { appName: "a", userId: "u", sessionId: "s" };

describe("context tools, offline", () => {
  it("declarations come in each provider's shape, read once", async () => {
    const f = fake();
    const tools = f.client.contextTools({ ...ADDRESS, agentName: "agent" });
    const [genai] = await tools.declarations();
    assert.deepEqual(genai, {
      name: "context_expand",
      description: "Reads back.",
      parameters: {
        type: "OBJECT",
        properties: {
          max_chars: { type: "INTEGER", description: "The most characters." },
          picks: {
            type: "ARRAY",
            maxItems: 3,
            items: { type: "STRING", minLength: 1 },
            anyOf: [{ type: "STRING", maxLength: 2 }],
          },
        },
        required: ["max_chars"],
        propertyOrdering: ["max_chars", "picks"],
      },
    });
    assert.deepEqual(await tools.declarations("openai_chat"), [
      { type: "function", function: { name: "context_expand" } },
    ]);
    assert.deepEqual(await tools.declarations("openai_responses"), [
      { type: "function", name: "context_expand" },
    ]);
    assert.deepEqual(await tools.declarations("anthropic"), [
      { name: "context_expand", input_schema: { type: "object" } },
    ]);
    assert.equal(f.lists, 1);
    // fresh objects every time: changing one changes nothing for the next caller
    const [first] = await tools.declarations("anthropic");
    assert.ok(first);
    first.name = "changed";
    assert.equal((await tools.declarations("anthropic"))[0]?.name, "context_expand");
    await assert.rejects(tools.declarations("mcp" as "genai"), RangeError);
  });

  it("ListContextTools is retried; a failed read is not kept", async () => {
    const retried = fake({ failLists: 2 });
    assert.equal((await retried.client.contextTools(ADDRESS).declarations()).length, 1);
    assert.equal(retried.lists, 3);
    const once = fake({ failLists: 1, attempts: 1 });
    const tools = once.client.contextTools(ADDRESS);
    await assert.rejects(tools.declarations(), { code: "UNAVAILABLE" });
    assert.equal((await tools.declarations()).length, 1);
    assert.equal((await tools.declarations("anthropic")).length, 1);
    assert.equal(once.lists, 2);
  });

  it("a call carries the agent's whole view and the invocation, and is never retried", async () => {
    const f = fake();
    const tools = f.client.contextTools({
      ...ADDRESS,
      agentName: "agent",
      branch: "root.agent",
      isolationScope: "scope-1",
    });
    const answer = await tools.call(
      { id: "c1", name: "context_hide", args: { first: 2, last: 3 } },
      { invocationId: "i2" },
    );
    assert.equal(answer.response?.id, "c1");
    const [sent] = f.calls;
    assert.ok(sent);
    assert.equal(sent.appName, "a");
    assert.equal(sent.userId, "u");
    assert.equal(sent.sessionId, "s");
    assert.equal(sent.agentName, "agent");
    assert.equal(sent.branch, "root.agent");
    assert.equal(sent.isolationScope, "scope-1");
    assert.equal(sent.invocationId, "i2");
    assert.deepEqual(sent.call?.args, { first: 2, last: 3 });

    const bare = fake();
    await bare.client.contextTools(ADDRESS).answer({ name: "context_status" });
    assert.equal(bare.calls[0]?.branch, undefined, "no branch: the engine's default view");
    assert.equal(bare.calls[0]?.isolationScope, undefined);
    assert.equal(bare.calls[0]?.agentName, "");

    const down = fake({ failCalls: 5 });
    await assert.rejects(down.client.contextTools(ADDRESS).call({ name: "context_status" }), {
      code: "UNAVAILABLE",
    });
    assert.equal(down.calls.length, 1);
  });

  it("run takes OpenAI's JSON text or an object and resolves to plain JSON", async () => {
    const f = fake();
    const tools = f.client.contextTools(ADDRESS);
    const result = await tools.run("context_pin", '{"first": 4, "last": 5}', {
      callId: "call_abc",
      invocationId: "i9",
    });
    assert.deepEqual(result, { ok: true, sequence: 12, echo: { first: 4, last: 5 } });
    assert.ok(Number.isInteger(result.sequence));
    assert.equal(f.calls[0]?.call?.id, "call_abc");
    assert.equal(f.calls[0]?.invocationId, "i9");
    assert.deepEqual(await tools.run("context_status", ""), { ok: true, sequence: 12, echo: {} });
    assert.equal(f.calls[1]?.call?.id, undefined, "no call id: none sent");
    const args: JsonObject = { query: "tide", limit: 2 };
    assert.deepEqual((await tools.run("context_search", args)).echo, args);
    await assert.rejects(tools.run("context_status", "[1]"), TypeError);
    await assert.rejects(tools.run("context_status", "{oops"), SyntaxError);
    assert.equal(f.calls.length, 3);
  });

  it("the helper's calls reject, without sending, when an id is missing", async () => {
    const f = fake();
    const tools = f.client.contextTools({ ...ADDRESS, sessionId: "" });
    for (const pending of [
      tools.call({ name: "context_status" }),
      tools.answer({ name: "context_status" }),
      tools.run("context_status", {}),
    ]) {
      await assert.rejects(pending, {
        code: "INVALID_ARGUMENT",
        reason: "MISSING_FIELD",
        metadata: { field: "session_id" },
      });
    }
    await assert.rejects(f.client.contextTools({ ...ADDRESS, appName: "" }).declarations(), {
      reason: "MISSING_FIELD",
      metadata: { field: "app_name" },
    });
    assert.equal(f.lists + f.calls.length, 0);
  });

  it("an answer without a function response is a protocol error", async () => {
    const transport = createRouterTransport(({ service }) => {
      service(ContextToolsService, {
        listContextTools: () => LISTED,
        callContextTool: () => ({}),
      });
    });
    const ce = new ContextEngineClient("127.0.0.1:1", { transport });
    await assert.rejects(ce.contextTools(ADDRESS).answer({ name: "context_status" }), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "INTERNAL");
      assert.equal(err.clientSide, true);
      return true;
    });
  });

  it("handles names only the context tools' names", () => {
    const tools = fake().client.contextTools(ADDRESS);
    assert.deepEqual(NAMES, [
      "context_status",
      "context_pin",
      "context_unpin",
      "context_hide",
      "context_summarize",
      "context_expand",
      "context_search",
    ]);
    assert.ok(NAMES.every((name) => tools.handles(name)));
    assert.equal(tools.handles("fetch_report"), false);
    assert.equal(tools.handles(undefined), false);
    assert.deepEqual(toolArguments("  "), {});
    assert.deepEqual(genaiDeclaration({ name: "n", parameters_json_schema: { a_b: 1 } }), {
      name: "n",
      parametersJsonSchema: { a_b: 1 },
    });
  });
});

describe("context tools, against a sidecar", () => {
  let ce: ContextEngineClient;

  before(async () => {
    ce = new ContextEngineClient(await serverTarget(), { timeoutMs: 10_000 });
  });

  after(() => {
    ce.close();
    stopServer();
  });

  const ROWS = Array.from({ length: 40 }, (_, i) => `row ${i}: water level ${i} cm at S${i}`);

  function said(author: string, invocationId: string, role: string, part: PartInit) {
    return { author, invocationId, content: { role, parts: [part] } };
  }

  /** A finished turn with a bulky tool result (events 1-4), then the current question (5). */
  async function session(enabled = true) {
    const appName = uniqueApp("ts-tools");
    await ce.updateAppConfig({
      config: { appName, contextTools: { enabled, maxHiddenFraction: 1 } },
    });
    const { session } = await ce.createSession({ appName, userId: "u" });
    const address = { appName, userId: "u", sessionId: session?.id ?? "" };
    await ce.appendEvents({
      ...address,
      events: [
        said("user", "i1", "user", { text: "Find the tide tables." }),
        said("agent", "i1", "model", { functionCall: { id: "c1", name: "fetch", args: {} } }),
        said("agent", "i1", "user", {
          functionResponse: { id: "c1", name: "fetch", response: { rows: ROWS } },
        }),
        said("agent", "i1", "model", { text: "High tide at 06:12, code TIDE-7." }),
        said("user", "i2", "user", { text: "Tidy up your context." }),
      ],
    });
    return address;
  }

  /** The text of the agent's next context. */
  async function contextText(address: { appName: string; userId: string; sessionId: string }) {
    const context = await ce.buildContext({ ...address, agentName: "agent" });
    return JSON.stringify(context.contents.map((c) => toJson(ContentSchema, c)));
  }

  it("declares the seven tools in every provider's shape, in one order", async () => {
    const tools = ce.contextTools({ appName: uniqueApp(), userId: "u", sessionId: "s" });
    const genai = await tools.declarations("genai");
    assert.deepEqual(
      genai.map((d) => d.name),
      NAMES,
    );
    const hide = genai[3] as { parameters: { type: string; required: string[] } };
    assert.equal(hide.parameters.type, "OBJECT");
    assert.deepEqual(hide.parameters.required, ["first"]);
    const chat = await tools.declarations("openai_chat");
    assert.deepEqual(
      chat.map((t) => (t.function as JsonObject).name),
      NAMES,
    );
    const responses = await tools.declarations("openai_responses");
    assert.deepEqual(
      responses.map((t) => [t.type, t.name]),
      NAMES.map((name) => ["function", name]),
    );
    const anthropic = await tools.declarations("anthropic");
    assert.deepEqual(
      anthropic.map((t) => t.name),
      NAMES,
    );
    assert.deepEqual((anthropic[3]?.input_schema as JsonObject | undefined)?.required, ["first"]);
  });

  it("a hide is answered, recorded on the appended answer, and undone by a rewind", async () => {
    const address = await session();
    const tools = ce.contextTools({ ...address, agentName: "agent" });
    assert.match(await contextText(address), /row 39/);
    // the model's call first, as an agent loop appends it
    const call = { id: "c2", name: "context_hide", args: { first: 2, last: 3, stub: "Tides." } };
    await ce.appendEvent({
      ...address,
      event: said("agent", "i2", "model", { functionCall: call }),
    });
    const answer = await tools.call(call, { invocationId: "i2" });
    assert.equal(answer.refusal, undefined);
    assert.equal(answer.edits[0]?.edit.case, "hide");
    const result = answer.response?.response ?? {};
    assert.equal(result.ok, true);
    assert.equal(result.stub, "Tides.");
    assert.ok(Number.isInteger(result.tokens_hidden) && Number(result.tokens_hidden) > 100);
    assert.equal(answer.response?.id, "c2");
    const appended = await ce.appendEvent({
      ...address,
      event: said("agent", "i2", "user", { functionResponse: answer.response }),
    });
    const edit = appended.event?.contextEdits[0]?.edit;
    assert.equal(edit?.case, "hide");
    assert.deepEqual(
      edit?.case === "hide" ? [edit.value.range?.first, edit.value.range?.last] : [],
      [2n, 3n],
    );
    const hidden = await contextText(address);
    assert.doesNotMatch(hidden, /row 39/);
    assert.match(hidden, /Tides\./);
    // expand reads the hidden events back (an OpenAI-style call: JSON text in, JSON out)
    const expanded = await tools.run("context_expand", '{"sequence": 2}', { invocationId: "i2" });
    assert.equal(expanded.kind, "hidden_range");
    assert.deepEqual([expanded.first, expanded.last], [2, 3]);
    assert.match(String(expanded.text), /row 39/);
    const status = await tools.run("context_status", {}, { invocationId: "i2" });
    assert.equal(status.current_turn_starts_at, 5);
    assert.equal(status.edits_left_this_turn, 7);
    // a rewind before the hiding turn brings the report back
    await ce.rewindSession({ ...address, rewindBeforeInvocationId: "i2" });
    assert.match(await contextText(address), /row 39/);
  });

  it("the model's mistakes are answered, the caller's are errors", async () => {
    const address = await session();
    const tools = ce.contextTools({ ...address, agentName: "agent" });
    const refused = await tools.call(
      { id: "c3", name: "context_hide", args: { first: 4, last: 5 } },
      { invocationId: "i2" },
    );
    assert.equal(refused.refusal?.reason, "CONTEXT_EDIT_REFUSED");
    assert.equal(refused.refusal?.rule, "current_turn");
    assert.deepEqual(refused.response?.response, {
      ok: false,
      reason: "CONTEXT_EDIT_REFUSED",
      rule: "current_turn",
      message: refused.refusal?.message,
    });
    assert.equal(refused.edits.length, 0);
    const malformed = await tools.run("context_pin", { first: "two" });
    assert.equal(malformed.ok, false);
    assert.equal(malformed.reason, "INVALID_TOOL_ARGUMENTS");

    const error = (code: string, reason: string) => (err: unknown) => {
      assert.ok(err instanceof ContextEngineError);
      assert.deepEqual([err.code, err.reason, err.clientSide], [code, reason, false]);
      return true;
    };
    await assert.rejects(
      tools.run("delete_everything", {}),
      error("INVALID_ARGUMENT", "UNKNOWN_CONTEXT_TOOL"),
    );
    await assert.rejects(
      ce.contextTools({ ...address, sessionId: "missing" }).run("context_status", {}),
      error("NOT_FOUND", "SESSION_NOT_FOUND"),
    );
    const off = await session(false);
    await assert.rejects(
      ce.contextTools(off).run("context_status", {}),
      error("FAILED_PRECONDITION", "CONTEXT_TOOLS_DISABLED"),
    );
  });
});
