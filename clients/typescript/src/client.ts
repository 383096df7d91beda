/**
 * `ContextEngineClient`: a thin, typed client for the contextengine sidecar over gRPC (HTTP/2,
 * plaintext on loopback), built on Connect-ES and the code generated from proto/contextengine/v1.
 *
 * - Unary RPCs are promise-returning methods named after the RPC (`createSession`, `appendEvent`,
 *   `buildContext`, ...). They take the request as a plain object (`MessageInitShape`) and resolve
 *   to the whole response message.
 * - Every call has a deadline (`timeoutMs`, per call or the client's default) that covers its
 *   retries too, and an optional `AbortSignal`.
 * - Only calls that are safe to repeat are retried, after UNAVAILABLE: reads, and appends, which
 *   are idempotent because the client gives each event an id (and a timestamp) before the first
 *   attempt. Creating a session, rewinding, compacting, committing a summary and calling a context
 *   tool are never retried. Which calls are safe is declared once, in the protos (each method's
 *   `idempotency_level`), and read from the generated descriptors (src/retries.ts).
 * - Errors are {@link ContextEngineError}s with the gRPC code and the server's ErrorInfo reason.
 * - `subscribeEvents` / `watchSessionState` are async iterables that reopen the stream from the
 *   last cursor received when it breaks (server shutdown, lost connection, SUBSCRIBER_LAGGED).
 */

import type { SecureClientSessionOptions } from "node:http2";
import { clone, create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ContextTools, type ContextToolsInit } from "./context_tools.js";
import { ContextView, type ContextViewInit } from "./context_view.js";
import { ContextEngineError, toContextEngineError } from "./errors.js";
import {
  type CommitCompactionRequestSchema,
  type CommitCompactionResponse,
  CompactionService,
  type CompactRequestSchema,
  type CompactResponse,
  type EndInvocationRequestSchema,
  type EndInvocationResponse,
  type ExpandSummaryRequestSchema,
  type ExpandSummaryResponse,
  type GetCompactionStatusRequestSchema,
  type GetCompactionStatusResponse,
  type PlanCompactionRequestSchema,
  type PlanCompactionResponse,
} from "./gen/contextengine/v1/compaction_service_pb.js";
import {
  type BuildContextRequestSchema,
  type BuildContextResponse,
  ContextService,
} from "./gen/contextengine/v1/context_service_pb.js";
import {
  type CallContextToolRequestSchema,
  type CallContextToolResponse,
  ContextToolsService,
  type ListContextToolsRequestSchema,
  type ListContextToolsResponse,
} from "./gen/contextengine/v1/context_tools_service_pb.js";
import type { Event } from "./gen/contextengine/v1/event_pb.js";
import {
  type AddEventsToMemoryRequestSchema,
  type AddEventsToMemoryResponse,
  type AddSessionToMemoryRequestSchema,
  type AddSessionToMemoryResponse,
  type DeleteMemoryRequestSchema,
  type DeleteMemoryResponse,
  MemoryService,
  type SearchMemoryRequestSchema,
  type SearchMemoryResponse,
} from "./gen/contextengine/v1/memory_service_pb.js";
import type { Session } from "./gen/contextengine/v1/session_pb.js";
import {
  type AppendEventRequestSchema,
  type AppendEventResponse,
  AppendEventRequestSchema as AppendEventSchema,
  type AppendEventsRequestSchema,
  type AppendEventsResponse,
  AppendEventsRequestSchema as AppendEventsSchema,
  type CreateSessionRequestSchema,
  type CreateSessionResponse,
  type DeleteSessionRequestSchema,
  type DeleteSessionResponse,
  type GetAppConfigRequestSchema,
  type GetAppConfigResponse,
  type GetSessionConfigRequestSchema,
  type GetSessionConfigResponse,
  type GetSessionRequestSchema,
  type GetSessionResponse,
  type ListEventsRequestSchema,
  type ListEventsResponse,
  type ListSessionsRequestSchema,
  type ListSessionsResponse,
  type RewindSessionRequestSchema,
  type RewindSessionResponse,
  SessionService,
  type UpdateAppConfigRequestSchema,
  type UpdateAppConfigResponse,
  type UpdateSessionConfigRequestSchema,
  type UpdateSessionConfigResponse,
} from "./gen/contextengine/v1/session_service_pb.js";
import {
  type SubscribeEventsRequestSchema,
  type SubscribeEventsResponse,
  SubscriptionScope,
  SubscriptionService,
  type WatchSessionStateRequestSchema,
  type WatchSessionStateResponse,
} from "./gen/contextengine/v1/subscription_service_pb.js";
import { answerPart, type RenderableFormat, type RequestPartOf } from "./rendered.js";
import { RenderedView, type RenderedViewInit } from "./rendered_view.js";
import { backoffMs, cancelled, type FollowPolicy, follow, sleep } from "./resume.js";
import { isRetryable } from "./retries.js";
import { traceContext } from "./tracing.js";
import { APP, APP_USER, requireEvent, requireFields, SESSION } from "./validate.js";

/** Request headers (gRPC metadata): a `Headers`, a record or a list of pairs. */
export type HeaderInit = NonNullable<ConstructorParameters<typeof Headers>[0]>;

/** A request as a plain object: every field optional, nested messages as objects too. */
export type Init<D extends DescMessage> = MessageInitShape<D>;

/** Options of the client as a whole. */
export interface ContextEngineClientOptions {
  /** Default deadline of a unary call in milliseconds, retries included. Default 10 000. */
  timeoutMs?: number;
  /** Attempts of a retryable call (the first one included). Default 4; 1 disables retries. */
  attempts?: number;
  /** First retry backoff in ms (doubles per attempt, randomized, capped at 2 s). Default 50. */
  retryBackoffMs?: number;
  /** HTTP/2 keep-alive ping interval in ms (detects dead connections). Default 30 000. */
  pingIntervalMs?: number;
  /** Largest message sent or received, in bytes. Default 64 MiB. */
  maxMessageBytes?: number;
  /** Connect interceptors (auth headers, tracing, ...). */
  interceptors?: Interceptor[];
  /** A transport of your own instead of the HTTP/2 gRPC transport (tests, other protocols). */
  transport?: Transport;
  /**
   * A bearer token sent as `authorization: Bearer <token>` on every call (a sidecar started with
   * `--auth-tokens-file` or `--auth-token`; see docs/security.md).
   */
  token?: string;
  /**
   * TLS to the sidecar (`true`: verified against Node's default roots), or its certificates.
   * A target given as `https://host:port` uses TLS too.
   */
  tls?: boolean | TlsOptions;
  /**
   * Send the current OpenTelemetry span's W3C `traceparent` / `tracestate` on every call, so the
   * sidecar's span of the RPC is its child. Default true; a no-op when `@opentelemetry/api` (an
   * optional peer dependency) is not installed or no span is current.
   */
  traceContext?: boolean;
}

/** TLS settings of {@link ContextEngineClientOptions.tls} (PEM text or bytes). */
export interface TlsOptions {
  /** CA certificates the server's certificate is verified against (default: Node's roots). */
  rootCertificates?: string | Uint8Array;
  /** The client's certificate chain, for mTLS (with {@link privateKey}). */
  certificateChain?: string | Uint8Array;
  /** The client's private key, for mTLS (with {@link certificateChain}). */
  privateKey?: string | Uint8Array;
  /** The name the server's certificate must carry, when it is not the target's host. */
  serverName?: string;
}

/** A BuildContext request as a plain object: the session, the view and the options below. */
export type BuildContextInit = Init<typeof BuildContextRequestSchema>;

/**
 * The options of {@link ContextEngineClient.buildContext} beyond the session and the view (each
 * documented on `BuildContextRequest`): compaction, memory preload and prompt caching.
 */
export type BuildContextOptions = Pick<
  BuildContextInit,
  | "skipCompaction"
  | "preloadMemory"
  | "memoryQuery"
  | "systemInstruction"
  | "tools"
  | "toolConfig"
  | "invocationId"
  | "since"
  | "render"
>;

/** Options of one unary call. */
export interface CallOptions {
  /** Aborts the call (and its retries): it then rejects with CANCELLED. */
  signal?: AbortSignal;
  /** Deadline of this call in milliseconds, retries included. */
  timeoutMs?: number;
  /** Extra request headers (gRPC metadata). */
  headers?: HeaderInit;
}

/** Options of a followed stream. */
export interface StreamOptions {
  /** Ends the stream: iteration then throws CANCELLED. (Or stop iterating: `break`.) */
  signal?: AbortSignal;
  /** Extra request headers (gRPC metadata). */
  headers?: HeaderInit;
  /** Failures in a row, without a frame in between, before giving up. Default 5. */
  maxFailures?: number;
  /**
   * A stream silent for this long is reopened. Default: three heartbeat intervals plus 5 s
   * (the heartbeat interval is the request's `heartbeatSeconds`, or the server's 15 s).
   */
  idleTimeoutMs?: number;
  /** Called before each reopening, with the error that ended the previous stream. */
  onReconnect?: (error: ContextEngineError, failures: number) => void;
}

const SERVER_HEARTBEAT_SECONDS = 15;

/**
 * `host:port`, `http://host:port` or `https://host:port` to the base URL of the gRPC transport
 * (`https` for a bare `host:port` when `tls`).
 */
export function baseUrlOf(target: string, tls = false): string {
  if (target.startsWith("unix:")) {
    throw new RangeError("Unix sockets are not supported by the TypeScript client; use host:port");
  }
  if (tls && target.startsWith("http://")) {
    throw new RangeError("an http:// target cannot use TLS; use https://host:port or host:port");
  }
  const url = /^https?:\/\//.test(target) ? target : `${tls ? "https" : "http"}://${target}`;
  return url.replace(/\/+$/, "");
}

/** An interceptor adding `authorization: Bearer <token>` to every request. */
export function bearerToken(token: string): Interceptor {
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new RangeError("the token must be printable ASCII without spaces, and not empty");
  }
  const value = `Bearer ${token}`;
  return (next) => (request) => {
    request.header.set("authorization", value);
    return next(request);
  };
}

/** The node:http2 options of {@link ContextEngineClientOptions.tls}. */
function tlsSessionOptions(
  tls: boolean | TlsOptions | undefined,
): SecureClientSessionOptions | undefined {
  if (tls === undefined || typeof tls === "boolean") {
    return undefined;
  }
  if ((tls.certificateChain === undefined) !== (tls.privateKey === undefined)) {
    throw new RangeError("tls.certificateChain and tls.privateKey are given together (mTLS)");
  }
  const pem = (value: string | Uint8Array | undefined) =>
    value === undefined || typeof value === "string" ? value : Buffer.from(value);
  const options: SecureClientSessionOptions = {};
  const ca = pem(tls.rootCertificates);
  const cert = pem(tls.certificateChain);
  const key = pem(tls.privateKey);
  if (ca !== undefined) options.ca = ca;
  if (cert !== undefined) options.cert = cert;
  if (key !== undefined) options.key = key;
  if (tls.serverName !== undefined) options.servername = tls.serverName;
  return options;
}

/** The cursor a subscription frame carries (`""` for none). */
export function frameCursor(frame: SubscribeEventsResponse): string {
  switch (frame.frame.case) {
    case "event":
      return frame.frame.value.cursor;
    case "events": {
      // A batch is resumed past as a whole: after its last event.
      const events = frame.frame.value.events;
      return events[events.length - 1]?.cursor ?? "";
    }
    case "caughtUp":
      return frame.frame.value.cursor;
    case "heartbeat":
      return frame.frame.value.cursor;
    default:
      return "";
  }
}

/** The recorded events a subscription frame carries (a batch flattened; none for other frames). */
export function eventsOf(frame: SubscribeEventsResponse) {
  switch (frame.frame.case) {
    case "event":
      return [frame.frame.value];
    case "events":
      return frame.frame.value.events;
    default:
      return [];
  }
}

/** A client for one sidecar. Call {@link close} when done. */
export class ContextEngineClient {
  /** The base URL requests go to, e.g. `http://127.0.0.1:50151`. */
  readonly baseUrl: string;
  /** The generated Connect clients, for anything this class does not wrap. */
  readonly raw: {
    readonly sessions: Client<typeof SessionService>;
    readonly contexts: Client<typeof ContextService>;
    readonly compaction: Client<typeof CompactionService>;
    readonly subscriptions: Client<typeof SubscriptionService>;
    readonly memory: Client<typeof MemoryService>;
    readonly contextTools: Client<typeof ContextToolsService>;
  };
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly retryBackoffMs: number;
  private readonly sessionManager: Http2SessionManager | undefined;

  /** `target`: `host:port` (e.g. `127.0.0.1:50151`) or `http://host:port`. */
  constructor(target: string, options: ContextEngineClientOptions = {}) {
    this.baseUrl = baseUrlOf(target, options.tls !== undefined && options.tls !== false);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.attempts = options.attempts ?? 4;
    this.retryBackoffMs = options.retryBackoffMs ?? 50;
    if (!(this.attempts >= 1)) {
      throw new RangeError("attempts must be at least 1");
    }
    if (!(this.timeoutMs > 0)) {
      throw new RangeError("timeoutMs must be positive");
    }
    let transport = options.transport;
    if (transport === undefined) {
      const ping = { pingIntervalMs: options.pingIntervalMs ?? 30_000 };
      this.sessionManager = new Http2SessionManager(
        this.baseUrl,
        ping,
        tlsSessionOptions(options.tls),
      );
      const maxBytes = options.maxMessageBytes ?? 64 * 1024 * 1024;
      const interceptors = [...(options.interceptors ?? [])];
      if (options.token !== undefined) {
        interceptors.unshift(bearerToken(options.token));
      }
      if (options.traceContext ?? true) {
        interceptors.unshift(traceContext());
      }
      transport = createGrpcTransport({
        baseUrl: this.baseUrl,
        sessionManager: this.sessionManager,
        interceptors,
        readMaxBytes: maxBytes,
        writeMaxBytes: maxBytes,
      });
    }
    this.raw = {
      sessions: createClient(SessionService, transport),
      contexts: createClient(ContextService, transport),
      compaction: createClient(CompactionService, transport),
      subscriptions: createClient(SubscriptionService, transport),
      memory: createClient(MemoryService, transport),
      contextTools: createClient(ContextToolsService, transport),
    };
  }

  /** Closes the HTTP/2 connection; calls in flight fail. */
  close(): void {
    this.sessionManager?.abort();
  }

  // Sessions ----------------------------------------------------------------------------------

  /** Creates a session (never retried: a retry could meet ALREADY_EXISTS). */
  createSession(
    request: Init<typeof CreateSessionRequestSchema>,
    options?: CallOptions,
  ): Promise<CreateSessionResponse> {
    const method = "SessionService/CreateSession";
    requireFields(method, request, APP_USER);
    return this.call(method, options, (o) => this.raw.sessions.createSession(request, o));
  }

  /** A session with its merged state and (a filtered view of) its events. */
  getSession(
    request: Init<typeof GetSessionRequestSchema>,
    options?: CallOptions,
  ): Promise<GetSessionResponse> {
    const method = "SessionService/GetSession";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.sessions.getSession(request, o));
  }

  /** One page of an app's (or a user's) sessions; see {@link iterateSessions}. */
  listSessions(
    request: Init<typeof ListSessionsRequestSchema>,
    options?: CallOptions,
  ): Promise<ListSessionsResponse> {
    const method = "SessionService/ListSessions";
    requireFields(method, request, APP);
    return this.call(method, options, (o) => this.raw.sessions.listSessions(request, o));
  }

  /** Every session of an app (or a user), page after page. */
  async *iterateSessions(
    request: Init<typeof ListSessionsRequestSchema>,
    options?: CallOptions,
  ): AsyncGenerator<Session, void, undefined> {
    let pageToken = request.pageToken ?? "";
    do {
      const page = await this.listSessions({ ...request, pageToken }, options);
      yield* page.sessions;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Deletes a session; retried only with `allowMissing` (otherwise a retry could see NOT_FOUND). */
  deleteSession(
    request: Init<typeof DeleteSessionRequestSchema>,
    options?: CallOptions,
  ): Promise<DeleteSessionResponse> {
    const method = "SessionService/DeleteSession";
    requireFields(method, request, SESSION);
    // The proto declares it IDEMPOTENT, but a repeat after a lost answer would meet NOT_FOUND
    // unless a missing session is allowed (then it answers deleted=false).
    const retry = request.allowMissing === true;
    return this.call(method, options, (o) => this.raw.sessions.deleteSession(request, o), retry);
  }

  // Events ------------------------------------------------------------------------------------

  /**
   * Appends one event. An event without an id gets a UUID and one without a timestamp gets the
   * current time before the first attempt, so retries are exact replays (idempotent by id).
   */
  appendEvent(
    request: Init<typeof AppendEventRequestSchema>,
    options?: CallOptions,
  ): Promise<AppendEventResponse> {
    const method = "SessionService/AppendEvent";
    requireFields(method, request, SESSION);
    requireEvent(method, request.event as Record<string, unknown> | undefined, "event");
    const prepared = clone(AppendEventSchema, create(AppendEventSchema, request));
    if (prepared.event) {
      prepareEvent(prepared.event);
    }
    return this.call(method, options, (o) => this.raw.sessions.appendEvent(prepared, o));
  }

  /** Appends events atomically (all or none); ids and timestamps are assigned as in appendEvent. */
  appendEvents(
    request: Init<typeof AppendEventsRequestSchema>,
    options?: CallOptions,
  ): Promise<AppendEventsResponse> {
    const method = "SessionService/AppendEvents";
    requireFields(method, request, SESSION);
    (request.events ?? []).forEach((event, i) => {
      requireEvent(method, event as Record<string, unknown>, `events[${i}]`);
    });
    const prepared = clone(AppendEventsSchema, create(AppendEventsSchema, request));
    for (const event of prepared.events) {
      prepareEvent(event);
    }
    return this.call(method, options, (o) => this.raw.sessions.appendEvents(prepared, o));
  }

  /** One page of a session's events after a sequence; see {@link iterateEvents}. */
  listEvents(
    request: Init<typeof ListEventsRequestSchema>,
    options?: CallOptions,
  ): Promise<ListEventsResponse> {
    const method = "SessionService/ListEvents";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.sessions.listEvents(request, o));
  }

  /** A session's events after `afterSequence`, in log order, page after page. */
  async *iterateEvents(
    request: Init<typeof ListEventsRequestSchema>,
    options?: CallOptions,
  ): AsyncGenerator<Event, void, undefined> {
    let pageToken = request.pageToken ?? "";
    do {
      const page = await this.listEvents({ ...request, pageToken }, options);
      yield* page.events;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Rewinds to just before an invocation (never retried: it appends a rewind event). */
  rewindSession(
    request: Init<typeof RewindSessionRequestSchema>,
    options?: CallOptions,
  ): Promise<RewindSessionResponse> {
    const method = "SessionService/RewindSession";
    requireFields(method, request, [
      ...SESSION,
      ["rewindBeforeInvocationId", "rewind_before_invocation_id"],
    ]);
    return this.call(method, options, (o) => this.raw.sessions.rewindSession(request, o));
  }

  // App configuration -------------------------------------------------------------------------

  /** An app's configuration (empty if none was set). */
  getAppConfig(
    request: Init<typeof GetAppConfigRequestSchema>,
    options?: CallOptions,
  ): Promise<GetAppConfigResponse> {
    const method = "SessionService/GetAppConfig";
    requireFields(method, request, APP);
    return this.call(method, options, (o) => this.raw.sessions.getAppConfig(request, o));
  }

  /** Replaces an app's configuration (a retry writes the same configuration again). */
  updateAppConfig(
    request: Init<typeof UpdateAppConfigRequestSchema>,
    options?: CallOptions,
  ): Promise<UpdateAppConfigResponse> {
    const method = "SessionService/UpdateAppConfig";
    requireFields(method, request, [["config", "config"]]);
    requireFields(method, request.config as Record<string, unknown>, [
      ["appName", "config.app_name"],
    ]);
    return this.call(method, options, (o) => this.raw.sessions.updateAppConfig(request, o));
  }

  // Session configuration ---------------------------------------------------------------------

  /**
   * A session's own configuration (empty, `updateTime` 0, if none was set) and
   * `effectiveCompactionConfig`: the compaction configuration the engine uses for the session
   * (its own if set, else its app's; unset if neither is). NOT_FOUND / SESSION_NOT_FOUND for a
   * missing session.
   */
  getSessionConfig(
    request: Init<typeof GetSessionConfigRequestSchema>,
    options?: CallOptions,
  ): Promise<GetSessionConfigResponse> {
    const method = "SessionService/GetSessionConfig";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.sessions.getSessionConfig(request, o));
  }

  /**
   * Replaces a session's own configuration whole (`config: {}` removes the override, so the
   * app's applies again); resolves to the stored configuration and the compaction configuration
   * now in effect. The configuration is validated like the app's (INVALID_ARGUMENT /
   * INVALID_COMPACTION_CONFIG naming the field). A retry writes the same configuration again.
   */
  updateSessionConfig(
    request: Init<typeof UpdateSessionConfigRequestSchema>,
    options?: CallOptions,
  ): Promise<UpdateSessionConfigResponse> {
    const method = "SessionService/UpdateSessionConfig";
    requireFields(method, request, [...SESSION, ["config", "config"]]);
    return this.call(method, options, (o) => this.raw.sessions.updateSessionConfig(request, o));
  }

  // Contexts ----------------------------------------------------------------------------------

  /**
   * The model contents for an agent's next model call. Besides the session and the view (`agentName`, `branch`, `isolationScope`, `includeContents`, `model`,
   * `userContent`), the request takes the {@link BuildContextOptions}:
   *
   * - `skipCompaction`: build from the log as it is, without the token-threshold compaction the
   *   engine otherwise runs first (`compactionSequence` names a summary it appended).
   * - `preloadMemory` (and `memoryQuery`): also search the user's long-term memory for the current
   *   user message (or `memoryQuery`) and return google-adk's preload block in `memoryPreload`.
   * - Prompt caching, for apps with a `contextCacheConfig`: `systemInstruction`, `tools`,
   *   `toolConfig` (what the model request holds besides the contents; each is validated as the
   *   google-genai type: INVALID_ARGUMENT / INVALID_MODEL_INPUT naming the field otherwise) and
   *   `invocationId`. The response then holds `cacheableContentsCount`, `fingerprint` (equal to
   *   `fingerprint(request, response.contents, response.cacheableContentsCount)`, which this
   *   package exports) and
   *   `cacheDecision`: record its `cacheMetadata` on the model-response event, and send only
   *   `contents.slice(sendFromIndex)` when a cache is used.
   * - `since` ("contents since"): the count and `contentsDigest` of the whole contents of an
   *   earlier answer the caller still holds; the answer's `contents` are then only those after
   *   the first `baseContentsCount` held ones (0: all of them). The answer is returned as sent;
   *   {@link contextView} keeps the last answer and reassembles for you.
   * - `render` (`{ format, since? }`): the context rendered for another provider instead of
   *   `contents`, in `rendered` (docs/design/renderings.md): {@link renderContext} gives it as the
   *   provider's request part, {@link renderedView} keeps the items for `render.since`.
   */
  buildContext(request: BuildContextInit, options?: CallOptions): Promise<BuildContextResponse> {
    const method = "ContextService/BuildContext";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.contexts.buildContext(request, o));
  }

  /**
   * A {@link ContextView} of `request` (the session, the agent and the view options): its
   * `build()` sends `since` with the contents of its last answer and resolves to the whole
   * contents, while only the new ones cross the wire.
   */
  contextView(request: ContextViewInit): ContextView {
    return new ContextView(this, request);
  }

  /**
   * The context for the next model call rendered as `format`, as the provider's own request
   * part (see {@link requestPart}): `{ messages }` for OpenAI Chat Completions, `{ input,
   * instructions? }` for the Responses API, `{ messages, system? }` for Anthropic Messages, typed
   * with the provider SDK's types; spread it into the SDK's call. `request`: as
   * {@link buildContext}'s, without `render`.
   */
  async renderContext<F extends RenderableFormat>(
    request: RenderedViewInit,
    format: F,
    options?: CallOptions,
  ): Promise<RequestPartOf<F>> {
    const answer = await this.buildContext({ ...request, render: { format } }, options);
    return answerPart(answer, format);
  }

  /**
   * A {@link RenderedView} of `request` rendered as `format`: its `build()` sends `render.since`
   * with the items of its last rendering and resolves to the whole request part, while only the
   * new items cross the wire.
   */
  renderedView<F extends RenderableFormat>(request: RenderedViewInit, format: F): RenderedView<F> {
    return new RenderedView(this, format, request);
  }

  // Compaction --------------------------------------------------------------------------------

  /** Signals the end of an invocation; the engine may compact in the background. */
  endInvocation(
    request: Init<typeof EndInvocationRequestSchema>,
    options?: CallOptions,
  ): Promise<EndInvocationResponse> {
    const method = "CompactionService/EndInvocation";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.endInvocation(request, o));
  }

  /** Compacts now and waits for the summary (never retried: it may append a summary). */
  compact(
    request: Init<typeof CompactRequestSchema>,
    options?: CallOptions,
  ): Promise<CompactResponse> {
    const method = "CompactionService/Compact";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.compact(request, o));
  }

  /** The range the engine would compact now and the prompt for a model of the client's own. */
  planCompaction(
    request: Init<typeof PlanCompactionRequestSchema>,
    options?: CallOptions,
  ): Promise<PlanCompactionResponse> {
    const method = "CompactionService/PlanCompaction";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.planCompaction(request, o));
  }

  /** Appends a summary the client produced for a plan (never retried). */
  commitCompaction(
    request: Init<typeof CommitCompactionRequestSchema>,
    options?: CallOptions,
  ): Promise<CommitCompactionResponse> {
    const method = "CompactionService/CommitCompaction";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.commitCompaction(request, o));
  }

  /** The events (and earlier summaries) a summary replaced. */
  expandSummary(
    request: Init<typeof ExpandSummaryRequestSchema>,
    options?: CallOptions,
  ): Promise<ExpandSummaryResponse> {
    const method = "CompactionService/ExpandSummary";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.expandSummary(request, o));
  }

  /** Counters and the state of a session's background compaction. */
  getCompactionStatus(
    request: Init<typeof GetCompactionStatusRequestSchema>,
    options?: CallOptions,
  ): Promise<GetCompactionStatusResponse> {
    const method = "CompactionService/GetCompactionStatus";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.compaction.getCompactionStatus(request, o));
  }

  // Memory ------------------------------------------------------------------------------------
  //
  // Long-term memory per (app, user), across sessions: sessions (or chosen events) are added,
  // then searched by keywords (BM25; CJK words are found inside unspaced text; query text is
  // never query syntax). `buildContext` with `preloadMemory` searches it for the current message.

  /**
   * Brings a session's memories up to date: afterwards they are exactly its remembered events
   * (those with text that survive its rewinds). Idempotent, so retried. NOT_FOUND /
   * SESSION_NOT_FOUND for a missing session.
   */
  addSessionToMemory(
    request: Init<typeof AddSessionToMemoryRequestSchema>,
    options?: CallOptions,
  ): Promise<AddSessionToMemoryResponse> {
    const method = "MemoryService/AddSessionToMemory";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.memory.addSessionToMemory(request, o));
  }

  /**
   * Remembers chosen events of a session, by sequence (1 to 1000 of them; rewound or text-less
   * events are skipped and listed in `skippedSequences`). Remembering one twice changes nothing,
   * so retried. NOT_FOUND / EVENT_NOT_FOUND for a sequence beyond the log.
   */
  addEventsToMemory(
    request: Init<typeof AddEventsToMemoryRequestSchema>,
    options?: CallOptions,
  ): Promise<AddEventsToMemoryResponse> {
    const method = "MemoryService/AddEventsToMemory";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.memory.addEventsToMemory(request, o));
  }

  /**
   * Searches a user's memories: best first, with a `score` (higher is better) and the `ranking`
   * that computed it. `limit` 0 means the app's `MemoryConfig.maxResults` (10). A blank query is
   * INVALID_ARGUMENT / MISSING_FIELD (`query`).
   */
  searchMemory(
    request: Init<typeof SearchMemoryRequestSchema>,
    options?: CallOptions,
  ): Promise<SearchMemoryResponse> {
    const method = "MemoryService/SearchMemory";
    requireFields(method, request, APP_USER);
    return this.call(method, options, (o) => this.raw.memory.searchMemory(request, o));
  }

  /**
   * Deletes a session's memories, or all of the user's in the app when `sessionId` is empty
   * (memories outlive their sessions until then). Deleting nothing is fine, so retried.
   */
  deleteMemory(
    request: Init<typeof DeleteMemoryRequestSchema>,
    options?: CallOptions,
  ): Promise<DeleteMemoryResponse> {
    const method = "MemoryService/DeleteMemory";
    requireFields(method, request, APP_USER);
    return this.call(method, options, (o) => this.raw.memory.deleteMemory(request, o));
  }

  // Context tools -----------------------------------------------------------------------------
  //
  // The model pins, hides, summarizes, expands and searches its own context: the engine declares
  // the seven tools and runs every call (docs/design/context-tools.md). Off unless the app's (or
  // the session's) `ContextToolsConfig.enabled`. {@link contextTools} is the helper a model loop
  // uses.

  /**
   * The context tools' declarations, the same for every app: google-genai `FunctionDeclaration`s
   * (`functionDeclarations`, snake_case JSON) and the JSON texts of OpenAI Chat, OpenAI Responses
   * and Anthropic tools. `userId` is needed only by a token restricted to one user. Retried.
   */
  listContextTools(
    request: Init<typeof ListContextToolsRequestSchema>,
    options?: CallOptions,
  ): Promise<ListContextToolsResponse> {
    const method = "ContextToolsService/ListContextTools";
    requireFields(method, request, APP);
    return this.call(method, options, (o) => this.raw.contextTools.listContextTools(request, o));
  }

  /**
   * Runs one call of a context tool for an agent's view of a session (`agentName`, `branch`,
   * `isolationScope`, as for `buildContext`) and resolves to its answer: `response`, the
   * function response to append as the call's answer (the engine records the answer's edit when
   * it is appended), the `edits` it makes then, and `refusal` when the engine refused the call
   * (the response then says why to the model: `ok` false, `reason`, `rule`, `message`). The
   * caller's mistakes are errors: INVALID_ARGUMENT / UNKNOWN_CONTEXT_TOOL, FAILED_PRECONDITION /
   * CONTEXT_TOOLS_DISABLED, NOT_FOUND / SESSION_NOT_FOUND. Never retried (`context_summarize`
   * appends a summary).
   */
  callContextTool(
    request: Init<typeof CallContextToolRequestSchema>,
    options?: CallOptions,
  ): Promise<CallContextToolResponse> {
    const method = "ContextToolsService/CallContextTool";
    requireFields(method, request, SESSION);
    return this.call(method, options, (o) => this.raw.contextTools.callContextTool(request, o));
  }

  /**
   * The context tools of one agent in one session ({@link ContextTools}): their declarations in
   * a provider's shape, and the call, answer and run of a model's call.
   */
  contextTools(init: ContextToolsInit): ContextTools {
    return new ContextTools(this, init);
  }

  // Subscriptions -----------------------------------------------------------------------------

  /**
   * The frames of `SubscribeEvents` (events, `caughtUp`, heartbeats, batches), after the request's
   * cursor. When the stream breaks it is reopened from the last cursor received: no event is
   * missed or repeated, and a new `caughtUp` frame follows the replay. Stop with `break` or the
   * signal. The scope is the request's (`SUBSCRIPTION_SCOPE_UNSPECIFIED` means session scope).
   */
  subscribeEvents(
    request: Init<typeof SubscribeEventsRequestSchema>,
    options: StreamOptions = {},
  ): AsyncGenerator<SubscribeEventsResponse, void, undefined> {
    const method = "SubscriptionService/SubscribeEvents";
    const scope = request.scope ?? SubscriptionScope.UNSPECIFIED;
    const bySequence =
      scope === SubscriptionScope.UNSPECIFIED || scope === SubscriptionScope.SESSION;
    requireFields(
      method,
      request,
      scope === SubscriptionScope.USER ? APP_USER : scope === SubscriptionScope.APP ? APP : SESSION,
    );
    let next: Init<typeof SubscribeEventsRequestSchema> = { ...request };
    const policy = this.policy(options, request.heartbeatSeconds ?? 0);
    const open = (signal: AbortSignal) =>
      this.raw.subscriptions.subscribeEvents(next, { signal, headers: options.headers ?? {} });
    async function* frames(): AsyncGenerator<SubscribeEventsResponse, void, undefined> {
      for await (const frame of follow(open, policy, method, options.signal)) {
        const cursor = frameCursor(frame);
        if (cursor) {
          next = bySequence
            ? { ...next, afterSequence: BigInt(cursor) }
            : { ...next, afterCursor: cursor };
        }
        yield frame;
      }
    }
    return frames();
  }

  /**
   * The frames of `WatchSessionState`: a snapshot of the merged state, then deltas. When the
   * stream breaks it is reopened and a new snapshot follows: replace the state you hold with it.
   */
  watchSessionState(
    request: Init<typeof WatchSessionStateRequestSchema>,
    options: StreamOptions = {},
  ): AsyncGenerator<WatchSessionStateResponse, void, undefined> {
    const method = "SubscriptionService/WatchSessionState";
    requireFields(method, request, SESSION);
    const policy = this.policy(options, request.heartbeatSeconds ?? 0);
    const open = (signal: AbortSignal) =>
      this.raw.subscriptions.watchSessionState(request, { signal, headers: options.headers ?? {} });
    return follow(open, policy, method, options.signal);
  }

  // Internals ---------------------------------------------------------------------------------

  private policy(options: StreamOptions, heartbeatSeconds: number): FollowPolicy {
    const heartbeat = heartbeatSeconds > 0 ? heartbeatSeconds : SERVER_HEARTBEAT_SECONDS;
    return {
      maxFailures: options.maxFailures ?? 5,
      idleTimeoutMs: options.idleTimeoutMs ?? (3 * heartbeat + 5) * 1000,
      firstBackoffMs: this.retryBackoffMs,
      maxBackoffMs: 2_000,
      onReconnect: options.onReconnect,
    };
  }

  /**
   * Runs one unary call under one deadline: each attempt gets the time that is left; a retryable
   * call is tried again after UNAVAILABLE while attempts and time remain. Retryable: the proto
   * declares an `idempotency_level` for `method` (src/retries.ts) and `requestAllows`, a
   * request's own condition, holds.
   */
  private async call<T>(
    method: string,
    options: CallOptions | undefined,
    fn: (o: { signal?: AbortSignal; timeoutMs: number; headers: HeaderInit }) => Promise<T>,
    requestAllows = true,
  ): Promise<T> {
    const retryable = requestAllows && isRetryable(method);
    const timeoutMs = options?.timeoutMs ?? this.timeoutMs;
    const signal = options?.signal;
    const started = Date.now();
    const deadline = started + timeoutMs;
    const attempts = retryable ? this.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) {
        throw cancelled(signal, method);
      }
      const remaining = Math.max(1, deadline - Date.now());
      try {
        const callOptions = { timeoutMs: remaining, headers: options?.headers ?? {} };
        return await fn(signal ? { ...callOptions, signal } : callOptions);
      } catch (err) {
        if (signal?.aborted) {
          throw cancelled(signal, method);
        }
        const error = toContextEngineError(err, method);
        const delay = backoffMs(attempt, this.retryBackoffMs, 2_000);
        const retry =
          attempt < attempts && error.code === "UNAVAILABLE" && Date.now() + delay < deadline;
        if (!retry) {
          throw this.explain(error, attempt, Date.now() - started, timeoutMs);
        }
        await sleep(delay, signal);
      }
    }
  }

  /** Connection failures and deadlines get a message that says what happened and where. */
  private explain(
    error: ContextEngineError,
    attempts: number,
    elapsedMs: number,
    timeoutMs: number,
  ): ContextEngineError {
    if (!error.clientSide) {
      return error;
    }
    const tries = `${attempts} attempt${attempts === 1 ? "" : "s"} in ${elapsedMs} ms`;
    let message: string;
    if (error.code === "UNAVAILABLE") {
      message = `cannot reach the contextengine sidecar at ${this.baseUrl} (${error.detail}); ${tries}`;
    } else if (error.code === "DEADLINE_EXCEEDED") {
      message = `no answer from the contextengine sidecar at ${this.baseUrl} within the ${timeoutMs} ms deadline (${error.detail}); ${tries}`;
    } else {
      return error;
    }
    return new ContextEngineError(
      {
        code: error.code,
        message,
        reason: error.reason,
        domain: error.domain,
        metadata: { ...error.metadata },
        method: error.method,
        clientSide: true,
      },
      { cause: error.cause },
    );
  }
}

let lastTimestamp = 0;

/**
 * The wall clock in seconds, strictly increasing within this process: events of one batch get
 * distinct timestamps (compaction ranges are timestamp ranges, as in ADK, so equal timestamps
 * would make a summary hide events outside its range).
 */
function nextTimestamp(): number {
  lastTimestamp = Math.max(Date.now() / 1000, lastTimestamp + 1e-6);
  return lastTimestamp;
}

/** Gives an event an id and a timestamp, so that every attempt sends exactly the same event. */
function prepareEvent(event: Event): void {
  if (!event.id) {
    event.id = crypto.randomUUID();
  }
  if (event.timestamp === 0) {
    event.timestamp = nextTimestamp();
  }
}
