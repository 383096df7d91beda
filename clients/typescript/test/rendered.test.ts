/**
 * `requestPart` without a server: each format's request part from the items and system JSON the
 * sidecar sends, held items put first, what it refuses; and `RenderedView`'s own checks, with an
 * in-memory Connect router playing a sidecar that breaks the protocol. The parts are also checked
 * to type as the provider SDKs' own create parameters (tsc runs over the tests).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { MessageCreateParamsNonStreaming } from "@anthropic-ai/sdk/resources/messages";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import type { ChatCompletionCreateParamsNonStreaming } from "openai/resources/chat/completions";
import type { ResponseCreateParamsNonStreaming } from "openai/resources/responses/responses";
import {
  ContextEngineClient,
  ContextService,
  isRenderableFormat,
  type OpenAIChatPart,
  partItems,
  type RenderedContext,
  RenderedContextSchema,
  RenderFormat,
  requestPart,
} from "../src/index.js";

function rendered(init: MessageInitShape<typeof RenderedContextSchema>): RenderedContext {
  return create(RenderedContextSchema, init);
}

const CHAT_ITEMS = [
  '{"role":"system","content":"You plan trips."}',
  '{"role":"user","content":"Weather in Oslo?"}',
  '{"role":"assistant","content":null,"tool_calls":[{"type":"function","id":"call_1","function":{"name":"lookup","arguments":"{\\"city\\": \\"Oslo\\"}"}}]}',
  '{"role":"tool","tool_call_id":"call_1","content":"{\\"weather\\": \\"sunny\\"}"}',
];
const RESPONSES_ITEMS = [
  '{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Oslo?"}]}',
  '{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{\\"city\\": \\"Oslo\\"}"}',
];
const ANTHROPIC_ITEMS = [
  '{"role":"user","content":[{"type":"text","text":"Weather in Oslo?"}]}',
  '{"role":"assistant","content":[{"type":"text","text":"Sunny."}]}',
];

const isClientInternal = { name: "ContextEngineError", code: "INTERNAL", clientSide: true };

describe("requestPart", () => {
  it("OpenAI Chat: the messages, the system message first, and nothing else", () => {
    const part = requestPart(
      rendered({ format: RenderFormat.OPENAI_CHAT, items: CHAT_ITEMS }),
      RenderFormat.OPENAI_CHAT,
    );
    assert.deepEqual(part, { messages: CHAT_ITEMS.map((item) => JSON.parse(item)) });
    assert.equal(part.messages[0]?.role, "system");
    const params: ChatCompletionCreateParamsNonStreaming = { model: "gpt-4o", ...part };
    assert.equal(params.messages.length, 4);
  });

  it("OpenAI Responses: the input items and the system instruction as instructions", () => {
    const part = requestPart(
      rendered({
        format: RenderFormat.OPENAI_RESPONSES,
        items: RESPONSES_ITEMS,
        system: '"You plan trips."',
      }),
      RenderFormat.OPENAI_RESPONSES,
    );
    assert.deepEqual(part, {
      input: RESPONSES_ITEMS.map((item) => JSON.parse(item)),
      instructions: "You plan trips.",
    });
    const params: ResponseCreateParamsNonStreaming = { model: "gpt-4o", ...part };
    assert.equal(params.instructions, "You plan trips.");
  });

  it("without a system instruction there is no instructions or system key", () => {
    const responses = requestPart(
      rendered({ format: RenderFormat.OPENAI_RESPONSES, items: RESPONSES_ITEMS }),
    );
    assert.deepEqual(Object.keys(responses), ["input"]);
    const anthropic = requestPart(
      rendered({ format: RenderFormat.ANTHROPIC_MESSAGES, items: ANTHROPIC_ITEMS }),
    );
    assert.deepEqual(Object.keys(anthropic), ["messages"]);
  });

  it("Anthropic: the messages and the system parameter, a string or cached text blocks", () => {
    const plain = requestPart(
      rendered({
        format: RenderFormat.ANTHROPIC_MESSAGES,
        items: ANTHROPIC_ITEMS,
        system: '"You plan trips."',
      }),
      RenderFormat.ANTHROPIC_MESSAGES,
    );
    assert.deepEqual(plain, {
      messages: ANTHROPIC_ITEMS.map((item) => JSON.parse(item)),
      system: "You plan trips.",
    });
    const blocks =
      '[{"type":"text","text":"You plan trips.","cache_control":{"type":"ephemeral"}}]';
    const cached = requestPart(
      rendered({ format: RenderFormat.ANTHROPIC_MESSAGES, items: ANTHROPIC_ITEMS, system: blocks }),
      RenderFormat.ANTHROPIC_MESSAGES,
    );
    assert.deepEqual(cached.system, [
      { type: "text", text: "You plan trips.", cache_control: { type: "ephemeral" } },
    ]);
    const params: MessageCreateParamsNonStreaming = {
      model: "claude-sonnet-4-5",
      max_tokens: 1024,
      ...cached,
    };
    assert.equal(params.messages.length, 2);
  });

  it("puts the first baseItemsCount held items before the new ones", () => {
    const held = CHAT_ITEMS.slice(0, 3).map((item) => JSON.parse(item));
    const answer = rendered({
      format: RenderFormat.OPENAI_CHAT,
      items: CHAT_ITEMS.slice(2),
      baseItemsCount: 2,
    });
    const part = requestPart(answer, RenderFormat.OPENAI_CHAT, held);
    assert.deepEqual(
      part.messages,
      CHAT_ITEMS.map((item) => JSON.parse(item)),
    );
    assert.equal(part.messages[0], held[0], "held items are reused as they are");
    // the same without naming the format: the held items are the second argument
    assert.deepEqual(requestPart(answer, held), part);
    // a new array: the caller's held array is not changed
    assert.equal(held.length, 3);
    assert.notEqual(partItems(part), held);
  });

  it("ignores held items when the answer builds on none", () => {
    const answer = rendered({ format: RenderFormat.OPENAI_CHAT, items: CHAT_ITEMS.slice(0, 1) });
    const part = requestPart(answer, RenderFormat.OPENAI_CHAT, [{ role: "user", content: "x" }]);
    assert.deepEqual(part.messages, [{ role: "system", content: "You plan trips." }]);
  });

  it("refuses fewer held items than the answer builds on", () => {
    const answer = rendered({ format: RenderFormat.OPENAI_CHAT, items: [], baseItemsCount: 2 });
    assert.throws(() => requestPart(answer, RenderFormat.OPENAI_CHAT, []), {
      name: "RangeError",
      message: "the answer builds on 2 held items, 0 given",
    });
    assert.throws(() => requestPart(answer), RangeError);
  });

  it("refuses an answer without a rendering, of an unknown format or of another format", () => {
    assert.throws(() => requestPart(undefined), {
      name: "RangeError",
      message: "no rendering in the answer (format 0)",
    });
    assert.throws(() => requestPart(rendered({ items: CHAT_ITEMS })), /format 0/);
    assert.throws(
      () => requestPart(rendered({ format: 42 as RenderFormat, items: CHAT_ITEMS })),
      /no rendering in the answer \(format 42\)/,
    );
    const chat = rendered({ format: RenderFormat.OPENAI_CHAT, items: CHAT_ITEMS });
    assert.throws(() => requestPart(chat, RenderFormat.ANTHROPIC_MESSAGES), {
      name: "RangeError",
      message: "the answer is rendered as OPENAI_CHAT, not ANTHROPIC_MESSAGES",
    });
  });

  it("an item or a system part the format does not send is the sidecar's INTERNAL", () => {
    const chat = { format: RenderFormat.OPENAI_CHAT } as const;
    assert.throws(() => requestPart(rendered({ ...chat, items: ["{"] })), {
      ...isClientInternal,
      detail: "the rendering's item 0 is not JSON",
    });
    for (const item of ["[]", "null", '"text"', "3"]) {
      assert.throws(() => requestPart(rendered({ ...chat, items: ["{}", item] })), {
        ...isClientInternal,
        detail: "the rendering's item 1 is not a JSON object",
      });
    }
    const responses = { format: RenderFormat.OPENAI_RESPONSES, items: RESPONSES_ITEMS };
    assert.throws(() => requestPart(rendered({ ...responses, system: "[]" })), {
      ...isClientInternal,
      detail: "the OPENAI_RESPONSES rendering's system part is not what it sends",
    });
    assert.throws(() => requestPart(rendered({ ...responses, system: "You plan" })), {
      ...isClientInternal,
      detail: "the rendering's system is not JSON",
    });
    const anthropic = { format: RenderFormat.ANTHROPIC_MESSAGES, items: ANTHROPIC_ITEMS };
    assert.throws(() => requestPart(rendered({ ...anthropic, system: '{"text":"x"}' })), {
      ...isClientInternal,
      detail: "the ANTHROPIC_MESSAGES rendering's system part is not what it sends",
    });
    assert.throws(() => requestPart(rendered({ ...chat, items: [], baseItemsCount: -1 })), {
      ...isClientInternal,
      detail: "the sidecar answered base_items_count -1",
    });
  });

  it("types the part as the format's when the format is named", () => {
    const answer = rendered({ format: RenderFormat.OPENAI_CHAT, items: CHAT_ITEMS });
    const typed: OpenAIChatPart = requestPart(answer, RenderFormat.OPENAI_CHAT);
    // @ts-expect-error: without a format the part may be any format's
    const untyped: OpenAIChatPart = requestPart(answer);
    assert.deepEqual(untyped, typed);
  });

  it("knows the formats it renders", () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((format) => isRenderableFormat(format as RenderFormat)),
      [false, true, true, true, false],
    );
  });
});

describe("RenderedView against a sidecar that breaks the protocol", () => {
  /** A client whose BuildContext answers `base_items_count` 2 with one item, whatever it holds. */
  function breaking() {
    const transport = createRouterTransport(({ service }) => {
      service(ContextService, {
        buildContext: () => ({
          rendered: {
            format: RenderFormat.OPENAI_CHAT,
            items: ['{"role":"user","content":"Hi."}'],
            baseItemsCount: 2,
            itemsDigest: "d",
          },
        }),
      });
    });
    return new ContextEngineClient("127.0.0.1:1", { transport });
  }

  it("refuses a base beyond the held items (INTERNAL, client side) and keeps what it held", async () => {
    const view = breaking().renderedView(
      { appName: "a", userId: "u", sessionId: "s" },
      RenderFormat.OPENAI_CHAT,
    );
    await assert.rejects(view.build(), {
      ...isClientInternal,
      detail: "the sidecar answered base_items_count 2 for 0 held items",
    });
    assert.deepEqual(view.items, []);
    assert.equal(view.digest, "");
  });

  it("renderContext refuses a base too (it holds nothing)", async () => {
    const client = breaking();
    await assert.rejects(
      client.renderContext({ appName: "a", userId: "u", sessionId: "s" }, RenderFormat.OPENAI_CHAT),
      { ...isClientInternal, detail: "the sidecar answered base_items_count 2 for 0 held items" },
    );
  });
});
