package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.contextengine.v1.AppendEventResponse;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.GetSessionRequest;
import dev.contextengine.v1.ListEventsResponse;
import dev.contextengine.v1.Session;
import dev.contextengine.v1.UpdateAppConfigRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Unary calls against a real sidecar (and against ports where nothing, or nothing useful, is). */
class ClientTest {
  private static ContextEngineClient ce;

  @BeforeAll
  static void connect() {
    ce =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .build();
  }

  @AfterAll
  static void close() {
    ce.close();
  }

  static SessionRef newSession(ContextEngineClient client) {
    Session s =
        client
            .createSession(
                CreateSessionRequest.newBuilder()
                    .setAppName(Sidecar.uniqueApp("java-test"))
                    .setUserId("u")
                    .build())
            .getSession();
    return SessionRef.of(s);
  }

  /** Counts the attempts of each method that go through a client. */
  static final class Attempts implements ClientInterceptor {
    final Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      counts
          .computeIfAbsent(method.getBareMethodName(), k -> new AtomicInteger())
          .incrementAndGet();
      return next.newCall(method, options);
    }

    int of(String method) {
      AtomicInteger n = counts.get(method);
      return n == null ? 0 : n.get();
    }
  }

  static ContextEngineException thrown(Supplier<?> call) {
    return assertThrows(ContextEngineException.class, call::get);
  }

  @Test
  void appendBuildAndRead() {
    SessionRef ref = newSession(ce);
    AppendEventResponse first =
        ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-1", "Hi!")));
    assertEquals(1, first.getEvent().getSequence());
    assertFalse(first.getEvent().getId().isEmpty(), "the client gave the event an id");
    assertTrue(first.getEvent().getTimestamp() > 1.7e9, "and a timestamp in seconds");
    BuildContextResponse context = ce.buildContext(ref.buildContext("greeter"));
    assertEquals(1, context.getContentsCount());
    assertEquals(1, context.getLastSequence());
    ListEventsResponse events = ce.listEvents(ref.listEvents(0));
    assertEquals(1, events.getEventsCount());
  }

  @Test
  void asyncCallsComplete() throws Exception {
    SessionRef ref = newSession(ce);
    CompletableFuture<AppendEventResponse> a =
        ce.appendEventAsync(ref.appendEvent(SessionRef.said("user", "inv-1", "one")));
    assertEquals(1, a.get(20, TimeUnit.SECONDS).getEvent().getSequence());
    CompletableFuture<?> missing =
        ce.getSessionAsync(
            GetSessionRequest.newBuilder()
                .setAppName(ref.appName())
                .setUserId("u")
                .setSessionId("nope")
                .build());
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> missing.get(20, TimeUnit.SECONDS));
    ContextEngineException error = (ContextEngineException) e.getCause();
    assertEquals(Status.Code.NOT_FOUND, error.code());
    assertEquals("SESSION_NOT_FOUND", error.reason());
  }

  @Test
  void serverErrorsKeepCodeReasonAndMetadata() {
    SessionRef ref = newSession(ce);
    ce.appendEvent(
        ref.appendEvent(SessionRef.said("user", "i", "x").toBuilder().setId("once").build()));
    ContextEngineException e =
        thrown(
            () ->
                ce.appendEvent(
                    ref.appendEvent(
                        SessionRef.said("user", "i", "other").toBuilder().setId("once").build())));
    assertEquals(Status.Code.ALREADY_EXISTS, e.code());
    assertEquals("EVENT_ID_CONFLICT", e.reason());
    assertEquals(ContextEngineException.DOMAIN, e.domain());
    assertEquals("once", e.metadata().get("event_id"));
    assertFalse(e.clientSide());
    assertEquals("SessionService/AppendEvent", e.method());

    ContextEngineException seq =
        thrown(
            () ->
                ce.appendEvent(
                    ref.appendEvent(SessionRef.said("user", "i", "y")).toBuilder()
                        .setExpectedLastSequence(7)
                        .build()));
    assertEquals(Status.Code.ABORTED, seq.code());
    assertEquals("SEQUENCE_MISMATCH", seq.reason());
  }

  @Test
  void anAppendWithTheSameIdIsIdempotent() {
    SessionRef ref = newSession(ce);
    Event event =
        SessionRef.said("user", "i", "x").toBuilder().setId("e-1").setTimestamp(1.8e9).build();
    AppendEventResponse a = ce.appendEvent(ref.appendEvent(event));
    AppendEventResponse b = ce.appendEvent(ref.appendEvent(event));
    assertTrue(b.getDuplicate());
    assertEquals(a.getEvent().getSequence(), b.getEvent().getSequence());
  }

  @Test
  void aBatchGetsDistinctIncreasingTimestamps() {
    SessionRef ref = newSession(ce);
    AppendEventsRequest.Builder batch =
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId());
    for (int i = 0; i < 5; i++) {
      batch.addEvents(SessionRef.said("user", "i", "m" + i));
    }
    List<Event> events = ce.appendEvents(batch.build()).getEventsList();
    assertEquals(5, events.size());
    for (int i = 1; i < events.size(); i++) {
      assertTrue(events.get(i).getTimestamp() > events.get(i - 1).getTimestamp());
      assertNotEquals(events.get(i).getId(), events.get(i - 1).getId());
    }
  }

  @Test
  void missingIdsAreRejectedBeforeSending() {
    // A closed port: had anything been sent, the error would be UNAVAILABLE.
    try (ContextEngineClient down =
        ContextEngineClient.connect("127.0.0.1:" + Sidecar.closedPort())) {
      ContextEngineException e =
          thrown(
              () ->
                  down.getSession(
                      GetSessionRequest.newBuilder().setAppName("a").setUserId("u").build()));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals("MISSING_FIELD", e.reason());
      assertEquals(Map.of("field", "session_id"), e.metadata());
      assertTrue(e.clientSide());
      assertEquals(
          "app_name",
          thrown(() -> down.createSession(CreateSessionRequest.getDefaultInstance()))
              .metadata()
              .get("field"));
      assertEquals(
          "user_id",
          thrown(
                  () ->
                      down.createSession(CreateSessionRequest.newBuilder().setAppName("a").build()))
              .metadata()
              .get("field"));
      SessionRef ref = new SessionRef("a", "u", "s");
      assertEquals(
          "event",
          thrown(
                  () ->
                      down.appendEvent(
                          ref.appendEvent(Event.getDefaultInstance()).toBuilder()
                              .clearEvent()
                              .build()))
              .metadata()
              .get("field"));
      assertEquals(
          "event.author",
          thrown(() -> down.appendEvent(ref.appendEvent(Event.getDefaultInstance())))
              .metadata()
              .get("field"));
      assertEquals(
          "events[1].author",
          thrown(
                  () ->
                      down.appendEvents(
                          AppendEventsRequest.newBuilder()
                              .setAppName("a")
                              .setUserId("u")
                              .setSessionId("s")
                              .addEvents(SessionRef.said("user", "i", "x"))
                              .addEvents(Event.getDefaultInstance())
                              .build()))
              .metadata()
              .get("field"));
      assertEquals(
          "config",
          thrown(() -> down.updateAppConfig(UpdateAppConfigRequest.getDefaultInstance()))
              .metadata()
              .get("field"));
      assertEquals(
          "session_id",
          thrown(
                  () ->
                      down.subscribeEvents(
                          ref.subscribeEvents().toBuilder().clearSessionId().build()))
              .metadata()
              .get("field"));
      // The async twins fail their future instead of throwing.
      assertTrue(
          down.getSessionAsync(GetSessionRequest.getDefaultInstance()).isCompletedExceptionally());
    }
  }

  @Test
  void aSidecarThatIsDownFailsFastWithUnavailable() {
    String target = "127.0.0.1:" + Sidecar.closedPort();
    Attempts attempts = new Attempts();
    try (ContextEngineClient down =
        ContextEngineClient.builder().target(target).intercept(attempts).build()) {
      long t0 = System.nanoTime();
      ContextEngineException e =
          thrown(() -> down.getSession(new SessionRef("a", "u", "s").getSession()));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertTrue(e.clientSide());
      assertTrue(
          e.getMessage().contains("cannot reach the contextengine sidecar at " + target),
          e.getMessage());
      assertTrue(e.getMessage().contains("4 attempts"), e.getMessage());
      assertEquals(4, attempts.of("GetSession"), "a read is retried");
      assertTrue(ms < 5_000, "failed after " + ms + " ms");
      // Creating a session is never retried.
      thrown(
          () ->
              down.createSession(
                  CreateSessionRequest.newBuilder().setAppName("a").setUserId("u").build()));
      assertEquals(1, attempts.of("CreateSession"));
      thrown(() -> down.compact(new SessionRef("a", "u", "s").compact()));
      assertEquals(1, attempts.of("Compact"));
      thrown(() -> down.deleteSession(new SessionRef("a", "u", "s").deleteSession()));
      assertEquals(
          1, attempts.of("DeleteSession"), "without allow_missing a delete is not retried");
      thrown(
          () ->
              down.deleteSession(
                  new SessionRef("a", "u", "s")
                      .deleteSession().toBuilder().setAllowMissing(true).build()));
      assertEquals(5, attempts.of("DeleteSession"));
      thrown(
          () ->
              down.appendEvent(
                  new SessionRef("a", "u", "s").appendEvent(SessionRef.said("user", "i", "x"))));
      assertEquals(4, attempts.of("AppendEvent"), "an append (its id assigned first) is retried");
    }
    try (ContextEngineClient once =
        ContextEngineClient.builder()
            .target(target)
            .retryPolicy(RetryPolicy.NONE)
            .intercept(attempts)
            .build()) {
      thrown(() -> once.buildContext(new SessionRef("a", "u", "s").buildContext("x")));
      assertEquals(1, attempts.of("BuildContext"));
    }
  }

  @Test
  void theDeadlineCoversTheRetries() {
    RetryPolicy many = new RetryPolicy(1000, Duration.ofMillis(100), Duration.ofMillis(100));
    Attempts attempts = new Attempts();
    try (ContextEngineClient down =
        ContextEngineClient.builder()
            .target("127.0.0.1:" + Sidecar.closedPort())
            .retryPolicy(many)
            .timeout(Duration.ofMillis(800))
            .intercept(attempts)
            .build()) {
      long t0 = System.nanoTime();
      ContextEngineException e =
          thrown(() -> down.getSession(new SessionRef("a", "u", "s").getSession()));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertTrue(ms < 2_500, "the whole call took " + ms + " ms");
      assertTrue(
          attempts.of("GetSession") > 1 && attempts.of("GetSession") < 20,
          attempts.counts.toString());
    }
  }

  @Test
  void aHungServerIsDeadlineExceededAfterTheDeadline() throws Exception {
    try (Sidecar.Silent silent = new Sidecar.Silent();
        ContextEngineClient hung =
            ContextEngineClient.builder()
                .target(silent.target())
                .timeout(Duration.ofMillis(700))
                .build()) {
      long t0 = System.nanoTime();
      ContextEngineException e =
          thrown(() -> hung.getSession(new SessionRef("a", "u", "s").getSession()));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertEquals(Status.Code.DEADLINE_EXCEEDED, e.code());
      assertTrue(e.getMessage().contains("within the 700 ms deadline"), e.getMessage());
      assertTrue(ms >= 650 && ms < 3_000, "after " + ms + " ms");
      // A per-call deadline through a view of the client.
      long t1 = System.nanoTime();
      thrown(
          () ->
              hung.withTimeout(Duration.ofMillis(200))
                  .getSession(new SessionRef("a", "u", "s").getSession()));
      long ms1 = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1);
      assertTrue(ms1 < 650, "after " + ms1 + " ms");
    }
  }

  @Test
  void cancellingAFutureCancelsTheCall() throws Exception {
    try (Sidecar.Silent silent = new Sidecar.Silent();
        ContextEngineClient hung = ContextEngineClient.connect(silent.target())) {
      CompletableFuture<?> call = hung.getSessionAsync(new SessionRef("a", "u", "s").getSession());
      Thread.sleep(100);
      assertTrue(call.cancel(true));
      assertTrue(call.isCancelled());
      ContextEngineException e =
          thrown(
              () ->
                  hung.withTimeout(Duration.ofMillis(100))
                      .getSession(new SessionRef("a", "u", "s").getSession()));
      assertEquals(Status.Code.DEADLINE_EXCEEDED, e.code());
    }
  }

  @Test
  void iterateEventsAndSessionsPageThroughEverything() {
    SessionRef ref = newSession(ce);
    AppendEventsRequest.Builder batch =
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId());
    for (int i = 0; i < 25; i++) {
      batch.addEvents(SessionRef.said("user", "i", "m" + i));
    }
    ce.appendEvents(batch.build());
    List<Long> sequences = new java.util.ArrayList<>();
    for (Event e : ce.iterateEvents(ref.listEvents(3).toBuilder().setPageSize(4).build())) {
      sequences.add(e.getSequence());
    }
    assertEquals(22, sequences.size());
    assertEquals(4L, sequences.get(0));
    assertEquals(25L, sequences.get(21));
    for (int i = 0; i < 4; i++) {
      ce.createSession(
          CreateSessionRequest.newBuilder().setAppName(ref.appName()).setUserId("v").build());
    }
    int count = 0;
    for (Session s :
        ce.iterateSessions(
            dev.contextengine.v1.ListSessionsRequest.newBuilder()
                .setAppName(ref.appName())
                .setPageSize(2)
                .build())) {
      assertEquals(ref.appName(), s.getAppName());
      count += 1;
    }
    assertEquals(5, count);
  }

  @Test
  void theClientsFingerprintEqualsTheServers() throws Exception {
    String app = Sidecar.uniqueApp("java-cache");
    UpdateAppConfigRequest.Builder config = UpdateAppConfigRequest.newBuilder();
    com.google.protobuf.util.JsonFormat.parser()
        .merge(
            "{\"config\": {\"app_name\": \""
                + app
                + "\", \"context_cache_config\": {\"cache_intervals\": 5, \"ttl_seconds\": 600}}}",
            config);
    ce.updateAppConfig(config.build());
    SessionRef ref =
        SessionRef.of(
            ce.createSession(
                    CreateSessionRequest.newBuilder().setAppName(app).setUserId("erin").build())
                .getSession());
    dev.contextengine.v1.BuildContextRequest.Builder request =
        ref.buildContext("forecaster").toBuilder();
    com.google.protobuf.util.JsonFormat.parser()
        .merge(
            "{\"model\": {\"provider\": \"MODEL_PROVIDER_GEMINI\", \"model\": \"gemini-2.0-flash\"},"
                + " \"system_instruction\": {\"parts\": [{\"text\": \"You report the weather.\"}]},"
                + " \"tools\": [{\"function_declarations\": [{\"name\": \"b\"}, {\"name\": \"a\", \"parameters\": {\"type\": \"OBJECT\"}}]}, {\"google_search\": {}}],"
                + " \"tool_config\": {\"function_calling_config\": {\"mode\": \"AUTO\"}}}",
            request);
    int withPrefix = 0;
    for (int invocation = 1; invocation <= 3; invocation++) {
      String id = "i" + invocation;
      ce.appendEvent(
          ref.appendEvent(
              SessionRef.said("user", id, "Weather in city " + invocation + "? café 漢字 😀")));
      BuildContextResponse context = ce.buildContext(request.setInvocationId(id).build());
      assertFalse(context.getFingerprint().isEmpty());
      assertEquals(
          context.getFingerprint(),
          Fingerprint.of(
              request.build(), context.getContentsList(), context.getCacheableContentsCount()),
          "invocation " + invocation);
      if (context.getCacheableContentsCount() > 0) {
        withPrefix += 1;
      }
      ce.appendEvent(
          ref.appendEvent(
              SessionRef.said("forecaster", id, "Sunny, " + (20 + invocation) + " C.")));
    }
    assertTrue(withPrefix > 0, "some contexts had a cacheable prefix");
  }

  @Test
  void aChannelOfYourOwnIsSharedAndNotClosed() {
    io.grpc.ManagedChannel channel =
        io.grpc.Grpc.newChannelBuilder(
                Sidecar.shared(), io.grpc.InsecureChannelCredentials.create())
            .build();
    try {
      try (ContextEngineClient a = ContextEngineClient.builder().channel(channel).build();
          ContextEngineClient b =
              ContextEngineClient.builder()
                  .channel(channel)
                  .timeout(Duration.ofSeconds(20))
                  .build()) {
        SessionRef ref = newSession(a);
        assertEquals(ref.sessionId(), b.getSession(ref.getSession()).getSession().getId());
      }
      assertFalse(channel.isShutdown(), "closing the clients left the channel alone");
      try (ContextEngineClient c = ContextEngineClient.builder().channel(channel).build()) {
        assertEquals("u", newSession(c).userId());
      }
    } finally {
      channel.shutdownNow();
    }
  }

  @Test
  void aUnixSocketTarget() throws Exception {
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("ce-uds-");
    java.nio.file.Path socket = dir.resolve("ce.sock");
    try (Sidecar server = Sidecar.start("unix:" + socket, null, List.of())) {
      for (String target : List.of(socket.toString(), server.target)) {
        try (ContextEngineClient uds =
            ContextEngineClient.builder().target(target).timeout(Duration.ofSeconds(20)).build()) {
          SessionRef ref = newSession(uds);
          assertEquals(
              1,
              uds.appendEvent(ref.appendEvent(SessionRef.said("user", "i", "hi")))
                  .getEvent()
                  .getSequence());
        }
      }
    }
  }
}
