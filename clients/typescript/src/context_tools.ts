/**
 * `ContextTools`: the context tools of one agent in one session, the helper a model loop uses.
 *
 * The engine declares the seven tools and runs every call (ContextToolsService), so the helper
 * only carries the session and the agent: `declarations(format)` gives the tools in a
 * provider's shape, `answer(functionCall)` runs a google-genai function call and resolves to the
 * `FunctionResponse` to append, `run(name, args)` runs a call an OpenAI or Anthropic model made
 * (its name and JSON arguments) and resolves to the result to send back. The call and its answer
 * are both appended to the session, the call before the tool runs (as ADK's runner does): the
 * engine records the answer's edit when the answer is appended, so a rewind before the call
 * undoes it. The app (or the session) must enable the tools: `ContextToolsConfig.enabled`.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { CallOptions, ContextEngineClient, Init } from "./client.js";
import { ContextEngineError } from "./errors.js";
import type {
  FunctionCall,
  FunctionCallSchema,
  FunctionResponse,
} from "./gen/contextengine/v1/content_pb.js";
import type {
  CallContextToolRequestSchema,
  CallContextToolResponse,
  ListContextToolsResponse,
} from "./gen/contextengine/v1/context_tools_service_pb.js";

/** The context tools' names, in the order ListContextTools declares them. */
export const CONTEXT_TOOL_NAMES: ReadonlySet<string> = new Set([
  "context_status",
  "context_pin",
  "context_unpin",
  "context_hide",
  "context_summarize",
  "context_expand",
  "context_search",
]);

/** The shapes {@link ContextTools.declarations} gives the tools in. */
export type ToolFormat = "genai" | "openai_chat" | "openai_responses" | "anthropic";

/** The session and the agent view whose context the tools look at and edit. */
export interface ContextToolsInit {
  appName: string;
  userId: string;
  sessionId: string;
  /** The agent that calls the tools (its context is the one they edit). */
  agentName?: string;
  /** The agent's branch, as for `buildContext`. */
  branch?: string;
  /** The agent's isolation scope, as for `buildContext`. */
  isolationScope?: string;
}

/** Options of one call: the invocation it belongs to (edits per invocation are limited). */
export interface ContextToolCallOptions extends CallOptions {
  invocationId?: string;
}

/** Options of {@link ContextTools.run}: also the id of the model's call, copied to the answer. */
export interface ContextToolRunOptions extends ContextToolCallOptions {
  callId?: string;
}

/** A function call as a message or a plain object (`{id, name, args}`). */
export type FunctionCallInit = FunctionCall | Init<typeof FunctionCallSchema>;

type CallInit = Init<typeof CallContextToolRequestSchema>;

/** Keys holding one schema, a list of schemas, or a map of names to schemas. */
const ONE_SCHEMA = new Set(["parameters", "response", "items"]);
const SCHEMA_LIST = new Set(["any_of", "anyOf"]);
const SCHEMA_MAP = new Set(["properties"]);

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A google-genai `FunctionDeclaration` (or `Schema`) as the engine sends it (snake_case JSON, as
 * google-genai for Python spells it) in the camelCase of `@google/genai`'s types: the keys of the
 * declaration and of its schemas are renamed, property names and values are kept as they are.
 */
export function genaiDeclaration(declaration: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(declaration)) {
    let converted: JsonValue | undefined = value;
    if (ONE_SCHEMA.has(key) && isObject(value)) {
      converted = genaiDeclaration(value);
    } else if (SCHEMA_LIST.has(key) && Array.isArray(value)) {
      converted = value.map((item) => (isObject(item) ? genaiDeclaration(item) : item));
    } else if (SCHEMA_MAP.has(key) && isObject(value)) {
      converted = Object.fromEntries(
        Object.entries(value).map(([name, schema]) => [
          name,
          isObject(schema) ? genaiDeclaration(schema) : schema,
        ]),
      );
    }
    if (converted !== undefined) {
      out[camel(key)] = converted;
    }
  }
  return out;
}

/**
 * Arguments a model sent: an object, or the JSON text OpenAI sends (blank: none). Anything else
 * is a `TypeError` (a context tool's arguments are an object).
 */
export function toolArguments(args: string | JsonObject): JsonObject {
  const parsed: unknown = typeof args === "string" ? JSON.parse(args.trim() || "{}") : args;
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new TypeError(
      `a context tool's arguments are a JSON object, not ${JSON.stringify(args)}`,
    );
  }
  return parsed as JsonObject;
}

/**
 * One agent's context tools in one session (`client.contextTools({...})`); see the module
 * documentation. The declarations are read once, then kept.
 */
export class ContextTools {
  readonly appName: string;
  readonly userId: string;
  readonly sessionId: string;
  readonly agentName: string;
  readonly branch: string | undefined;
  readonly isolationScope: string | undefined;
  private listed: Promise<ListContextToolsResponse> | undefined;

  constructor(
    private readonly client: ContextEngineClient,
    init: ContextToolsInit,
  ) {
    this.appName = init.appName;
    this.userId = init.userId;
    this.sessionId = init.sessionId;
    this.agentName = init.agentName ?? "";
    this.branch = init.branch;
    this.isolationScope = init.isolationScope;
  }

  /** Whether `name` is a context tool's (a call this helper runs, rather than your own tool). */
  handles(name: string | undefined): boolean {
    return name !== undefined && CONTEXT_TOOL_NAMES.has(name);
  }

  /**
   * The tools in a provider's shape, as plain JSON: `genai` `FunctionDeclaration`s (camelCase,
   * as `@google/genai` types them: one `Tool`'s `functionDeclarations`), OpenAI Chat Completions
   * tools (`{type: "function", function: {...}}`), OpenAI Responses tools, Anthropic tools
   * (`{name, description, input_schema}`). Fresh objects on every call.
   */
  async declarations(format: ToolFormat = "genai", options?: CallOptions): Promise<JsonObject[]> {
    const listed = await this.list(options);
    switch (format) {
      case "genai":
        return listed.functionDeclarations.map(genaiDeclaration);
      case "openai_chat":
        return parseAll(listed.openaiChatTools);
      case "openai_responses":
        return parseAll(listed.openaiResponsesTools);
      case "anthropic":
        return parseAll(listed.anthropicTools);
      default:
        throw new RangeError(`unknown tool format ${JSON.stringify(format)}`);
    }
  }

  /**
   * The engine's whole answer to `functionCall`: `response` (the `FunctionResponse` to append as
   * the call's answer), the `edits` the answer makes once appended, and `refusal` when there is
   * one. Not retried. Every method of the helper reports a mistake (a missing id included) by
   * rejecting.
   */
  async call(
    functionCall: FunctionCallInit,
    options: ContextToolCallOptions = {},
  ): Promise<CallContextToolResponse> {
    const { invocationId, ...callOptions } = options;
    const request: CallInit = {
      appName: this.appName,
      userId: this.userId,
      sessionId: this.sessionId,
      agentName: this.agentName,
      call: functionCall,
      invocationId: invocationId ?? "",
    };
    if (this.branch !== undefined) {
      request.branch = this.branch;
    }
    if (this.isolationScope !== undefined) {
      request.isolationScope = this.isolationScope;
    }
    return this.client.callContextTool(request, callOptions);
  }

  /** The `FunctionResponse` answering `functionCall` (append it in the answer event). */
  async answer(
    functionCall: FunctionCallInit,
    options: ContextToolCallOptions = {},
  ): Promise<FunctionResponse> {
    const answer = await this.call(functionCall, options);
    if (answer.response === undefined) {
      throw new ContextEngineError({
        code: "INTERNAL",
        message: "the sidecar answered CallContextTool without a function response",
        method: "ContextToolsService/CallContextTool",
        clientSide: true,
      });
    }
    return answer.response;
  }

  /**
   * Runs a call an OpenAI or Anthropic model made (`args`: an object, or the JSON text OpenAI
   * sends) and resolves to the result to send back as the tool's output: plain JSON (`ok`, and
   * the tool's data or a refusal's `reason`, `rule` and `message`). Append the call and its
   * answer (`callId` is copied to the answer) as for any tool.
   */
  async run(
    name: string,
    args: string | JsonObject,
    options: ContextToolRunOptions = {},
  ): Promise<JsonObject> {
    const { callId, ...callOptions } = options;
    const functionCall: Init<typeof FunctionCallSchema> = { name, args: toolArguments(args) };
    if (callId) {
      functionCall.id = callId;
    }
    const response = await this.answer(functionCall, callOptions);
    return response.response ?? {};
  }

  /** ListContextTools once; a failed read is tried again next time. */
  private async list(options: CallOptions | undefined): Promise<ListContextToolsResponse> {
    if (this.listed === undefined) {
      const listed = this.client.listContextTools(
        { appName: this.appName, userId: this.userId },
        options,
      );
      this.listed = listed;
      listed.catch(() => {
        if (this.listed === listed) {
          this.listed = undefined;
        }
      });
    }
    return this.listed;
  }
}

function parseAll(texts: readonly string[]): JsonObject[] {
  return texts.map((text) => JSON.parse(text) as JsonObject);
}
