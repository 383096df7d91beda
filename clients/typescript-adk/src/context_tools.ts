/**
 * `ContextEngineContextTools`: the engine's context tools as an `@google/adk` toolset, so that
 * one line gives an agent the seven tools with which the model pins, hides, summarizes, expands
 * and searches its own context:
 *
 *   new LlmAgent({ ..., tools: [new ContextEngineContextTools({ connection: sessions.connection })] })
 *
 * The engine declares the tools (ListContextTools, read once) and runs every call
 * (CallContextTool) for the agent, branch, isolation scope and invocation of the call's tool
 * context, with the model's function call id. ADK's runner appends the call and its answer as
 * for any tool; the engine records the answer's edit when the session service appends it, so the
 * next model call (built by `ContextEnginePlugin`) shows it and a rewind before the call undoes
 * it. The app's (or the session's) configuration must enable the tools
 * (`ContextToolsConfig.enabled`); otherwise each call fails with `CONTEXT_TOOLS_DISABLED` and
 * ADK answers the model with that error.
 *
 * Use it with the session service and the plugin on the same connection: the invocation a call
 * belongs to is the one the session service stored (a run that answers a long-running call
 * continues that call's invocation, `invocation_aliases.ts`).
 */
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type ContextEngineClient,
  type FunctionCallInit,
  genaiDeclaration,
} from "@contextengine/client";
import {
  BaseTool,
  BaseToolset,
  type Context,
  type ReadonlyContext,
  type RunAsyncToolRequest,
  type ToolPredicate,
} from "@google/adk";
import type { FunctionDeclaration } from "@google/genai";
import { Connection, type ConnectionInit } from "./connection.js";
import { plain } from "./convert.js";
import { InvocationAliases } from "./invocation_aliases.js";

/** The app ListContextTools is asked for when `getTools` has no context (the same for every app). */
const ANY_APP = "contextengine";

/** One context tool: its declaration is the engine's, its run one CallContextTool. */
export class ContextEngineTool extends BaseTool {
  constructor(
    private readonly client: ContextEngineClient,
    private readonly aliases: InvocationAliases,
    private readonly declaration: FunctionDeclaration,
  ) {
    super({ name: declaration.name ?? "", description: declaration.description ?? "" });
  }

  override _getDeclaration(): FunctionDeclaration {
    return this.declaration;
  }

  /** Runs the call on the engine; resolves to the result the model reads (plain JSON). */
  override async runAsync({ args, toolContext }: RunAsyncToolRequest): Promise<JsonObject> {
    const call = callOf(this.name, args, toolContext);
    const ic = toolContext.invocationContext;
    const session = ic.session;
    const tools = this.client.contextTools({
      appName: session.appName,
      userId: session.userId,
      sessionId: session.id,
      agentName: toolContext.agentName,
      ...(ic.branch !== undefined ? { branch: ic.branch } : {}),
      ...(ic.isolationScope !== undefined ? { isolationScope: ic.isolationScope } : {}),
    });
    const response = await tools.answer(call, {
      invocationId: this.aliases.stored(session, toolContext.invocationId),
      ...(toolContext.abortSignal !== undefined ? { signal: toolContext.abortSignal } : {}),
    });
    return response.response ?? {};
  }
}

/** The model's call as the engine takes it: the tool's name, the arguments, the call's id. */
function callOf(name: string, args: Record<string, unknown>, toolContext: Context) {
  const json = plain(args);
  const call: FunctionCallInit = {
    name,
    args: typeof json === "object" && json !== null && !Array.isArray(json) ? json : {},
  };
  if (toolContext.functionCallId) {
    call.id = toolContext.functionCallId;
  }
  return call;
}

/** The engine's context tools for an ADK TypeScript agent; see the module documentation. */
export class ContextEngineContextTools extends BaseToolset {
  readonly connection: Connection;
  private readonly aliases: InvocationAliases;
  private tools: Promise<ContextEngineTool[]> | undefined;

  /**
   * `{connection: sessions.connection}` (shared, the usual way) or `{target: "host:port"}` (a
   * client of its own, closed by {@link release}). `toolFilter`: the names of the tools to
   * give the agent (as ListContextTools declares them), or ADK's predicate; default all seven.
   */
  constructor(init: ConnectionInit & { toolFilter?: ToolPredicate | string[] }) {
    super(init.toolFilter ?? []);
    this.connection = Connection.of(init);
    this.aliases = InvocationAliases.of(this.connection.client);
  }

  /**
   * The tools, declared by the engine (read once; a failed read is tried again next time),
   * filtered by `toolFilter` (a predicate only when there is a context, as ADK's MCP toolset).
   */
  override async getTools(context?: ReadonlyContext): Promise<BaseTool[]> {
    const tools = await this.declared(context);
    if (context !== undefined) {
      return tools.filter((tool) => this.isToolSelected(tool, context));
    }
    const filter = this.toolFilter;
    return Array.isArray(filter) && filter.length > 0
      ? tools.filter((tool) => filter.includes(tool.name))
      : [...tools];
  }

  /**
   * ADK's `Runner` closes an agent's toolsets at the end of every run, runs of other sessions
   * may still be using the connection: nothing is closed here (see {@link release}).
   */
  override async close(): Promise<void> {}

  /** Closes the client if this toolset made it (`{target}`); a shared connection stays open. */
  release(): void {
    this.connection.release();
  }

  private declared(context: ReadonlyContext | undefined): Promise<ContextEngineTool[]> {
    if (this.tools === undefined) {
      const session = context?.invocationContext.session;
      const tools = this.connection.client
        .listContextTools({ appName: session?.appName ?? ANY_APP, userId: session?.userId ?? "" })
        .then((listed) =>
          listed.functionDeclarations.map(
            (declaration) =>
              new ContextEngineTool(
                this.connection.client,
                this.aliases,
                genaiDeclaration(declaration) as FunctionDeclaration,
              ),
          ),
        );
      this.tools = tools;
      tools.catch(() => {
        if (this.tools === tools) {
          this.tools = undefined;
        }
      });
    }
    return this.tools;
  }
}
