package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineClient as JavaContextEngineClient
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.FollowedStream
import dev.contextengine.client.RetryPolicy
import dev.contextengine.client.SessionRef
import dev.contextengine.client.TraceContext
import dev.contextengine.v1.*
import io.grpc.CallOptions
import io.grpc.ClientInterceptor
import io.grpc.Metadata
import io.grpc.MethodDescriptor
import io.grpc.Status
import io.grpc.StatusException
import io.grpc.StatusRuntimeException
import io.grpc.kotlin.ClientCalls
import java.io.Closeable
import java.nio.file.Path
import java.util.concurrent.CompletableFuture
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicLong
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.toJavaDuration
import kotlin.time.toKotlinDuration
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.FlowCollector
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.future.await
import kotlinx.coroutines.launch

/**
 * TLS to the sidecar: its certificate verified against [trustCertificates] (PEM; null: the JVM's
 * trust store), and for mutual TLS the client's [certificateChain] and PKCS#8 [privateKey] (PEM).
 */
data class Tls(
    val trustCertificates: Path? = null,
    val certificateChain: Path? = null,
    val privateKey: Path? = null,
) {
    init {
        require((certificateChain == null) == (privateKey == null)) {
            "certificateChain and privateKey are given together (mTLS)"
        }
    }

    internal fun applyTo(builder: JavaContextEngineClient.Builder) {
        builder.useTls()
        trustCertificates?.let { builder.trustCertificates(it) }
        if (certificateChain != null && privateKey != null) {
            builder.clientCertificate(certificateChain, privateKey)
        }
    }
}

/**
 * The Kotlin client of one contextengine sidecar: every unary RPC as a `suspend fun`, the two
 * subscriptions as cold [Flow]s that follow the stream across failures.
 *
 * It is built on the Java client ([JavaContextEngineClient], available as [java]): the same
 * channel, the same generated messages, the same rules. One deadline covers a whole call, its
 * retries and backoffs included (the client's [timeout], or a call's `timeout`); only calls that
 * are safe to repeat are retried, and only after `UNAVAILABLE`; failures are
 * [ContextEngineException]s with the gRPC code, the server's `ErrorInfo` reason and metadata.
 * Cancelling the calling coroutine (or `withTimeout`) cancels the RPC on the wire.
 *
 * ```kotlin
 * ContextEngineClient.connect("127.0.0.1:50151").use { ce ->
 *     val session = ce.createSession(appName = "demo", userId = "zoe")
 *     ce.appendEvent(session.ref, said("user", "inv-1", "hello"))
 * }
 * ```
 *
 * Every RPC has three forms: the request message (`getSession(request)`), the request built in
 * place (`getSession { setAppName("demo"); ... }`) and, for what agents call most, named and
 * defaulted parameters (`getSession(ref, numRecentEvents = 10)`).
 */
class ContextEngineClient
private constructor(
    /** The Java client underneath (its channel, its blocking and future APIs). */
    val java: JavaContextEngineClient,
    private val owns: Boolean,
    private val retryPolicy: RetryPolicy,
) : Closeable {
    companion object {
        /** The default deadline of a call, retries included. */
        val DEFAULT_TIMEOUT: Duration = 10.seconds

        /**
         * A client for `host:port` (or `unix:/path`, or an absolute socket path). It owns its
         * channel: [close] it (`use { }`). `token` is sent as `authorization: Bearer <token>` with
         * every call; `tls` connects with TLS (mTLS with a client certificate), see
         * docs/security.md. `traceContext`: every call carries the current OpenTelemetry span's W3C
         * `traceparent` (the Java client's [TraceContext], when `opentelemetry-api` is on the class
         * path); the span is read from the calling thread's OpenTelemetry `Context`, so a coroutine
         * that changes threads carries it along (e.g. `Context.asContextElement()`).
         */
        fun connect(
            target: String,
            timeout: Duration = DEFAULT_TIMEOUT,
            retryPolicy: RetryPolicy = RetryPolicy.DEFAULT,
            maxMessageBytes: Int = 64 * 1024 * 1024,
            interceptors: List<ClientInterceptor> = emptyList(),
            token: String? = null,
            tls: Tls? = null,
            traceContext: Boolean = true,
        ): ContextEngineClient {
            require(timeout.isPositive()) { "the timeout must be positive" }
            val builder =
                JavaContextEngineClient.builder()
                    .target(target)
                    .timeout(timeout.toJavaDuration())
                    .retryPolicy(retryPolicy)
                    .maxMessageBytes(maxMessageBytes)
                    .intercept(*interceptors.toTypedArray())
                    .traceContext(traceContext)
            if (token != null) builder.token(token)
            tls?.applyTo(builder)
            return ContextEngineClient(builder.build(), owns = true, retryPolicy = retryPolicy)
        }

        /** A Kotlin view of a Java client (closing the view does not close it). */
        fun of(
            client: JavaContextEngineClient,
            retryPolicy: RetryPolicy = RetryPolicy.DEFAULT,
        ): ContextEngineClient =
            ContextEngineClient(client, owns = false, retryPolicy = retryPolicy)
    }

    /** What the client was built for (`host:port`, or the socket). */
    val target: String
        get() = java.target()

    /** The default deadline of this client's calls. */
    val timeout: Duration
        get() = java.timeout().toKotlinDuration()

    /** A view with another default deadline, on the same connection (closing it does nothing). */
    fun withTimeout(timeout: Duration): ContextEngineClient {
        require(timeout.isPositive()) { "the timeout must be positive" }
        return ContextEngineClient(
            java.withTimeout(timeout.toJavaDuration()),
            owns = false,
            retryPolicy = retryPolicy,
        )
    }

    /** Shuts the channel down if this client created it; calls in flight fail with CANCELLED. */
    override fun close() {
        if (owns) java.close()
    }

    private suspend fun <R> call(
        timeout: Duration?,
        start: (JavaContextEngineClient) -> CompletableFuture<R>,
    ): R {
        val client =
            if (timeout == null) java
            else {
                require(timeout.isPositive()) { "the timeout must be positive" }
                java.withTimeout(timeout.toJavaDuration())
            }
        // await() cancels the future when the coroutine is cancelled; the Java client then
        // cancels the attempt in flight (the server sees the RPC cancelled).
        return start(client).await()
    }

    // --- every unary RPC: the request message, or the request built in place -------------------

    /**
     * `SessionService/CreateSession` (see the Java client's `createSession` for what is retried).
     */
    suspend fun createSession(
        request: CreateSessionRequest,
        timeout: Duration? = null,
    ): CreateSessionResponse = call(timeout) { it.createSessionAsync(request) }

    /** `SessionService/CreateSession` with the request built in place. */
    suspend fun createSession(
        timeout: Duration? = null,
        build: CreateSessionRequest.Builder.() -> Unit,
    ): CreateSessionResponse =
        createSession(CreateSessionRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/GetSession` (see the Java client's `getSession` for what is retried). */
    suspend fun getSession(
        request: GetSessionRequest,
        timeout: Duration? = null,
    ): GetSessionResponse = call(timeout) { it.getSessionAsync(request) }

    /** `SessionService/GetSession` with the request built in place. */
    suspend fun getSession(
        timeout: Duration? = null,
        build: GetSessionRequest.Builder.() -> Unit,
    ): GetSessionResponse = getSession(GetSessionRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/ListSessions` (see the Java client's `listSessions` for what is retried). */
    suspend fun listSessions(
        request: ListSessionsRequest,
        timeout: Duration? = null,
    ): ListSessionsResponse = call(timeout) { it.listSessionsAsync(request) }

    /** `SessionService/ListSessions` with the request built in place. */
    suspend fun listSessions(
        timeout: Duration? = null,
        build: ListSessionsRequest.Builder.() -> Unit,
    ): ListSessionsResponse =
        listSessions(ListSessionsRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `SessionService/DeleteSession` (see the Java client's `deleteSession` for what is retried).
     */
    suspend fun deleteSession(
        request: DeleteSessionRequest,
        timeout: Duration? = null,
    ): DeleteSessionResponse = call(timeout) { it.deleteSessionAsync(request) }

    /** `SessionService/DeleteSession` with the request built in place. */
    suspend fun deleteSession(
        timeout: Duration? = null,
        build: DeleteSessionRequest.Builder.() -> Unit,
    ): DeleteSessionResponse =
        deleteSession(DeleteSessionRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/AppendEvent` (see the Java client's `appendEvent` for what is retried). */
    suspend fun appendEvent(
        request: AppendEventRequest,
        timeout: Duration? = null,
    ): AppendEventResponse = call(timeout) { it.appendEventAsync(request) }

    /** `SessionService/AppendEvent` with the request built in place. */
    suspend fun appendEvent(
        timeout: Duration? = null,
        build: AppendEventRequest.Builder.() -> Unit,
    ): AppendEventResponse =
        appendEvent(AppendEventRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/AppendEvents` (see the Java client's `appendEvents` for what is retried). */
    suspend fun appendEvents(
        request: AppendEventsRequest,
        timeout: Duration? = null,
    ): AppendEventsResponse = call(timeout) { it.appendEventsAsync(request) }

    /** `SessionService/AppendEvents` with the request built in place. */
    suspend fun appendEvents(
        timeout: Duration? = null,
        build: AppendEventsRequest.Builder.() -> Unit,
    ): AppendEventsResponse =
        appendEvents(AppendEventsRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/ListEvents` (see the Java client's `listEvents` for what is retried). */
    suspend fun listEvents(
        request: ListEventsRequest,
        timeout: Duration? = null,
    ): ListEventsResponse = call(timeout) { it.listEventsAsync(request) }

    /** `SessionService/ListEvents` with the request built in place. */
    suspend fun listEvents(
        timeout: Duration? = null,
        build: ListEventsRequest.Builder.() -> Unit,
    ): ListEventsResponse = listEvents(ListEventsRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `SessionService/RewindSession` (see the Java client's `rewindSession` for what is retried).
     */
    suspend fun rewindSession(
        request: RewindSessionRequest,
        timeout: Duration? = null,
    ): RewindSessionResponse = call(timeout) { it.rewindSessionAsync(request) }

    /** `SessionService/RewindSession` with the request built in place. */
    suspend fun rewindSession(
        timeout: Duration? = null,
        build: RewindSessionRequest.Builder.() -> Unit,
    ): RewindSessionResponse =
        rewindSession(RewindSessionRequest.newBuilder().apply(build).build(), timeout)

    /** `SessionService/GetAppConfig` (see the Java client's `getAppConfig` for what is retried). */
    suspend fun getAppConfig(
        request: GetAppConfigRequest,
        timeout: Duration? = null,
    ): GetAppConfigResponse = call(timeout) { it.getAppConfigAsync(request) }

    /** `SessionService/GetAppConfig` with the request built in place. */
    suspend fun getAppConfig(
        timeout: Duration? = null,
        build: GetAppConfigRequest.Builder.() -> Unit,
    ): GetAppConfigResponse =
        getAppConfig(GetAppConfigRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `SessionService/UpdateAppConfig` (see the Java client's `updateAppConfig` for what is
     * retried).
     */
    suspend fun updateAppConfig(
        request: UpdateAppConfigRequest,
        timeout: Duration? = null,
    ): UpdateAppConfigResponse = call(timeout) { it.updateAppConfigAsync(request) }

    /** `SessionService/UpdateAppConfig` with the request built in place. */
    suspend fun updateAppConfig(
        timeout: Duration? = null,
        build: UpdateAppConfigRequest.Builder.() -> Unit,
    ): UpdateAppConfigResponse =
        updateAppConfig(UpdateAppConfigRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `SessionService/GetSessionConfig` (see the Java client's `getSessionConfig` for what is
     * retried).
     */
    suspend fun getSessionConfig(
        request: GetSessionConfigRequest,
        timeout: Duration? = null,
    ): GetSessionConfigResponse = call(timeout) { it.getSessionConfigAsync(request) }

    /** `SessionService/GetSessionConfig` with the request built in place. */
    suspend fun getSessionConfig(
        timeout: Duration? = null,
        build: GetSessionConfigRequest.Builder.() -> Unit,
    ): GetSessionConfigResponse =
        getSessionConfig(GetSessionConfigRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `SessionService/UpdateSessionConfig` (see the Java client's `updateSessionConfig` for what is
     * retried).
     */
    suspend fun updateSessionConfig(
        request: UpdateSessionConfigRequest,
        timeout: Duration? = null,
    ): UpdateSessionConfigResponse = call(timeout) { it.updateSessionConfigAsync(request) }

    /** `SessionService/UpdateSessionConfig` with the request built in place. */
    suspend fun updateSessionConfig(
        timeout: Duration? = null,
        build: UpdateSessionConfigRequest.Builder.() -> Unit,
    ): UpdateSessionConfigResponse =
        updateSessionConfig(UpdateSessionConfigRequest.newBuilder().apply(build).build(), timeout)

    /** `ContextService/BuildContext` (see the Java client's `buildContext` for what is retried). */
    suspend fun buildContext(
        request: BuildContextRequest,
        timeout: Duration? = null,
    ): BuildContextResponse = call(timeout) { it.buildContextAsync(request) }

    /** `ContextService/BuildContext` with the request built in place. */
    suspend fun buildContext(
        timeout: Duration? = null,
        build: BuildContextRequest.Builder.() -> Unit,
    ): BuildContextResponse =
        buildContext(BuildContextRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `CompactionService/EndInvocation` (see the Java client's `endInvocation` for what is
     * retried).
     */
    suspend fun endInvocation(
        request: EndInvocationRequest,
        timeout: Duration? = null,
    ): EndInvocationResponse = call(timeout) { it.endInvocationAsync(request) }

    /** `CompactionService/EndInvocation` with the request built in place. */
    suspend fun endInvocation(
        timeout: Duration? = null,
        build: EndInvocationRequest.Builder.() -> Unit,
    ): EndInvocationResponse =
        endInvocation(EndInvocationRequest.newBuilder().apply(build).build(), timeout)

    /** `CompactionService/Compact` (see the Java client's `compact` for what is retried). */
    suspend fun compact(request: CompactRequest, timeout: Duration? = null): CompactResponse =
        call(timeout) { it.compactAsync(request) }

    /** `CompactionService/Compact` with the request built in place. */
    suspend fun compact(
        timeout: Duration? = null,
        build: CompactRequest.Builder.() -> Unit,
    ): CompactResponse = compact(CompactRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `CompactionService/PlanCompaction` (see the Java client's `planCompaction` for what is
     * retried).
     */
    suspend fun planCompaction(
        request: PlanCompactionRequest,
        timeout: Duration? = null,
    ): PlanCompactionResponse = call(timeout) { it.planCompactionAsync(request) }

    /** `CompactionService/PlanCompaction` with the request built in place. */
    suspend fun planCompaction(
        timeout: Duration? = null,
        build: PlanCompactionRequest.Builder.() -> Unit,
    ): PlanCompactionResponse =
        planCompaction(PlanCompactionRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `CompactionService/CommitCompaction` (see the Java client's `commitCompaction` for what is
     * retried).
     */
    suspend fun commitCompaction(
        request: CommitCompactionRequest,
        timeout: Duration? = null,
    ): CommitCompactionResponse = call(timeout) { it.commitCompactionAsync(request) }

    /** `CompactionService/CommitCompaction` with the request built in place. */
    suspend fun commitCompaction(
        timeout: Duration? = null,
        build: CommitCompactionRequest.Builder.() -> Unit,
    ): CommitCompactionResponse =
        commitCompaction(CommitCompactionRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `CompactionService/ExpandSummary` (see the Java client's `expandSummary` for what is
     * retried).
     */
    suspend fun expandSummary(
        request: ExpandSummaryRequest,
        timeout: Duration? = null,
    ): ExpandSummaryResponse = call(timeout) { it.expandSummaryAsync(request) }

    /** `CompactionService/ExpandSummary` with the request built in place. */
    suspend fun expandSummary(
        timeout: Duration? = null,
        build: ExpandSummaryRequest.Builder.() -> Unit,
    ): ExpandSummaryResponse =
        expandSummary(ExpandSummaryRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `CompactionService/GetCompactionStatus` (see the Java client's `getCompactionStatus` for what
     * is retried).
     */
    suspend fun getCompactionStatus(
        request: GetCompactionStatusRequest,
        timeout: Duration? = null,
    ): GetCompactionStatusResponse = call(timeout) { it.getCompactionStatusAsync(request) }

    /** `CompactionService/GetCompactionStatus` with the request built in place. */
    suspend fun getCompactionStatus(
        timeout: Duration? = null,
        build: GetCompactionStatusRequest.Builder.() -> Unit,
    ): GetCompactionStatusResponse =
        getCompactionStatus(GetCompactionStatusRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `MemoryService/AddSessionToMemory` (see the Java client's `addSessionToMemory` for what is
     * retried).
     */
    suspend fun addSessionToMemory(
        request: AddSessionToMemoryRequest,
        timeout: Duration? = null,
    ): AddSessionToMemoryResponse = call(timeout) { it.addSessionToMemoryAsync(request) }

    /** `MemoryService/AddSessionToMemory` with the request built in place. */
    suspend fun addSessionToMemory(
        timeout: Duration? = null,
        build: AddSessionToMemoryRequest.Builder.() -> Unit,
    ): AddSessionToMemoryResponse =
        addSessionToMemory(AddSessionToMemoryRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `MemoryService/AddEventsToMemory` (see the Java client's `addEventsToMemory` for what is
     * retried).
     */
    suspend fun addEventsToMemory(
        request: AddEventsToMemoryRequest,
        timeout: Duration? = null,
    ): AddEventsToMemoryResponse = call(timeout) { it.addEventsToMemoryAsync(request) }

    /** `MemoryService/AddEventsToMemory` with the request built in place. */
    suspend fun addEventsToMemory(
        timeout: Duration? = null,
        build: AddEventsToMemoryRequest.Builder.() -> Unit,
    ): AddEventsToMemoryResponse =
        addEventsToMemory(AddEventsToMemoryRequest.newBuilder().apply(build).build(), timeout)

    /** `MemoryService/SearchMemory` (see the Java client's `searchMemory` for what is retried). */
    suspend fun searchMemory(
        request: SearchMemoryRequest,
        timeout: Duration? = null,
    ): SearchMemoryResponse = call(timeout) { it.searchMemoryAsync(request) }

    /** `MemoryService/SearchMemory` with the request built in place. */
    suspend fun searchMemory(
        timeout: Duration? = null,
        build: SearchMemoryRequest.Builder.() -> Unit,
    ): SearchMemoryResponse =
        searchMemory(SearchMemoryRequest.newBuilder().apply(build).build(), timeout)

    /** `MemoryService/DeleteMemory` (see the Java client's `deleteMemory` for what is retried). */
    suspend fun deleteMemory(
        request: DeleteMemoryRequest,
        timeout: Duration? = null,
    ): DeleteMemoryResponse = call(timeout) { it.deleteMemoryAsync(request) }

    /** `MemoryService/DeleteMemory` with the request built in place. */
    suspend fun deleteMemory(
        timeout: Duration? = null,
        build: DeleteMemoryRequest.Builder.() -> Unit,
    ): DeleteMemoryResponse =
        deleteMemory(DeleteMemoryRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `ContextToolsService/ListContextTools` (see the Java client's `listContextTools` for what is
     * retried).
     */
    suspend fun listContextTools(
        request: ListContextToolsRequest,
        timeout: Duration? = null,
    ): ListContextToolsResponse = call(timeout) { it.listContextToolsAsync(request) }

    /** `ContextToolsService/ListContextTools` with the request built in place. */
    suspend fun listContextTools(
        timeout: Duration? = null,
        build: ListContextToolsRequest.Builder.() -> Unit,
    ): ListContextToolsResponse =
        listContextTools(ListContextToolsRequest.newBuilder().apply(build).build(), timeout)

    /**
     * `ContextToolsService/CallContextTool` (see the Java client's `callContextTool` for what is
     * retried).
     */
    suspend fun callContextTool(
        request: CallContextToolRequest,
        timeout: Duration? = null,
    ): CallContextToolResponse = call(timeout) { it.callContextToolAsync(request) }

    /** `ContextToolsService/CallContextTool` with the request built in place. */
    suspend fun callContextTool(
        timeout: Duration? = null,
        build: CallContextToolRequest.Builder.() -> Unit,
    ): CallContextToolResponse =
        callContextTool(CallContextToolRequest.newBuilder().apply(build).build(), timeout)

    // --- named, defaulted parameters for what agents call most ---------------------------------

    /**
     * Creates a session (never retried) and returns it; `sessionId` empty: the server picks one.
     */
    suspend fun createSession(
        appName: String,
        userId: String,
        sessionId: String = "",
        state: Map<String, Any?> = emptyMap(),
        config: SessionConfig? = null,
        timeout: Duration? = null,
    ): Session =
        createSession(
                CreateSessionRequest.newBuilder()
                    .also { b ->
                        b.setAppName(appName).setUserId(userId).setSessionId(sessionId)
                        if (state.isNotEmpty()) b.setState(state.toStruct())
                        if (config != null) b.setConfig(config)
                    }
                    .build(),
                timeout,
            )
            .session

    /**
     * A session with its merged state and (the last `numRecentEvents`, or those after a sequence
     * of) its events.
     */
    suspend fun getSession(
        session: SessionRef,
        numRecentEvents: Int? = null,
        afterSequence: Long? = null,
        timeout: Duration? = null,
    ): Session =
        getSession(
                session
                    .getSession()
                    .toBuilder()
                    .also { b ->
                        if (numRecentEvents != null) b.setNumRecentEvents(numRecentEvents)
                        if (afterSequence != null) b.setAfterSequence(afterSequence)
                    }
                    .build(),
                timeout,
            )
            .session

    /** Deletes a session (retried only with `allowMissing`). */
    suspend fun deleteSession(
        session: SessionRef,
        allowMissing: Boolean = false,
        timeout: Duration? = null,
    ) {
        deleteSession(
            session.deleteSession().toBuilder().setAllowMissing(allowMissing).build(),
            timeout,
        )
    }

    /**
     * Appends one event (it gets an id and a timestamp before the first attempt, so retries are
     * exact replays); `expectedLastSequence` makes it conditional.
     */
    suspend fun appendEvent(
        session: SessionRef,
        event: Event,
        expectedLastSequence: Long? = null,
        timeout: Duration? = null,
    ): AppendEventResponse =
        appendEvent(
            session
                .appendEvent(event)
                .toBuilder()
                .also { b ->
                    if (expectedLastSequence != null)
                        b.setExpectedLastSequence(expectedLastSequence)
                }
                .build(),
            timeout,
        )

    /** Appends events atomically (all or none). */
    suspend fun appendEvents(
        session: SessionRef,
        events: List<Event>,
        timeout: Duration? = null,
    ): AppendEventsResponse =
        appendEvents(
            AppendEventsRequest.newBuilder()
                .setAppName(session.appName())
                .setUserId(session.userId())
                .setSessionId(session.sessionId())
                .addAllEvents(events)
                .build(),
            timeout,
        )

    /** One page of a session's events after `afterSequence`. */
    suspend fun listEvents(
        session: SessionRef,
        afterSequence: Long = 0,
        pageSize: Int = 0,
        pageToken: String = "",
        timeout: Duration? = null,
    ): ListEventsResponse =
        listEvents(
            session
                .listEvents(afterSequence)
                .toBuilder()
                .setPageSize(pageSize)
                .setPageToken(pageToken)
                .build(),
            timeout,
        )

    /** Every event of a session after `afterSequence`, page after page (each page one call). */
    fun events(session: SessionRef, afterSequence: Long = 0, pageSize: Int = 0): Flow<Event> =
        flow {
            var token = ""
            do {
                val page = listEvents(session, afterSequence, pageSize, token)
                page.eventsList.forEach { emit(it) }
                token = page.nextPageToken
            } while (token.isNotEmpty())
        }

    /** Every session of an app (or of one user), page after page. */
    fun sessions(appName: String, userId: String = "", pageSize: Int = 0): Flow<Session> = flow {
        var token = ""
        do {
            val page = listSessions {
                setAppName(appName).setUserId(userId).setPageSize(pageSize).setPageToken(token)
            }
            page.sessionsList.forEach { emit(it) }
            token = page.nextPageToken
        } while (token.isNotEmpty())
    }

    /** The context for the next model call of `agentName` (contents, instructions, fingerprint). */
    suspend fun buildContext(
        session: SessionRef,
        agentName: String = "",
        model: ModelIdentity? = null,
        userContent: Content? = null,
        timeout: Duration? = null,
    ): BuildContextResponse =
        buildContext(
            session
                .buildContext(agentName)
                .toBuilder()
                .also { b ->
                    if (model != null) b.setModel(model)
                    if (userContent != null) b.setUserContent(userContent)
                }
                .build(),
            timeout,
        )

    /**
     * A [ContextView] of `agentName`'s view of a session ("contents since"): its `build()` returns
     * the whole contents while only the new ones cross the wire.
     */
    fun contextView(
        session: SessionRef,
        agentName: String = "",
        model: ModelIdentity? = null,
    ): ContextView =
        contextView(
            session
                .buildContext(agentName)
                .toBuilder()
                .also { b -> if (model != null) b.setModel(model) }
                .build()
        )

    /** A [ContextView] of the view `request` describes (its `since` is the view's to set). */
    fun contextView(request: BuildContextRequest): ContextView = ContextView(this, request)

    /** Ends an invocation; true when a compaction was scheduled. */
    suspend fun endInvocation(
        session: SessionRef,
        invocationId: String,
        timeout: Duration? = null,
    ): Boolean = endInvocation(session.endInvocation(invocationId), timeout).scheduled

    /** Compacts a session now (never retried). */
    suspend fun compact(session: SessionRef, timeout: Duration? = null): CompactResponse =
        compact(session.compact(), timeout)

    /** Brings a session's memories up to date. */
    suspend fun addSessionToMemory(
        session: SessionRef,
        timeout: Duration? = null,
    ): AddSessionToMemoryResponse =
        addSessionToMemory(timeout) {
            setAppName(session.appName())
                .setUserId(session.userId())
                .setSessionId(session.sessionId())
        }

    /** A user's memories that match `query`, best first (`limit` 0: the app's default). */
    suspend fun searchMemory(
        appName: String,
        userId: String,
        query: String,
        limit: Int = 0,
        timeout: Duration? = null,
    ): List<MemoryEntry> =
        searchMemory(timeout) {
                setAppName(appName).setUserId(userId).setQuery(query).setLimit(limit)
            }
            .memoriesList

    /**
     * The context tools' declarations for every provider (`userId`: what a token restricted to one
     * user needs).
     */
    suspend fun listContextTools(
        appName: String,
        userId: String = "",
        timeout: Duration? = null,
    ): ListContextToolsResponse =
        listContextTools(timeout) { setAppName(appName).setUserId(userId) }

    /**
     * The context tools of `agentName` in a session ([ContextTools]); `branch` and `isolationScope`
     * (null: none) as in the agent's `BuildContext` requests.
     */
    fun contextTools(
        session: SessionRef,
        agentName: String = "",
        branch: String? = null,
        isolationScope: String? = null,
    ): ContextTools = ContextTools(this, session, agentName, branch, isolationScope)

    // --- subscriptions ---------------------------------------------------------------------------

    /**
     * The frames of `SubscribeEvents` (events, batches, `caught_up`, heartbeats) after the
     * request's cursor, as a cold flow: each collection opens a stream. When the stream breaks
     * (`UNAVAILABLE`, the server's `SHUTTING_DOWN`, `SUBSCRIBER_LAGGED`, a lost connection, silence
     * past the idle timeout) it is reopened after the last cursor received, so every event comes
     * exactly once and in order; after [FollowOptions.maxFailures] failures in a row, or any other
     * error, the flow fails with the [ContextEngineException]. Cancelling the collector (`take(n)`,
     * `first { }`, its scope) cancels the stream on the server.
     */
    fun subscribeEvents(
        request: SubscribeEventsRequest,
        options: FollowOptions = FollowOptions(),
    ): Flow<SubscribeEventsResponse> = flow {
        val method = "SubscriptionService/SubscribeEvents"
        val scope = request.scope
        val bySequence =
            scope == SubscriptionScope.SUBSCRIPTION_SCOPE_UNSPECIFIED ||
                scope == SubscriptionScope.SUBSCRIPTION_SCOPE_SESSION
        when (scope) {
            SubscriptionScope.SUBSCRIPTION_SCOPE_USER ->
                requireFields(method, "app_name" to request.appName, "user_id" to request.userId)
            SubscriptionScope.SUBSCRIPTION_SCOPE_APP ->
                requireFields(method, "app_name" to request.appName)
            else ->
                requireFields(
                    method,
                    "app_name" to request.appName,
                    "user_id" to request.userId,
                    "session_id" to request.sessionId,
                )
        }
        var next = request
        follow(
            SubscriptionServiceGrpc.getSubscribeEventsMethod(),
            method,
            { next },
            options,
            request.heartbeatSeconds,
        ) { frame ->
            val cursor = frame.cursor
            if (cursor.isNotEmpty()) {
                next =
                    if (bySequence) {
                        next.toBuilder().setAfterSequence(cursor.toLong()).build()
                    } else {
                        next.toBuilder().setAfterCursor(cursor).build()
                    }
            }
        }
    }

    /** `SubscribeEvents` of one session after `afterSequence` (0: from the start). */
    fun subscribeEvents(
        session: SessionRef,
        afterSequence: Long = 0,
        heartbeatSeconds: Int = 0,
        options: FollowOptions = FollowOptions(),
    ): Flow<SubscribeEventsResponse> =
        subscribeEvents(
            session
                .subscribeEvents()
                .toBuilder()
                .setAfterSequence(afterSequence)
                .setHeartbeatSeconds(heartbeatSeconds)
                .build(),
            options,
        )

    /**
     * The frames of `WatchSessionState`: a snapshot of the merged state, then deltas. A broken
     * stream is reopened as in [subscribeEvents], and a new snapshot follows: replace what you
     * hold.
     */
    fun watchSessionState(
        request: WatchSessionStateRequest,
        options: FollowOptions = FollowOptions(),
    ): Flow<WatchSessionStateResponse> = flow {
        val method = "SubscriptionService/WatchSessionState"
        requireFields(
            method,
            "app_name" to request.appName,
            "user_id" to request.userId,
            "session_id" to request.sessionId,
        )
        follow(
            SubscriptionServiceGrpc.getWatchSessionStateMethod(),
            method,
            { request },
            options,
            request.heartbeatSeconds,
        ) {}
    }

    /** `WatchSessionState` of one session. */
    fun watchSessionState(
        session: SessionRef,
        heartbeatSeconds: Int = 0,
        options: FollowOptions = FollowOptions(),
    ): Flow<WatchSessionStateResponse> =
        watchSessionState(
            session.watchSessionState().toBuilder().setHeartbeatSeconds(heartbeatSeconds).build(),
            options,
        )

    private class IdleTimeout(val idle: Duration) : Exception("nothing received for $idle")

    private suspend fun <Q : Any, T : Any> FlowCollector<T>.follow(
        descriptor: MethodDescriptor<Q, T>,
        methodName: String,
        request: () -> Q,
        options: FollowOptions,
        heartbeatSeconds: Int,
        onFrame: (T) -> Unit,
    ) {
        val idle =
            options.idleTimeout
                ?: (3 * (if (heartbeatSeconds > 0) heartbeatSeconds else 15) + 5).seconds
        val headers = Metadata()
        for ((key, value) in options.headers) {
            headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value)
        }
        var failures = 0
        while (true) {
            var downstream: Throwable? = null
            val error: ContextEngineException =
                try {
                    coroutineScope {
                        val last = AtomicLong(System.nanoTime())
                        val busy = AtomicBoolean(false)
                        // Silence past the idle timeout (no frame, no heartbeat) means a dead
                        // stream:
                        // failing this scope cancels the call, and the loop below reopens it. Time
                        // spent downstream (in emit) is not silence.
                        val watchdog = launch {
                            while (true) {
                                delay(minOf(idle / 4, 1.seconds).coerceAtLeast(10.milliseconds))
                                if (
                                    !busy.get() &&
                                        System.nanoTime() - last.get() > idle.inWholeNanoseconds
                                ) {
                                    throw IdleTimeout(idle)
                                }
                            }
                        }
                        try {
                            ClientCalls.serverStreamingRpc(
                                    java.channel(),
                                    descriptor,
                                    request(),
                                    CallOptions.DEFAULT,
                                    headers,
                                )
                                .collect { frame ->
                                    last.set(System.nanoTime())
                                    failures = 0
                                    onFrame(frame)
                                    busy.set(true)
                                    try {
                                        emit(frame)
                                    } catch (t: Throwable) {
                                        downstream = t
                                        throw t
                                    } finally {
                                        last.set(System.nanoTime())
                                        busy.set(false)
                                    }
                                }
                        } finally {
                            watchdog.cancel()
                        }
                    }
                    return // the server ended the stream
                } catch (e: Throwable) {
                    if (e === downstream) throw e
                    when (e) {
                        is IdleTimeout ->
                            ContextEngineException(
                                Status.Code.DEADLINE_EXCEEDED,
                                e.message,
                                "",
                                "",
                                emptyMap(),
                                methodName,
                                true,
                                null,
                            )
                        is StatusException,
                        is StatusRuntimeException -> ContextEngineException.from(e, methodName)
                        else ->
                            throw e // cancellation of the collector, or a bug: not ours to repair
                    }
                }
            if (!FollowedStream.isResumable(error)) throw error
            failures += 1
            if (failures >= options.maxFailures) throw error
            options.onReconnect?.invoke(error, failures)
            delay(retryPolicy.backoffNanos(failures) / 1_000_000)
        }
    }
}

/**
 * The Java client's first checks of a request (its `Validate`, which this package cannot reach):
 * each field, in order, must be set, or the call fails before anything is sent with the server's
 * INVALID_ARGUMENT / MISSING_FIELD and the field in the metadata.
 */
private fun requireFields(method: String, vararg fields: Pair<String, String>) {
    for ((field, value) in fields) {
        if (value.isEmpty()) {
            throw ContextEngineException(
                Status.Code.INVALID_ARGUMENT,
                "$field is required",
                "MISSING_FIELD",
                ContextEngineException.DOMAIN,
                mapOf("field" to field),
                method,
                true,
                null,
            )
        }
    }
}
