/**
 * A BuildContext rendering (`render`, docs/design/renderings.md) as the provider's own request
 * part: plain objects, typed with the provider SDKs' parameter types, to spread into the SDK call.
 *
 * - OpenAI Chat Completions: `{ messages }` (the system message is the first one):
 *   `openai.chat.completions.create({ model, ...part })`;
 * - OpenAI Responses: `{ input, instructions? }`: `openai.responses.create({ model, ...part })`;
 * - Anthropic Messages: `{ messages, system? }`:
 *   `anthropic.messages.create({ model, max_tokens, ...part })`.
 *
 * The types come from the `openai` and `@anthropic-ai/sdk` packages (type-only imports: nothing
 * of them is loaded at run time). Without those packages installed, they are `any` to a
 * consumer that skips library checks.
 *
 * An answer to a request with `render.since` (`baseItemsCount` > 0) holds only the items after
 * the held ones: give {@link requestPart} the held items too, or let a {@link RenderedView} keep
 * them.
 */
import type { MessageCreateParamsBase } from "@anthropic-ai/sdk/resources/messages";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { ResponseInputItem } from "openai/resources/responses/responses";
import { ContextEngineError } from "./errors.js";
import {
  type BuildContextResponse,
  type RenderedContext,
  RenderFormat,
} from "./gen/contextengine/v1/context_service_pb.js";

/** The formats a context renders as (every {@link RenderFormat} but `UNSPECIFIED`). */
export type RenderableFormat =
  | RenderFormat.OPENAI_CHAT
  | RenderFormat.OPENAI_RESPONSES
  | RenderFormat.ANTHROPIC_MESSAGES;

/** An Anthropic Messages `messages` item (the SDK's `MessageParam`). */
export type AnthropicMessageParam = MessageCreateParamsBase["messages"][number];

/** Anthropic's `system` parameter: a string, or text blocks (with a cache breakpoint). */
export type AnthropicSystemParam = NonNullable<MessageCreateParamsBase["system"]>;

/** The request part of a Chat Completions rendering. */
export interface OpenAIChatPart {
  /** The messages, the system message first. */
  messages: ChatCompletionMessageParam[];
}

/** The request part of a Responses API rendering. */
export interface OpenAIResponsesPart {
  /** The input items. */
  input: ResponseInputItem[];
  /** The system instruction, when there is one. */
  instructions?: string;
}

/** The request part of an Anthropic Messages rendering. */
export interface AnthropicMessagesPart {
  /** The messages. */
  messages: AnthropicMessageParam[];
  /** The system parameter, when there is a system instruction. */
  system?: AnthropicSystemParam;
}

/** The request part of each format. */
export interface RequestParts {
  [RenderFormat.OPENAI_CHAT]: OpenAIChatPart;
  [RenderFormat.OPENAI_RESPONSES]: OpenAIResponsesPart;
  [RenderFormat.ANTHROPIC_MESSAGES]: AnthropicMessagesPart;
}

/** The rendered item of each format (one of `RenderedContext.items`, parsed). */
export interface RenderedItems {
  [RenderFormat.OPENAI_CHAT]: ChatCompletionMessageParam;
  [RenderFormat.OPENAI_RESPONSES]: ResponseInputItem;
  [RenderFormat.ANTHROPIC_MESSAGES]: AnthropicMessageParam;
}

/** The request part of format `F` (of any format: `RequestPartOf<RenderableFormat>`). */
export type RequestPartOf<F extends RenderableFormat> = RequestParts[F];
/** The request part of any format. */
export type RequestPart = RequestPartOf<RenderableFormat>;
/** One parsed item of format `F`. */
export type RenderedItemOf<F extends RenderableFormat> = RenderedItems[F];
/** One parsed item of any format. */
export type RenderedItem = RenderedItemOf<RenderableFormat>;

const FORMAT_NAMES: Readonly<Record<RenderableFormat, string>> = {
  [RenderFormat.OPENAI_CHAT]: "OPENAI_CHAT",
  [RenderFormat.OPENAI_RESPONSES]: "OPENAI_RESPONSES",
  [RenderFormat.ANTHROPIC_MESSAGES]: "ANTHROPIC_MESSAGES",
};

/** Whether `format` is one a context renders as. */
export function isRenderableFormat(format: RenderFormat): format is RenderableFormat {
  return Object.hasOwn(FORMAT_NAMES, format);
}

/** The items of a request part: `messages`, or the Responses API's `input`. */
export function partItems<F extends RenderableFormat>(part: RequestPartOf<F>): RenderedItemOf<F>[];
export function partItems(part: RequestPart): RenderedItem[] {
  return "input" in part ? part.input : part.messages;
}

/**
 * The provider request part of `rendered` (a BuildContext answer's `rendered`). `held`: the whole
 * items of an earlier answer, when `rendered.baseItemsCount` says that its first ones come first.
 * With `format`, the part is typed as that format's and a rendering of another format is refused.
 *
 * RangeError for an answer without a rendering (or of a format this client does not know), of
 * another format than `format`, or fewer held items than `baseItemsCount`; a ContextEngineError
 * INTERNAL (client side) for an item or a system part that is not what the format sends.
 */
export function requestPart(
  rendered: RenderedContext | undefined,
  held?: readonly RenderedItem[],
): RequestPart;
export function requestPart<F extends RenderableFormat>(
  rendered: RenderedContext | undefined,
  format: F,
  held?: readonly RenderedItemOf<F>[],
): RequestPartOf<F>;
export function requestPart(
  rendered: RenderedContext | undefined,
  formatOrHeld?: RenderableFormat | readonly RenderedItem[],
  heldItems: readonly RenderedItem[] = [],
): RequestPart {
  const expected = typeof formatOrHeld === "number" ? formatOrHeld : undefined;
  const held = typeof formatOrHeld === "object" ? formatOrHeld : heldItems;
  const format = rendered?.format ?? RenderFormat.UNSPECIFIED;
  if (rendered === undefined || !isRenderableFormat(format)) {
    throw new RangeError(`no rendering in the answer (format ${format})`);
  }
  if (expected !== undefined && format !== expected) {
    throw new RangeError(
      `the answer is rendered as ${FORMAT_NAMES[format]}, not ${FORMAT_NAMES[expected] ?? expected}`,
    );
  }
  const base = rendered.baseItemsCount;
  if (base < 0) {
    throw malformed(`the sidecar answered base_items_count ${base}`);
  }
  if (held.length < base) {
    throw new RangeError(`the answer builds on ${base} held items, ${held.length} given`);
  }
  const items = held.slice(0, base).concat(rendered.items.map((text, i) => parseItem(text, i)));
  const system = rendered.system ? parseJson(rendered.system, "system") : undefined;
  switch (format) {
    case RenderFormat.OPENAI_CHAT:
      return { messages: items as ChatCompletionMessageParam[] };
    case RenderFormat.OPENAI_RESPONSES: {
      const part: OpenAIResponsesPart = { input: items as ResponseInputItem[] };
      if (system !== undefined) {
        if (typeof system !== "string") {
          throw malformedSystem(format);
        }
        part.instructions = system;
      }
      return part;
    }
    case RenderFormat.ANTHROPIC_MESSAGES: {
      const part: AnthropicMessagesPart = { messages: items as AnthropicMessageParam[] };
      if (system !== undefined) {
        if (typeof system !== "string" && !Array.isArray(system)) {
          throw malformedSystem(format);
        }
        part.system = system as AnthropicSystemParam;
      }
      return part;
    }
  }
}

/**
 * The request part of an answer to a request the client made itself, holding `held` (none
 * without `render.since`): a base beyond them breaks the protocol, INTERNAL (client side).
 */
export function answerPart<F extends RenderableFormat>(
  answer: BuildContextResponse,
  format: F,
  held: readonly RenderedItemOf<F>[] = [],
): RequestPartOf<F> {
  const base = answer.rendered?.baseItemsCount ?? 0;
  if (base > held.length) {
    throw malformed(`the sidecar answered base_items_count ${base} for ${held.length} held items`);
  }
  return requestPart(answer.rendered, format, held);
}

/** A breach of the rendering's contract by the sidecar. */
function malformed(message: string, cause?: unknown): ContextEngineError {
  return new ContextEngineError(
    {
      code: "INTERNAL",
      message,
      method: "ContextService/BuildContext",
      clientSide: true,
    },
    { cause },
  );
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw malformed(`the rendering's ${what} is not JSON`, err);
  }
}

/** One rendered item: a JSON object. */
function parseItem(text: string, index: number): RenderedItem {
  const item = parseJson(text, `item ${index}`);
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    throw malformed(`the rendering's item ${index} is not a JSON object`);
  }
  return item as RenderedItem;
}

function malformedSystem(format: RenderableFormat): ContextEngineError {
  return malformed(`the ${FORMAT_NAMES[format]} rendering's system part is not what it sends`);
}
