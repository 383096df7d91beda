package dev.contextengine.client;

import dev.contextengine.v1.*;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.ClientCalls;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A client for one contextengine sidecar over gRPC (HTTP/2, plaintext on loopback or a Unix
 * socket), built on grpc-java and the code generated from {@code proto/contextengine/v1}.
 *
 * <ul>
 *   <li>Every unary RPC of the six services has a blocking method named after it ({@code
 *       createSession}, {@code appendEvent}, {@code buildContext}, ...) and an {@code ...Async}
 *       twin returning a {@link CompletableFuture}; both take the generated request message
 *       (builders need only the fields you care about) and return the whole response.
 *   <li>Every call has one deadline (the client's default, or {@link #withTimeout}) that covers the
 *       whole call: every attempt and every backoff between attempts.
 *   <li>Only calls that are safe to repeat are retried, and only after {@code UNAVAILABLE}: reads,
 *       idempotent writes, and appends, whose events get their id (and timestamp) before the first
 *       attempt. {@code CreateSession}, {@code RewindSession}, {@code Compact}, {@code
 *       CommitCompaction}, {@code CallContextTool} and {@code DeleteSession} without {@code
 *       allow_missing} never are. Which calls are safe is declared once, in the protos (each
 *       method's {@code idempotency_level}), and read from the generated descriptors ({@link
 *       Retryability}).
 *   <li>Failures are {@link ContextEngineException}s with the gRPC code and the server's {@code
 *       ErrorInfo} reason and metadata; missing ids are rejected before sending with the code and
 *       reason the server would use. A sidecar that is down fails fast with {@code UNAVAILABLE} (no
 *       waiting for it to come up).
 *   <li>{@link #subscribeEvents} and {@link #watchSessionState} return a {@link FollowedStream}: a
 *       blocking iterator that reopens the stream from its last cursor when it breaks.
 * </ul>
 *
 * <pre>{@code
 * try (ContextEngineClient ce = ContextEngineClient.connect("127.0.0.1:50151")) {
 *   Session s = ce.createSession(CreateSessionRequest.newBuilder()
 *       .setAppName("demo").setUserId("zoe").build()).getSession();
 * }
 * }</pre>
 *
 * <p>Thread-safe: share one client (one channel) across threads. {@link #close()} shuts down the
 * channel it created (not one given to the builder).
 */
public final class ContextEngineClient implements AutoCloseable {
  /** The default deadline of a call: 10 s, retries included. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

  private final String target;
  private final ManagedChannel ownedChannel;
  private final Channel channel;
  private final ScheduledExecutorService scheduler;
  private final boolean ownsScheduler;
  private final Duration timeout;
  private final RetryPolicy retry;

  private ContextEngineClient(
      String target,
      ManagedChannel ownedChannel,
      Channel channel,
      ScheduledExecutorService scheduler,
      boolean ownsScheduler,
      Duration timeout,
      RetryPolicy retry) {
    this.target = target;
    this.ownedChannel = ownedChannel;
    this.channel = channel;
    this.scheduler = scheduler;
    this.ownsScheduler = ownsScheduler;
    this.timeout = timeout;
    this.retry = retry;
  }

  /** A client for {@code target} with the defaults (10 s deadline, {@link RetryPolicy#DEFAULT}). */
  public static ContextEngineClient connect(String target) {
    return builder().target(target).build();
  }

  /** A builder; set a target or a channel. */
  public static Builder builder() {
    return new Builder();
  }

  /** Builds a {@link ContextEngineClient}. */
  public static final class Builder {
    private String target;
    private ManagedChannel channel;
    private Duration timeout = DEFAULT_TIMEOUT;
    private RetryPolicy retry = RetryPolicy.DEFAULT;
    private int maxMessageBytes = 64 * 1024 * 1024;
    private Duration keepAlive = Duration.ofSeconds(30);
    private final List<ClientInterceptor> interceptors = new ArrayList<>();
    private BearerToken token;
    private boolean traceContext = true;
    private boolean tls;
    private Path trustCertificates;
    private Path clientCertificate;
    private Path clientKey;

    private Builder() {}

    /**
     * A bearer token sent as {@code authorization: Bearer <token>} with every call (a sidecar
     * started with {@code --auth-tokens-file} or {@code --auth-token}; docs/security.md).
     */
    public Builder token(String value) {
      this.token = new BearerToken(value);
      return this;
    }

    /** TLS to the sidecar, its certificate verified against the JVM's default trust store. */
    public Builder useTls() {
      this.tls = true;
      return this;
    }

    /** TLS to the sidecar, its certificate verified against these CA certificates (PEM). */
    public Builder trustCertificates(Path caPem) {
      this.trustCertificates = Objects.requireNonNull(caPem, "caPem");
      this.tls = true;
      return this;
    }

    /**
     * The client's certificate chain and PKCS#8 private key (PEM files) for mutual TLS (a sidecar
     * started with {@code --tls-client-ca-file}); implies TLS.
     */
    public Builder clientCertificate(Path certificateChainPem, Path privateKeyPem) {
      this.clientCertificate = Objects.requireNonNull(certificateChainPem, "certificateChainPem");
      this.clientKey = Objects.requireNonNull(privateKeyPem, "privateKeyPem");
      this.tls = true;
      return this;
    }

    private ChannelCredentials credentials() {
      if (!tls) {
        return InsecureChannelCredentials.create();
      }
      TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
      try {
        if (trustCertificates != null) {
          builder.trustManager(trustCertificates.toFile());
        }
        if (clientCertificate != null) {
          builder.keyManager(clientCertificate.toFile(), clientKey.toFile());
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read the TLS certificates: " + e.getMessage(), e);
      }
      return builder.build();
    }

    /**
     * {@code host:port} (e.g. {@code 127.0.0.1:50151}), or a Unix socket: {@code unix:/path},
     * {@code unix:///path} or an absolute path.
     */
    public Builder target(String value) {
      this.target = Objects.requireNonNull(value, "target");
      return this;
    }

    /**
     * A channel of your own to reuse (several clients, or other stubs, on one connection); the
     * client does not shut it down.
     */
    public Builder channel(ManagedChannel value) {
      this.channel = Objects.requireNonNull(value, "channel");
      return this;
    }

    /** The default deadline of a call, retries included (default 10 s). */
    public Builder timeout(Duration value) {
      if (value == null || value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException("the timeout must be positive");
      }
      this.timeout = value;
      return this;
    }

    /** How safe calls are retried (default {@link RetryPolicy#DEFAULT}). */
    public Builder retryPolicy(RetryPolicy value) {
      this.retry = Objects.requireNonNull(value, "retryPolicy");
      return this;
    }

    /** The largest message received, in bytes (default 64 MiB). */
    public Builder maxMessageBytes(int value) {
      this.maxMessageBytes = value;
      return this;
    }

    /** HTTP/2 keep-alive ping interval, which detects dead connections (default 30 s). */
    public Builder keepAlive(Duration value) {
      this.keepAlive = Objects.requireNonNull(value, "keepAlive");
      return this;
    }

    /**
     * Whether every call carries the current OpenTelemetry span's W3C trace context ({@link
     * TraceContext}), so the sidecar's span of the RPC is its child. Default true; nothing is sent
     * when {@code opentelemetry-api} (an optional dependency) is not on the class path or no span
     * is current.
     */
    public Builder traceContext(boolean value) {
      this.traceContext = value;
      return this;
    }

    /** Interceptors (auth headers, tracing, ...), applied to every call. */
    public Builder intercept(ClientInterceptor... values) {
      interceptors.addAll(List.of(values));
      return this;
    }

    /** The client. */
    public ContextEngineClient build() {
      ManagedChannel owned = null;
      ManagedChannel base = channel;
      String name = target;
      if (base == null) {
        if (target == null || target.isBlank()) {
          throw new IllegalArgumentException(
              "a target (host:port or unix:path) or a channel is required");
        }
        ManagedChannelBuilder<?> builder =
            Grpc.newChannelBuilder(grpcTarget(target), credentials())
                .maxInboundMessageSize(maxMessageBytes)
                .keepAliveTime(keepAlive.toNanos(), TimeUnit.NANOSECONDS);
        owned = builder.build();
        base = owned;
      } else if (tls) {
        throw new IllegalArgumentException(
            "TLS options apply to target(); configure a channel of your own yourself");
      } else if (name == null) {
        name = base.authority();
      }
      List<ClientInterceptor> all = new ArrayList<>(interceptors);
      if (traceContext && openTelemetryPresent()) {
        all.add(new TraceContext()); // loaded only here: the API is on the class path
      }
      if (token != null) {
        all.add(token); // the last added runs first: the token is on the headers others see
      }
      Channel intercepted = ClientInterceptors.intercept(base, all);
      ScheduledThreadPoolExecutor scheduler =
          new ScheduledThreadPoolExecutor(
              1,
              runnable -> {
                Thread thread = new Thread(runnable, "contextengine-retry");
                thread.setDaemon(true);
                return thread;
              });
      scheduler.setRemoveOnCancelPolicy(true);
      return new ContextEngineClient(name, owned, intercepted, scheduler, true, timeout, retry);
    }
  }

  /** The gRPC target of {@code host:port}, {@code unix:...} or an absolute socket path. */
  static String grpcTarget(String target) {
    if (target.startsWith("/")) {
      return "unix:" + target;
    }
    if (target.startsWith("http://")) {
      return target.substring("http://".length());
    }
    return target;
  }

  /** What the client was built for ({@code host:port}, or the socket). */
  public String target() {
    return target;
  }

  /** The default deadline of this client's calls. */
  public Duration timeout() {
    return timeout;
  }

  /**
   * Whether {@code opentelemetry-api} is on the class path, asked without loading {@link
   * TraceContext} (which names its classes and would fail to link without them).
   */
  private static boolean openTelemetryPresent() {
    try {
      Class.forName(
          "io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator",
          false,
          ContextEngineClient.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  /** The channel (intercepted), for stubs of your own on the same connection. */
  public Channel channel() {
    return channel;
  }

  /**
   * A view of this client whose calls have another deadline (retries included). It shares the
   * connection; closing the view does nothing, close the original.
   */
  public ContextEngineClient withTimeout(Duration value) {
    if (value == null || value.isNegative() || value.isZero()) {
      throw new IllegalArgumentException("the timeout must be positive");
    }
    return new ContextEngineClient(target, null, channel, scheduler, false, value, retry);
  }

  /** A view of this client with another retry policy (shares the connection, like withTimeout). */
  public ContextEngineClient withRetryPolicy(RetryPolicy value) {
    return new ContextEngineClient(
        target, null, channel, scheduler, false, timeout, Objects.requireNonNull(value));
  }

  /** Shuts the channel down (if the client created it); calls in flight fail with CANCELLED. */
  @Override
  public void close() {
    if (ownsScheduler) {
      scheduler.shutdownNow();
    }
    if (ownedChannel != null) {
      ownedChannel.shutdownNow();
      try {
        ownedChannel.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  // Unary RPCs (SessionService, ContextService, CompactionService, MemoryService) ---------------

  /**
   * Creates a session (never retried: a retry could meet ALREADY_EXISTS). Blocks; throws {@link
   * ContextEngineException}.
   */
  public CreateSessionResponse createSession(CreateSessionRequest request) {
    return await(createSessionAsync(request));
  }

  /**
   * Creates a session (never retried: a retry could meet ALREADY_EXISTS). Completes with the
   * response or a {@link ContextEngineException}.
   */
  public CompletableFuture<CreateSessionResponse> createSessionAsync(CreateSessionRequest request) {
    final String method = "SessionService/CreateSession";
    try {
      Validate.appUser(method, request.getAppName(), request.getUserId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getCreateSessionMethod(), method, request);
  }

  /**
   * A session with its merged state and (a filtered view of) its events. Blocks; throws {@link
   * ContextEngineException}.
   */
  public GetSessionResponse getSession(GetSessionRequest request) {
    return await(getSessionAsync(request));
  }

  /**
   * A session with its merged state and (a filtered view of) its events. Completes with the
   * response or a {@link ContextEngineException}.
   */
  public CompletableFuture<GetSessionResponse> getSessionAsync(GetSessionRequest request) {
    final String method = "SessionService/GetSession";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getGetSessionMethod(), method, request);
  }

  /** One page of an app's (or a user's) sessions. Blocks; throws {@link ContextEngineException}. */
  public ListSessionsResponse listSessions(ListSessionsRequest request) {
    return await(listSessionsAsync(request));
  }

  /**
   * One page of an app's (or a user's) sessions. Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<ListSessionsResponse> listSessionsAsync(ListSessionsRequest request) {
    final String method = "SessionService/ListSessions";
    try {
      Validate.app(method, request.getAppName());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getListSessionsMethod(), method, request);
  }

  /**
   * Deletes a session; retried only with {@code allow_missing} (otherwise a retry could see
   * NOT_FOUND). Blocks; throws {@link ContextEngineException}.
   */
  public DeleteSessionResponse deleteSession(DeleteSessionRequest request) {
    return await(deleteSessionAsync(request));
  }

  /**
   * Deletes a session; retried only with {@code allow_missing} (otherwise a retry could see
   * NOT_FOUND). Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<DeleteSessionResponse> deleteSessionAsync(DeleteSessionRequest request) {
    final String method = "SessionService/DeleteSession";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    // The proto declares it IDEMPOTENT, but a repeat after a lost answer would meet NOT_FOUND
    // unless a missing session is allowed (then it answers deleted=false).
    return unary(
        SessionServiceGrpc.getDeleteSessionMethod(), method, request, request.getAllowMissing());
  }

  /**
   * Appends one event. An event without an id gets a UUID and one without a timestamp the current
   * time before the first attempt, so retries are exact replays (idempotent by id). Blocks; throws
   * {@link ContextEngineException}.
   */
  public AppendEventResponse appendEvent(AppendEventRequest request) {
    return await(appendEventAsync(request));
  }

  /**
   * Appends one event. An event without an id gets a UUID and one without a timestamp the current
   * time before the first attempt, so retries are exact replays (idempotent by id). Completes with
   * the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<AppendEventResponse> appendEventAsync(AppendEventRequest request) {
    final String method = "SessionService/AppendEvent";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
      Validate.event(method, request.hasEvent() ? request.getEvent() : null, "event");
      request = Events.prepare(request);
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getAppendEventMethod(), method, request);
  }

  /**
   * Appends events atomically (all or none); ids and timestamps are assigned as in appendEvent.
   * Blocks; throws {@link ContextEngineException}.
   */
  public AppendEventsResponse appendEvents(AppendEventsRequest request) {
    return await(appendEventsAsync(request));
  }

  /**
   * Appends events atomically (all or none); ids and timestamps are assigned as in appendEvent.
   * Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<AppendEventsResponse> appendEventsAsync(AppendEventsRequest request) {
    final String method = "SessionService/AppendEvents";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
      for (int i = 0; i < request.getEventsCount(); i++) {
        Validate.event(method, request.getEvents(i), "events[" + i + "]");
      }
      request = Events.prepare(request);
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getAppendEventsMethod(), method, request);
  }

  /**
   * One page of a session's events after a sequence. Blocks; throws {@link ContextEngineException}.
   */
  public ListEventsResponse listEvents(ListEventsRequest request) {
    return await(listEventsAsync(request));
  }

  /**
   * One page of a session's events after a sequence. Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<ListEventsResponse> listEventsAsync(ListEventsRequest request) {
    final String method = "SessionService/ListEvents";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getListEventsMethod(), method, request);
  }

  /**
   * Rewinds to just before an invocation (never retried: it appends a rewind event). Blocks; throws
   * {@link ContextEngineException}.
   */
  public RewindSessionResponse rewindSession(RewindSessionRequest request) {
    return await(rewindSessionAsync(request));
  }

  /**
   * Rewinds to just before an invocation (never retried: it appends a rewind event). Completes with
   * the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<RewindSessionResponse> rewindSessionAsync(RewindSessionRequest request) {
    final String method = "SessionService/RewindSession";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
      Validate.require(
          method, request.getRewindBeforeInvocationId(), "rewind_before_invocation_id");
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getRewindSessionMethod(), method, request);
  }

  /**
   * An app's configuration (empty if none was set). Blocks; throws {@link ContextEngineException}.
   */
  public GetAppConfigResponse getAppConfig(GetAppConfigRequest request) {
    return await(getAppConfigAsync(request));
  }

  /**
   * An app's configuration (empty if none was set). Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<GetAppConfigResponse> getAppConfigAsync(GetAppConfigRequest request) {
    final String method = "SessionService/GetAppConfig";
    try {
      Validate.app(method, request.getAppName());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getGetAppConfigMethod(), method, request);
  }

  /**
   * Replaces an app's configuration (a retry writes the same configuration again). Blocks; throws
   * {@link ContextEngineException}.
   */
  public UpdateAppConfigResponse updateAppConfig(UpdateAppConfigRequest request) {
    return await(updateAppConfigAsync(request));
  }

  /**
   * Replaces an app's configuration (a retry writes the same configuration again). Completes with
   * the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<UpdateAppConfigResponse> updateAppConfigAsync(
      UpdateAppConfigRequest request) {
    final String method = "SessionService/UpdateAppConfig";
    try {
      if (!request.hasConfig()) {
        throw ContextEngineException.missingField(method, "config");
      }
      Validate.require(method, request.getConfig().getAppName(), "config.app_name");
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getUpdateAppConfigMethod(), method, request);
  }

  /**
   * A session's own configuration and the compaction configuration in effect for it. Blocks; throws
   * {@link ContextEngineException}.
   */
  public GetSessionConfigResponse getSessionConfig(GetSessionConfigRequest request) {
    return await(getSessionConfigAsync(request));
  }

  /**
   * A session's own configuration and the compaction configuration in effect for it. Completes with
   * the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<GetSessionConfigResponse> getSessionConfigAsync(
      GetSessionConfigRequest request) {
    final String method = "SessionService/GetSessionConfig";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getGetSessionConfigMethod(), method, request);
  }

  /**
   * Replaces a session's own configuration whole (a retry writes the same configuration again).
   * Blocks; throws {@link ContextEngineException}.
   */
  public UpdateSessionConfigResponse updateSessionConfig(UpdateSessionConfigRequest request) {
    return await(updateSessionConfigAsync(request));
  }

  /**
   * Replaces a session's own configuration whole (a retry writes the same configuration again).
   * Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<UpdateSessionConfigResponse> updateSessionConfigAsync(
      UpdateSessionConfigRequest request) {
    final String method = "SessionService/UpdateSessionConfig";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
      if (!request.hasConfig()) {
        throw ContextEngineException.missingField(method, "config");
      }
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(SessionServiceGrpc.getUpdateSessionConfigMethod(), method, request);
  }

  /**
   * The model contents for an agent's next model call (with prompt-cache and memory options as in
   * the request). Blocks; throws {@link ContextEngineException}.
   */
  public BuildContextResponse buildContext(BuildContextRequest request) {
    return await(buildContextAsync(request));
  }

  /**
   * The model contents for an agent's next model call (with prompt-cache and memory options as in
   * the request). Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<BuildContextResponse> buildContextAsync(BuildContextRequest request) {
    final String method = "ContextService/BuildContext";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(ContextServiceGrpc.getBuildContextMethod(), method, request);
  }

  /**
   * A new {@link ContextView} on this client: "contents since" for one agent's view of a session
   * ({@code build} sends {@code since} with the contents of its last answer and returns the whole
   * contents, while only the new ones cross the wire). {@link #buildContext} itself sends a
   * request's {@code since} as given and returns the answer as sent ({@code base_contents_count}
   * held contents, then {@code contents}).
   */
  public ContextView contextView() {
    return new ContextView(this);
  }

  /**
   * The context for an agent's next model call as a provider's own request part ({@link
   * RequestPart}): {@code {"messages": [...]}} for OpenAI Chat Completions, {@code {"input": [...],
   * "instructions": ...}} for the Responses API, {@code {"messages": [...], "system": ...}} for
   * Anthropic Messages. {@code request} is sent with {@code render} set to the whole rendering of
   * {@code format} (any {@code render} of its own is replaced). Blocks; throws {@link
   * ContextEngineException} ({@code UNIMPLEMENTED}, client side, when the sidecar answers without a
   * rendering: one older than renderings); IllegalArgumentException for {@code
   * RENDER_FORMAT_UNSPECIFIED}.
   */
  public com.google.gson.JsonObject renderContext(
      BuildContextRequest request, RenderFormat format) {
    return await(renderContextAsync(request, format));
  }

  /**
   * {@link #renderContext} without blocking: completes with the request part or a {@link
   * ContextEngineException} (cancelling the future cancels the call).
   */
  public CompletableFuture<com.google.gson.JsonObject> renderContextAsync(
      BuildContextRequest request, RenderFormat format) {
    BuildContextRequest rendering =
        request.toBuilder()
            .setRender(RenderRequest.newBuilder().setFormat(RenderedView.requireFormat(format)))
            .build();
    return Futures.then(
        buildContextAsync(rendering), answer -> RenderedView.requestPart(answer, format));
  }

  /**
   * A new {@link RenderedView} on this client: "items since" for one agent's view of a session
   * rendered as {@code format} ({@code build} sends {@code render.since} with the items of its last
   * answer and returns the whole rendering, while only the new items cross the wire).
   */
  public RenderedView renderedView(RenderFormat format) {
    return new RenderedView(this, format);
  }

  /**
   * Signals the end of an invocation; the engine may compact in the background. Blocks; throws
   * {@link ContextEngineException}.
   */
  public EndInvocationResponse endInvocation(EndInvocationRequest request) {
    return await(endInvocationAsync(request));
  }

  /**
   * Signals the end of an invocation; the engine may compact in the background. Completes with the
   * response or a {@link ContextEngineException}.
   */
  public CompletableFuture<EndInvocationResponse> endInvocationAsync(EndInvocationRequest request) {
    final String method = "CompactionService/EndInvocation";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getEndInvocationMethod(), method, request);
  }

  /**
   * Compacts now and waits for the summary (never retried: it may append a summary). Blocks; throws
   * {@link ContextEngineException}.
   */
  public CompactResponse compact(CompactRequest request) {
    return await(compactAsync(request));
  }

  /**
   * Compacts now and waits for the summary (never retried: it may append a summary). Completes with
   * the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<CompactResponse> compactAsync(CompactRequest request) {
    final String method = "CompactionService/Compact";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getCompactMethod(), method, request);
  }

  /**
   * The range the engine would compact now and the prompt for a model of the client's own. Blocks;
   * throws {@link ContextEngineException}.
   */
  public PlanCompactionResponse planCompaction(PlanCompactionRequest request) {
    return await(planCompactionAsync(request));
  }

  /**
   * The range the engine would compact now and the prompt for a model of the client's own.
   * Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<PlanCompactionResponse> planCompactionAsync(
      PlanCompactionRequest request) {
    final String method = "CompactionService/PlanCompaction";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getPlanCompactionMethod(), method, request);
  }

  /**
   * Appends a summary the client produced for a plan (never retried). Blocks; throws {@link
   * ContextEngineException}.
   */
  public CommitCompactionResponse commitCompaction(CommitCompactionRequest request) {
    return await(commitCompactionAsync(request));
  }

  /**
   * Appends a summary the client produced for a plan (never retried). Completes with the response
   * or a {@link ContextEngineException}.
   */
  public CompletableFuture<CommitCompactionResponse> commitCompactionAsync(
      CommitCompactionRequest request) {
    final String method = "CompactionService/CommitCompaction";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getCommitCompactionMethod(), method, request);
  }

  /**
   * The events (and earlier summaries) a summary replaced. Blocks; throws {@link
   * ContextEngineException}.
   */
  public ExpandSummaryResponse expandSummary(ExpandSummaryRequest request) {
    return await(expandSummaryAsync(request));
  }

  /**
   * The events (and earlier summaries) a summary replaced. Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<ExpandSummaryResponse> expandSummaryAsync(ExpandSummaryRequest request) {
    final String method = "CompactionService/ExpandSummary";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getExpandSummaryMethod(), method, request);
  }

  /**
   * Counters and the state of a session's background compaction. Blocks; throws {@link
   * ContextEngineException}.
   */
  public GetCompactionStatusResponse getCompactionStatus(GetCompactionStatusRequest request) {
    return await(getCompactionStatusAsync(request));
  }

  /**
   * Counters and the state of a session's background compaction. Completes with the response or a
   * {@link ContextEngineException}.
   */
  public CompletableFuture<GetCompactionStatusResponse> getCompactionStatusAsync(
      GetCompactionStatusRequest request) {
    final String method = "CompactionService/GetCompactionStatus";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(CompactionServiceGrpc.getGetCompactionStatusMethod(), method, request);
  }

  /**
   * Brings a session's memories up to date (idempotent, so retried). Blocks; throws {@link
   * ContextEngineException}.
   */
  public AddSessionToMemoryResponse addSessionToMemory(AddSessionToMemoryRequest request) {
    return await(addSessionToMemoryAsync(request));
  }

  /**
   * Brings a session's memories up to date (idempotent, so retried). Completes with the response or
   * a {@link ContextEngineException}.
   */
  public CompletableFuture<AddSessionToMemoryResponse> addSessionToMemoryAsync(
      AddSessionToMemoryRequest request) {
    final String method = "MemoryService/AddSessionToMemory";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(MemoryServiceGrpc.getAddSessionToMemoryMethod(), method, request);
  }

  /**
   * Remembers chosen events of a session, by sequence (idempotent, so retried). Blocks; throws
   * {@link ContextEngineException}.
   */
  public AddEventsToMemoryResponse addEventsToMemory(AddEventsToMemoryRequest request) {
    return await(addEventsToMemoryAsync(request));
  }

  /**
   * Remembers chosen events of a session, by sequence (idempotent, so retried). Completes with the
   * response or a {@link ContextEngineException}.
   */
  public CompletableFuture<AddEventsToMemoryResponse> addEventsToMemoryAsync(
      AddEventsToMemoryRequest request) {
    final String method = "MemoryService/AddEventsToMemory";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(MemoryServiceGrpc.getAddEventsToMemoryMethod(), method, request);
  }

  /** Searches a user's memories, best first. Blocks; throws {@link ContextEngineException}. */
  public SearchMemoryResponse searchMemory(SearchMemoryRequest request) {
    return await(searchMemoryAsync(request));
  }

  /**
   * Searches a user's memories, best first. Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<SearchMemoryResponse> searchMemoryAsync(SearchMemoryRequest request) {
    final String method = "MemoryService/SearchMemory";
    try {
      Validate.appUser(method, request.getAppName(), request.getUserId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(MemoryServiceGrpc.getSearchMemoryMethod(), method, request);
  }

  /**
   * Deletes a session's memories, or all of the user's in the app when {@code session_id} is empty
   * (retried). Blocks; throws {@link ContextEngineException}.
   */
  public DeleteMemoryResponse deleteMemory(DeleteMemoryRequest request) {
    return await(deleteMemoryAsync(request));
  }

  /**
   * Deletes a session's memories, or all of the user's in the app when {@code session_id} is empty
   * (retried). Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<DeleteMemoryResponse> deleteMemoryAsync(DeleteMemoryRequest request) {
    final String method = "MemoryService/DeleteMemory";
    try {
      Validate.appUser(method, request.getAppName(), request.getUserId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(MemoryServiceGrpc.getDeleteMemoryMethod(), method, request);
  }

  // Context tools (ContextToolsService) --------------------------------------------------------

  /**
   * The context tools' declarations for google-genai, OpenAI and Anthropic (a read, so retried).
   * Blocks; throws {@link ContextEngineException}.
   */
  public ListContextToolsResponse listContextTools(ListContextToolsRequest request) {
    return await(listContextToolsAsync(request));
  }

  /**
   * The context tools' declarations for google-genai, OpenAI and Anthropic (a read, so retried).
   * Completes with the response or a {@link ContextEngineException}.
   */
  public CompletableFuture<ListContextToolsResponse> listContextToolsAsync(
      ListContextToolsRequest request) {
    final String method = "ContextToolsService/ListContextTools";
    try {
      Validate.app(method, request.getAppName());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(ContextToolsServiceGrpc.getListContextToolsMethod(), method, request);
  }

  /**
   * {@link #listContextTools(ListContextToolsRequest)} for an app's agents ({@code userId}: {@code
   * ""}, or the user a token restricted to one user needs).
   */
  public ListContextToolsResponse listContextTools(String appName, String userId) {
    return listContextTools(
        ListContextToolsRequest.newBuilder().setAppName(appName).setUserId(userId).build());
  }

  /**
   * Runs one call of a context tool and answers its function response, which the caller appends
   * (never retried: a summary may be appended). Blocks; throws {@link ContextEngineException}.
   */
  public CallContextToolResponse callContextTool(CallContextToolRequest request) {
    return await(callContextToolAsync(request));
  }

  /**
   * Runs one call of a context tool and answers its function response, which the caller appends
   * (never retried: a summary may be appended). Completes with the response or a {@link
   * ContextEngineException}.
   */
  public CompletableFuture<CallContextToolResponse> callContextToolAsync(
      CallContextToolRequest request) {
    final String method = "ContextToolsService/CallContextTool";
    try {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    } catch (ContextEngineException e) {
      return CompletableFuture.failedFuture(e);
    }
    return unary(ContextToolsServiceGrpc.getCallContextToolMethod(), method, request);
  }

  /**
   * The context tools of one agent in one session ({@link ContextTools}): {@code branch} and {@code
   * isolationScope} (null: none) as in the agent's {@code BuildContext} requests.
   */
  public ContextTools contextTools(
      String appName,
      String userId,
      String sessionId,
      String agentName,
      String branch,
      String isolationScope) {
    return new ContextTools(this, appName, userId, sessionId, agentName, branch, isolationScope);
  }

  /** The context tools of {@code agentName} in a session (no branch, no isolation scope). */
  public ContextTools contextTools(SessionRef session, String agentName) {
    return contextTools(
        session.appName(), session.userId(), session.sessionId(), agentName, null, null);
  }

  // Paging ----------------------------------------------------------------------------------------

  /**
   * Every session of an app (or a user), page after page: the pages are fetched lazily as the
   * iteration goes (each page one {@link #listSessions} call, with its own deadline).
   */
  public Iterable<Session> iterateSessions(ListSessionsRequest request) {
    return () ->
        new Pages<>(
            token -> {
              ListSessionsResponse page =
                  listSessions(request.toBuilder().setPageToken(token).build());
              return Map.entry(page.getSessionsList(), page.getNextPageToken());
            },
            request.getPageToken());
  }

  /** A session's events after {@code after_sequence}, in log order, fetched page after page. */
  public Iterable<Event> iterateEvents(ListEventsRequest request) {
    return () ->
        new Pages<>(
            token -> {
              ListEventsResponse page = listEvents(request.toBuilder().setPageToken(token).build());
              return Map.entry(page.getEventsList(), page.getNextPageToken());
            },
            request.getPageToken());
  }

  /** Items of pages fetched by token until a page has no next token. */
  private static final class Pages<T> implements java.util.Iterator<T> {
    private final java.util.function.Function<String, Map.Entry<List<T>, String>> fetch;
    private java.util.Iterator<T> items = java.util.Collections.emptyIterator();
    private String token;
    private boolean last;

    Pages(java.util.function.Function<String, Map.Entry<List<T>, String>> fetch, String first) {
      this.fetch = fetch;
      this.token = first;
    }

    @Override
    public boolean hasNext() {
      while (!items.hasNext() && !last) {
        Map.Entry<List<T>, String> page = fetch.apply(token);
        items = page.getKey().iterator();
        token = page.getValue();
        last = token.isEmpty();
      }
      return items.hasNext();
    }

    @Override
    public T next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      return items.next();
    }
  }

  // Subscriptions -------------------------------------------------------------------------------

  /** {@link #subscribeEvents(SubscribeEventsRequest, StreamOptions)} with the default options. */
  public FollowedStream<SubscribeEventsResponse> subscribeEvents(SubscribeEventsRequest request) {
    return subscribeEvents(request, StreamOptions.DEFAULT);
  }

  /**
   * The frames of {@code SubscribeEvents} (events, {@code caught_up}, heartbeats, batches) after
   * the request's cursor. When the stream breaks it is reopened from the last cursor received (the
   * last event's, or a {@code caught_up} or heartbeat cursor): no event is missed or repeated, and
   * a new {@code caught_up} follows the replay. Close it to stop (try-with-resources).
   */
  public FollowedStream<SubscribeEventsResponse> subscribeEvents(
      SubscribeEventsRequest request, StreamOptions options) {
    final String method = "SubscriptionService/SubscribeEvents";
    SubscriptionScope scope = request.getScope();
    boolean bySequence =
        scope == SubscriptionScope.SUBSCRIPTION_SCOPE_UNSPECIFIED
            || scope == SubscriptionScope.SUBSCRIPTION_SCOPE_SESSION;
    if (scope == SubscriptionScope.SUBSCRIPTION_SCOPE_USER) {
      Validate.appUser(method, request.getAppName(), request.getUserId());
    } else if (scope == SubscriptionScope.SUBSCRIPTION_SCOPE_APP) {
      Validate.app(method, request.getAppName());
    } else {
      Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    }
    AtomicReference<SubscribeEventsRequest> next = new AtomicReference<>(request);
    return new FollowedStream<>(
        channel,
        SubscriptionServiceGrpc.getSubscribeEventsMethod(),
        method,
        next::get,
        frame -> {
          String cursor = frameCursor(frame);
          if (!cursor.isEmpty()) {
            next.set(
                bySequence
                    ? next.get().toBuilder().setAfterSequence(Long.parseLong(cursor)).build()
                    : next.get().toBuilder().setAfterCursor(cursor).build());
          }
        },
        options.resolved(request.getHeartbeatSeconds()),
        retry);
  }

  /** {@link #watchSessionState(WatchSessionStateRequest, StreamOptions)} with the defaults. */
  public FollowedStream<WatchSessionStateResponse> watchSessionState(
      WatchSessionStateRequest request) {
    return watchSessionState(request, StreamOptions.DEFAULT);
  }

  /**
   * The frames of {@code WatchSessionState}: a snapshot of the merged state, then deltas. When the
   * stream breaks it is reopened and a new snapshot follows: replace the state you hold with it.
   */
  public FollowedStream<WatchSessionStateResponse> watchSessionState(
      WatchSessionStateRequest request, StreamOptions options) {
    final String method = "SubscriptionService/WatchSessionState";
    Validate.session(method, request.getAppName(), request.getUserId(), request.getSessionId());
    return new FollowedStream<>(
        channel,
        SubscriptionServiceGrpc.getWatchSessionStateMethod(),
        method,
        () -> request,
        frame -> {},
        options.resolved(request.getHeartbeatSeconds()),
        retry);
  }

  /** The cursor a subscription frame carries ({@code ""} for none); a batch's is its last. */
  public static String frameCursor(SubscribeEventsResponse frame) {
    switch (frame.getFrameCase()) {
      case EVENT:
        return frame.getEvent().getCursor();
      case EVENTS:
        int n = frame.getEvents().getEventsCount();
        return n == 0 ? "" : frame.getEvents().getEvents(n - 1).getCursor();
      case CAUGHT_UP:
        return frame.getCaughtUp().getCursor();
      case HEARTBEAT:
        return frame.getHeartbeat().getCursor();
      default:
        return "";
    }
  }

  /** The recorded events a subscription frame carries (a batch flattened; none otherwise). */
  public static List<SubscribedEvent> eventsOf(SubscribeEventsResponse frame) {
    switch (frame.getFrameCase()) {
      case EVENT:
        return List.of(frame.getEvent());
      case EVENTS:
        return frame.getEvents().getEventsList();
      default:
        return List.of();
    }
  }

  // Internals -----------------------------------------------------------------------------------

  /** {@link #unary(MethodDescriptor, String, Object, boolean)} with no request-level condition. */
  private <Q, R> CompletableFuture<R> unary(
      MethodDescriptor<Q, R> descriptor, String method, Q request) {
    return unary(descriptor, method, request, true);
  }

  /**
   * Runs one unary call under one deadline: every attempt has the time that is left; a retryable
   * call is tried again after UNAVAILABLE while attempts remain and the backoff ends before the
   * deadline. Retryable: the proto declares an {@code idempotency_level} for the method ({@link
   * Retryability}) and {@code requestAllows}, a request's own condition, holds.
   */
  private <Q, R> CompletableFuture<R> unary(
      MethodDescriptor<Q, R> descriptor, String method, Q request, boolean requestAllows) {
    boolean retryable = requestAllows && Retryability.isRetryable(descriptor);
    long started = System.nanoTime();
    Deadline deadline = Deadline.after(timeout.toNanos(), TimeUnit.NANOSECONDS);
    CompletableFuture<R> result = new CompletableFuture<>();
    AtomicReference<Future<?>> inFlight = new AtomicReference<>();
    result.whenComplete(
        (value, error) -> {
          if (result.isCancelled()) {
            Future<?> attempt = inFlight.get();
            if (attempt != null) {
              attempt.cancel(true);
            }
          }
        });
    Attempts<Q, R> attempts =
        new Attempts<>(
            descriptor,
            method,
            request,
            retryable ? retry.maxAttempts() : 1,
            deadline,
            started,
            result,
            inFlight);
    attempts.run(1);
    return result;
  }

  private final class Attempts<Q, R> {
    private final MethodDescriptor<Q, R> descriptor;
    private final String method;
    private final Q request;
    private final int maxAttempts;
    private final Deadline deadline;
    private final long started;
    private final CompletableFuture<R> result;
    private final AtomicReference<Future<?>> inFlight;

    Attempts(
        MethodDescriptor<Q, R> descriptor,
        String method,
        Q request,
        int maxAttempts,
        Deadline deadline,
        long started,
        CompletableFuture<R> result,
        AtomicReference<Future<?>> inFlight) {
      this.descriptor = descriptor;
      this.method = method;
      this.request = request;
      this.maxAttempts = maxAttempts;
      this.deadline = deadline;
      this.started = started;
      this.result = result;
      this.inFlight = inFlight;
    }

    void run(int attempt) {
      if (result.isDone()) {
        return;
      }
      ClientCall<Q, R> call =
          channel.newCall(descriptor, CallOptions.DEFAULT.withDeadline(deadline));
      com.google.common.util.concurrent.ListenableFuture<R> future;
      try {
        future = ClientCalls.futureUnaryCall(call, request);
      } catch (RuntimeException e) {
        result.completeExceptionally(ContextEngineException.from(e, method));
        return;
      }
      inFlight.set(future);
      if (result.isCancelled()) {
        future.cancel(true);
      }
      future.addListener(() -> settle(attempt, future), Runnable::run);
    }

    private void settle(int attempt, Future<R> future) {
      Throwable failure;
      try {
        result.complete(future.get());
        return;
      } catch (ExecutionException e) {
        failure = e.getCause();
      } catch (CancellationException e) {
        failure = e;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = e;
      }
      if (result.isDone()) {
        return;
      }
      ContextEngineException error = ContextEngineException.from(failure, method);
      if (attempt < maxAttempts && error.code() == Status.Code.UNAVAILABLE) {
        long delay = retry.backoffNanos(attempt);
        if (deadline.timeRemaining(TimeUnit.NANOSECONDS) > delay) {
          try {
            scheduler.schedule(() -> run(attempt + 1), delay, TimeUnit.NANOSECONDS);
            return;
          } catch (java.util.concurrent.RejectedExecutionException closed) {
            // the client was closed: report the error we have
          }
        }
      }
      result.completeExceptionally(explain(error, attempt, started));
    }
  }

  /** Connection failures and deadlines get a message that says what happened and where. */
  private ContextEngineException explain(ContextEngineException error, int attempts, long started) {
    if (!error.clientSide()) {
      return error;
    }
    long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    String tries = attempts + " attempt" + (attempts == 1 ? "" : "s") + " in " + elapsedMs + " ms";
    if (error.code() == Status.Code.UNAVAILABLE) {
      return error.withDetail(
          "cannot reach the contextengine sidecar at "
              + target
              + " ("
              + error.detail()
              + "); "
              + tries);
    }
    if (error.code() == Status.Code.DEADLINE_EXCEEDED) {
      return error.withDetail(
          "no answer from the contextengine sidecar at "
              + target
              + " within the "
              + timeout.toMillis()
              + " ms deadline ("
              + error.detail()
              + "); "
              + tries);
    }
    return error;
  }

  /** Waits for a call; interrupting the waiting thread cancels it. */
  private static <R> R await(CompletableFuture<R> future) {
    try {
      return future.get();
    } catch (ExecutionException e) {
      throw ContextEngineException.from(e.getCause(), "");
    } catch (CancellationException e) {
      throw ContextEngineException.from(e, "");
    } catch (InterruptedException e) {
      future.cancel(true);
      Thread.currentThread().interrupt();
      throw new ContextEngineException(
          Status.Code.CANCELLED, "interrupted while waiting", "", "", Map.of(), "", true, e);
    }
  }
}
