/**
 * `ContextEnginePlugin`: the engine builds the model contents of every model call of an ADK
 * TypeScript app, with google-adk 2.13's (Python) semantics.
 *
 * Add it to the `Runner` (`plugins: [new ContextEnginePlugin({connection: sessions.connection})]`)
 * next to a `ContextEngineSessionService` on the same connection: the engine then holds the log
 * the contents are built from.
 *
 * - **Before each model call** (`beforeModelCallback`) the request's `contents` are replaced by
 *   the engine's `BuildContext` for the calling agent: its name, the invocation's branch and
 *   isolation scope, `includeContents`, the model identity (`Gemini` or another model, by name)
 *   and the invocation's user content, with the request's system instruction, tools and tool
 *   config (for the prompt-cache fingerprint). The engine applies rewinds, compaction summaries
 *   and, when the app configures a token threshold, compacts first.
 * - **Contents since**: the plugin keeps the contents of the last answer for each (session, agent,
 *   branch, isolation scope, `includeContents`, model) in a `ContextView` (the
 *   {@link MAX_CONTEXT_VIEWS} most recently used), so the engine sends only the contents added
 *   since the agent's previous model call (all of them after a rewind or a compaction); the model
 *   still receives the whole contents.
 * - **Prompt caching**, when the engine's app configuration has a context cache config: the
 *   engine's cache decision is applied as ADK Python's Gemini cache manager would. The response
 *   records the decision's `cacheMetadata` (the next decision is made from it); a cache to reuse
 *   (or one the engine created, `managedGeminiCaches`) is sent as `config.cachedContent`, without
 *   the system instruction, tools and tool config it holds, and with only the contents after the
 *   cached ones. A cache the engine leaves to the agent to create is not created here: the call
 *   goes out whole (ADK's own fallback when creating a cache fails).
 * - **After an invocation** (`afterRunCallback`) `EndInvocation` tells the engine, which then
 *   compacts in the background as the app's compaction configuration says.
 *
 * Not supported (an error at the model call rather than contents silently missing):
 * `PreloadMemoryTool` (its memory block is request-only content the engine does not see).
 */
import { fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  type CacheDecision,
  CacheMetadataSchema,
  type ContextEngineClient,
  type ContextView,
  type ContextViewInit,
  hasReason,
} from "@contextengine/client";
import {
  BasePlugin,
  type BaseTool,
  type Context,
  Gemini,
  type InvocationContext,
  type LlmRequest,
  type LlmResponse,
  PreloadMemoryTool,
} from "@google/adk";
import type { Content, ContentUnion, Part } from "@google/genai";
import { Connection, type ConnectionInit } from "./connection.js";
import { contentFromProto, contentToProto, plain } from "./convert.js";
import { InvocationAliases } from "./invocation_aliases.js";
import { callerOf } from "./runner_view.js";

const INCLUDE_CONTENTS_DEFAULT = 1;
const INCLUDE_CONTENTS_NONE = 2;
const MODEL_PROVIDER_GEMINI = 1;
const MODEL_PROVIDER_OTHER = 5;

/** ADK's own tool that hands the conversation to another agent. */
const TRANSFER_TOOL = "transfer_to_agent";

/** The context views a plugin keeps by default (one per session and agent view). */
export const MAX_CONTEXT_VIEWS = 16;

/** The agent fields the plugin reads (an `LlmAgent`'s). */
interface AgentView {
  name: string;
  includeContents?: "default" | "none";
  tools?: unknown[];
  canonicalModel?: { model: string; maybeAppendUserContent(request: LlmRequest): void };
}

/** A request's system instruction (string, Part, Content or a list of them) as one Content. */
export function systemInstructionContent(value: ContentUnion | undefined): Content | undefined {
  if (value === undefined || value === null || value === "") {
    return undefined;
  }
  if (typeof value === "string") {
    return { parts: [{ text: value }] };
  }
  if (Array.isArray(value)) {
    return { parts: value.map((p) => (typeof p === "string" ? { text: p } : (p as Part))) };
  }
  if ("parts" in value || "role" in value) {
    return value as Content;
  }
  return { parts: [value as Part] };
}

/**
 * Sends a request with the cache a decision names (to reuse, or one the engine created):
 * `config.cachedContent` set, without the system instruction, tools and tool config the cache
 * holds, and only the contents after the cached ones (after ADK's continuation turn is added, as
 * ADK's Gemini model does before cutting the prefix). A decision without a cache name
 * (fingerprint only, or a cache left to the agent to create) leaves the request whole.
 */
export function applyCacheDecision(
  llmRequest: LlmRequest,
  decision: Pick<CacheDecision, "cacheName" | "sendFromIndex">,
  model?: { maybeAppendUserContent(request: LlmRequest): void },
): void {
  if (!decision.cacheName) {
    return;
  }
  const config = llmRequest.config ?? {};
  config.cachedContent = decision.cacheName;
  delete config.systemInstruction;
  delete config.tools;
  delete config.toolConfig;
  llmRequest.config = config;
  model?.maybeAppendUserContent(llmRequest);
  llmRequest.contents = llmRequest.contents.slice(decision.sendFromIndex);
}

/** ADK TypeScript's app and the engine's prompt building, joined; see the module docs. */
export class ContextEnginePlugin extends BasePlugin {
  readonly connection: Connection;
  /** (invocation id, agent) -> the cache metadata the pending model call records. */
  private readonly pendingCache = new Map<string, JsonObject>();
  /** (session, agent view) -> its "contents since" view; least recently used first. */
  private readonly views = new Map<string, ContextView>();
  private readonly maxViews: number;
  /** Runs that continue a long-running call's invocation (shared with the session service). */
  private readonly aliases: InvocationAliases;

  /**
   * `{connection: sessions.connection}` (shared) or `{target: "host:port"}`. `contextViews`: how
   * many agent views of sessions keep their last contents for "contents since" (default
   * {@link MAX_CONTEXT_VIEWS}; 0: every model call gets all the contents from the engine).
   */
  constructor(init: ConnectionInit & { name?: string; contextViews?: number }) {
    super(init.name ?? "contextengine");
    const maxViews = init.contextViews ?? MAX_CONTEXT_VIEWS;
    if (!Number.isInteger(maxViews) || maxViews < 0) {
      throw new RangeError(`contextViews must be a whole number >= 0, got ${maxViews}`);
    }
    this.maxViews = maxViews;
    this.connection = Connection.of(init);
    this.aliases = InvocationAliases.of(this.connection.client);
  }

  private get client(): ContextEngineClient {
    return this.connection.client;
  }

  /** Closes the client if this plugin made it. */
  close(): void {
    this.connection.release();
  }

  /**
   * A message answering a function call goes to the agent that made the call, as in google-adk
   * and ADK Java (ADK TypeScript routes it so only in resumable apps; otherwise the agent that
   * spoke last would get an answer to a call it never made).
   */
  override async beforeRunCallback({
    invocationContext,
  }: {
    invocationContext: InvocationContext;
  }): Promise<Content | undefined> {
    const caller = callerOf(invocationContext.session.events);
    const agent = invocationContext.agent;
    if (caller !== undefined && agent !== undefined && agent.name !== caller) {
      const found = agent.rootAgent.findAgent(caller);
      if (found !== undefined) {
        invocationContext.agent = found;
      }
    }
    return undefined;
  }

  /**
   * ADK's `transfer_to_agent` answers with bookkeeping that differs by port: google-adk records
   * `{result: null}`, ADK TypeScript `{result: "Transfer queued"}`. The engine's log, and with
   * it the sizes its compaction weighs, must be google-adk's: the answer is recorded as
   * google-adk's (the transfer itself, `actions.transferToAgent`, is unchanged).
   */
  override async afterToolCallback({
    tool,
  }: {
    tool: BaseTool;
    toolArgs: Record<string, unknown>;
    toolContext: Context;
    result: Record<string, unknown>;
  }): Promise<Record<string, unknown> | undefined> {
    return tool.name === TRANSFER_TOOL ? { result: null } : undefined;
  }

  override async beforeModelCallback({
    callbackContext,
    llmRequest,
  }: {
    callbackContext: Context;
    llmRequest: LlmRequest;
  }): Promise<LlmResponse | undefined> {
    const ic = callbackContext.invocationContext;
    const agent = ic.agent as AgentView | undefined;
    if (agent === undefined) {
      return undefined;
    }
    if ((agent.tools ?? []).some((tool) => tool instanceof PreloadMemoryTool)) {
      throw new Error(
        `agent ${JSON.stringify(agent.name)} has a PreloadMemoryTool, which ContextEnginePlugin ` +
          "does not support yet (its memories are request-only contents)",
      );
    }
    const request = this.request(ic, agent, llmRequest);
    const view = this.view(request);
    const response = await this.explained(ic, () =>
      view === undefined ? this.client.buildContext(request) : view.build(request),
    );
    llmRequest.contents = response.contents.map(contentFromProto);
    if (response.cacheDecision !== undefined) {
      this.applyCache(ic, agent, llmRequest, response.cacheDecision);
    }
    return undefined;
  }

  private request(
    ic: InvocationContext,
    agent: AgentView,
    llmRequest: LlmRequest,
  ): ContextViewInit {
    const currentTurn =
      (agent.includeContents ?? "default") !== "default" ||
      llmRequest.previousInteractionId !== undefined;
    const model = agent.canonicalModel;
    const config = llmRequest.config ?? {};
    const instruction = systemInstructionContent(config.systemInstruction);
    const tools = (config.tools ?? []).map(plain).filter(isObject);
    const toolConfig = config.toolConfig === undefined ? undefined : plain(config.toolConfig);
    return {
      appName: ic.session.appName,
      userId: ic.session.userId,
      sessionId: ic.session.id,
      agentName: agent.name,
      includeContents: currentTurn ? INCLUDE_CONTENTS_NONE : INCLUDE_CONTENTS_DEFAULT,
      model: {
        provider: model instanceof Gemini ? MODEL_PROVIDER_GEMINI : MODEL_PROVIDER_OTHER,
        model: llmRequest.model || model?.model || "",
      },
      invocationId: this.aliases.stored(ic.session, ic.invocationId),
      ...(ic.branch !== undefined ? { branch: ic.branch } : {}),
      ...(ic.isolationScope !== undefined ? { isolationScope: ic.isolationScope } : {}),
      ...(ic.userContent !== undefined ? { userContent: contentToProto(ic.userContent) } : {}),
      ...(instruction !== undefined ? { systemInstruction: contentToProto(instruction) } : {}),
      tools,
      ...(isObject(toolConfig) ? { toolConfig } : {}),
    };
  }

  /** The context view of a request's session and agent view (made, or moved to the end). */
  private view(request: ContextViewInit): ContextView | undefined {
    if (this.maxViews === 0) {
      return undefined;
    }
    const k = JSON.stringify([
      request.appName,
      request.userId,
      request.sessionId,
      request.agentName,
      request.branch ?? null,
      request.isolationScope ?? null,
      request.includeContents,
      request.model?.provider,
      request.model?.model,
    ]);
    const view = this.views.get(k) ?? this.client.contextView({});
    this.views.delete(k);
    this.views.set(k, view);
    for (const oldest of this.views.keys()) {
      if (this.views.size <= this.maxViews) {
        break;
      }
      this.views.delete(oldest);
    }
    return view;
  }

  private applyCache(
    ic: InvocationContext,
    agent: AgentView,
    llmRequest: LlmRequest,
    decision: CacheDecision,
  ): void {
    if (decision.cacheMetadata !== undefined) {
      const metadata = toJson(CacheMetadataSchema, decision.cacheMetadata) as JsonObject;
      this.pendingCache.set(key(ic.invocationId, agent.name), metadata);
    }
    applyCacheDecision(llmRequest, decision, agent.canonicalModel);
  }

  override async afterModelCallback({
    callbackContext,
    llmResponse,
  }: {
    callbackContext: Context;
    llmResponse: LlmResponse;
  }): Promise<LlmResponse | undefined> {
    const ic = callbackContext.invocationContext;
    if (ic.agent === undefined) {
      return undefined;
    }
    const k = key(ic.invocationId, ic.agent.name);
    const metadata = this.pendingCache.get(k);
    this.pendingCache.delete(k);
    const response = llmResponse as LlmResponse & { cacheMetadata?: JsonObject };
    if (metadata !== undefined && response.cacheMetadata === undefined) {
      // checked against the proto, then carried into the model's event (ADK spreads the response)
      fromJson(CacheMetadataSchema, metadata);
      response.cacheMetadata = metadata;
    }
    return undefined;
  }

  override async afterRunCallback({
    invocationContext,
  }: {
    invocationContext: InvocationContext;
  }): Promise<void> {
    const prefix = `${invocationContext.invocationId}\u0000`;
    for (const k of [...this.pendingCache.keys()]) {
      if (k.startsWith(prefix)) {
        this.pendingCache.delete(k);
      }
    }
    const session = invocationContext.session;
    await this.explained(invocationContext, () =>
      this.client.endInvocation({
        appName: session.appName,
        userId: session.userId,
        sessionId: session.id,
        invocationId: this.aliases.stored(session, invocationContext.invocationId),
      }),
    );
  }

  /** `call()`, with a session the engine does not have explained (the wrong session service). */
  private async explained<T>(ic: InvocationContext, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (hasReason(err, "SESSION_NOT_FOUND")) {
        throw new Error(
          `session ${JSON.stringify(ic.session.id)} is not in the plugin's engine ` +
            `(${this.client.baseUrl}): use a ContextEngineSessionService on the plugin's ` +
            "connection (new ContextEnginePlugin({connection: sessions.connection}))",
          { cause: err },
        );
      }
      throw err;
    }
  }
}

function key(invocationId: string, agent: string): string {
  return `${invocationId}\u0000${agent}`;
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
