package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.GetSessionConfig;
import com.google.adk.sessions.ListEventsResponse;
import com.google.adk.sessions.Session;
import com.google.adk.sessions.SessionNotFoundException;
import com.google.adk.sessions.State;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.client.Sidecar;
import io.grpc.Status;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** ADK's own expectations of a session service, against a real sidecar. */
class SessionServiceTest {
  static ContextEngineClient client;
  static ContextEngineSessionService service;

  @BeforeAll
  static void connect() {
    client =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(30))
            .build();
    service = new ContextEngineSessionService(client);
  }

  @AfterAll
  static void close() {
    client.close();
  }

  static Event event(String author, String text, long millis, Map<String, Object> delta) {
    return Event.builder()
        .id(Event.generateEventId())
        .invocationId("inv-" + millis)
        .author(author)
        .content(
            Content.builder()
                .role(author.equals("user") ? "user" : "model")
                .parts(List.of(Part.fromText(text)))
                .build())
        .actions(EventActions.builder().stateDelta(new ConcurrentHashMap<>(delta)).build())
        .timestamp(millis)
        .build();
  }

  static Session create(String app, String user, Map<String, Object> state, String id) {
    return service.createSession(app, user, state, id).blockingGet();
  }

  static Optional<Session> get(String app, String user, String id, GetSessionConfig config) {
    return Optional.ofNullable(
        service.getSession(app, user, id, Optional.ofNullable(config)).blockingGet());
  }

  @Test
  void createWithAndWithoutIdsAndScopes() {
    String app = Sidecar.uniqueApp("j-create");
    Map<String, Object> state = new HashMap<>();
    state.put("app:model", "m");
    state.put("user:name", "Ada");
    state.put("k", 2);
    state.put("temp:scratch", "x");
    Session named = create(app, "u1", state, "  s-1  ");
    assertEquals("s-1", named.id());
    assertEquals(Map.of("app:model", "m", "user:name", "Ada", "k", 2), named.state());
    assertTrue(named.events().isEmpty());
    Session generated = create(app, "u1", null, null);
    assertFalse(generated.id().isBlank());
    // app state is shared by the app's users, user state by the user's sessions
    Session other = create(app, "u2", Map.of(), "s-2");
    assertEquals(Map.of("app:model", "m"), other.state());
    assertEquals(
        "Ada", get(app, "u1", generated.id(), null).orElseThrow().state().get("user:name"));
    Throwable dup =
        assertThrows(SessionAlreadyExistsException.class, () -> create(app, "u1", null, "s-1"));
    assertTrue(dup.getMessage().contains("s-1"));
  }

  @Test
  void getMissingIsEmptyAndConfigsFilter() {
    String app = Sidecar.uniqueApp("j-get");
    assertTrue(get(app, "u", "nope", null).isEmpty());
    Session s = create(app, "u", null, "s");
    long base = 1_700_000_000_000L;
    for (int i = 0; i < 5; i++) {
      service
          .appendEvent(s, event(i % 2 == 0 ? "user" : "root", "m" + i, base + i * 1000L, Map.of()))
          .blockingGet();
    }
    assertEquals(5, get(app, "u", "s", null).orElseThrow().events().size());
    Session last2 =
        get(app, "u", "s", GetSessionConfig.builder().numRecentEvents(2).build()).orElseThrow();
    assertEquals(List.of("m3", "m4"), texts(last2));
    assertEquals(
        0,
        get(app, "u", "s", GetSessionConfig.builder().numRecentEvents(0).build())
            .orElseThrow()
            .events()
            .size());
    Session after =
        get(
                app,
                "u",
                "s",
                GetSessionConfig.builder()
                    .afterTimestamp(Instant.ofEpochMilli(base + 2000L))
                    .build())
            .orElseThrow();
    assertEquals(List.of("m2", "m3", "m4"), texts(after));
    Session both =
        get(
                app,
                "u",
                "s",
                GetSessionConfig.builder()
                    .numRecentEvents(2)
                    .afterTimestamp(Instant.ofEpochMilli(base + 3500L))
                    .build())
            .orElseThrow();
    assertEquals(List.of("m4"), texts(both));
    assertEquals(
        Instant.ofEpochMilli(base + 4000L),
        get(app, "u", "s", null).orElseThrow().lastUpdateTime());
  }

  static List<String> texts(Session s) {
    return s.events().stream()
        .map(e -> e.content().get().parts().get().get(0).text().get())
        .toList();
  }

  @Test
  void appendAppliesStateTempAndRemoved() {
    String app = Sidecar.uniqueApp("j-append");
    Session s = create(app, "u", Map.of("keep", 1, "drop", "x"), "s");
    Map<String, Object> delta = new HashMap<>();
    delta.put("count", 3);
    delta.put("ratio", 2.5);
    delta.put("app:flag", true);
    delta.put("user:lang", "fr");
    delta.put("temp:t", "scratch");
    delta.put("drop", State.REMOVED);
    Event e = event("root", "hi", 1_700_000_000_000L, delta);
    Event returned = service.appendEvent(s, e).blockingGet();
    // the caller's session: temp applied, REMOVED removed, the event appended
    assertEquals("scratch", s.state().get("temp:t"));
    assertFalse(s.state().containsKey("drop"));
    assertEquals(3, s.state().get("count"));
    assertEquals(1, s.events().size());
    assertFalse(
        returned.actions().stateDelta().containsKey("temp:t"), "temp: trimmed from the event");
    Session read = get(app, "u", "s", null).orElseThrow();
    assertEquals(
        Map.of("keep", 1, "count", 3, "ratio", 2.5, "app:flag", true, "user:lang", "fr"),
        read.state());
    assertInstanceOf(Integer.class, read.state().get("count"));
    Event stored = read.events().get(0);
    assertEquals(e.id(), stored.id());
    assertEquals(1_700_000_000_000L, stored.timestamp());
    assertTrue(stored.actions().stateDelta().get("drop") == State.REMOVED);
    assertFalse(stored.actions().stateDelta().containsKey("temp:t"));
    // a partial event is returned untouched and not stored
    Event partial =
        event("root", "part", 1_700_000_001_000L, Map.of()).toBuilder().partial(true).build();
    service.appendEvent(s, partial).blockingGet();
    assertEquals(1, get(app, "u", "s", null).orElseThrow().events().size());
    // the same event again is an idempotent replay
    service.appendEvent(get(app, "u", "s", null).orElseThrow(), e).blockingGet();
    assertEquals(1, get(app, "u", "s", null).orElseThrow().events().size());
  }

  @Test
  void listOrderAllUsersAndDelete() throws Exception {
    String app = Sidecar.uniqueApp("j-list");
    Session a = create(app, "u1", Map.of("x", 1), "a");
    Session b = create(app, "u2", null, "b");
    Session c = create(app, "u1", null, "c");
    service
        .appendEvent(a, event("user", "later", System.currentTimeMillis() + 5000, Map.of()))
        .blockingGet();
    List<Session> all = service.listSessions(app, null).blockingGet().sessions();
    assertEquals(List.of("b", "c", "a"), all.stream().map(Session::id).toList());
    assertTrue(all.stream().allMatch(s -> s.events().isEmpty()));
    assertEquals(List.of("c", "a"), service.listSessions(app, "u1").blockingGet().sessionIds());
    assertEquals(
        Map.of("x", 1), service.listSessions(app, "u1").blockingGet().sessions().get(1).state());
    service.deleteSession(app, "u1", "c").blockingAwait();
    service.deleteSession(app, "u1", "c").blockingAwait(); // missing: no error
    assertTrue(get(app, "u1", "c", null).isEmpty());
    assertEquals(List.of("a"), service.listSessions(app, "u1").blockingGet().sessionIds());
    // a deleted session: appends fail with ADK's SessionNotFoundException
    Throwable gone =
        assertThrows(
            SessionNotFoundException.class,
            () -> service.appendEvent(c, event("user", "x", 1L, Map.of())).blockingGet());
    assertTrue(gone.getMessage().contains("c"));
    assertNull(service.getSession(app, "u2", "b", Optional.empty()).blockingGet().state().get("x"));
  }

  @Test
  void listEventsPages() {
    String app = Sidecar.uniqueApp("j-events");
    Session s = create(app, "u", null, "s");
    for (int i = 0; i < 7; i++) {
      service
          .appendEvent(s, event("user", "m" + i, 1_700_000_000_000L + i, Map.of()))
          .blockingGet();
    }
    assertEquals(7, service.listEvents(app, "u", "s").blockingGet().events().size());
    ListEventsResponse first = service.listEvents(app, "u", "s", "", 3).blockingGet();
    assertEquals(3, first.events().size());
    ListEventsResponse second =
        service.listEvents(app, "u", "s", first.nextPageToken().orElseThrow(), 3).blockingGet();
    assertEquals(3, second.events().size());
    ListEventsResponse third =
        service.listEvents(app, "u", "s", second.nextPageToken().orElseThrow(), 3).blockingGet();
    assertEquals(1, third.events().size());
    assertTrue(third.nextPageToken().isEmpty());
    assertTrue(service.listEvents(app, "u", "missing").blockingGet().events().isEmpty());
  }

  @Test
  void conflictingWritersGetStaleSession() {
    String app = Sidecar.uniqueApp("j-stale");
    create(app, "u", null, "s");
    Session one = get(app, "u", "s", null).orElseThrow();
    Session two = get(app, "u", "s", null).orElseThrow();
    service.appendEvent(one, event("user", "first", 1000L, Map.of())).blockingGet();
    StaleSessionException stale =
        assertThrows(
            StaleSessionException.class,
            () -> service.appendEvent(two, event("user", "second", 2000L, Map.of())).blockingGet());
    assertInstanceOf(ContextEngineException.class, stale.getCause());
    assertEquals(1, get(app, "u", "s", null).orElseThrow().events().size());
    // the writer that saw the last append goes on
    service.appendEvent(one, event("user", "third", 3000L, Map.of())).blockingGet();
    assertEquals(2, service.lastSequence(one).orElseThrow());
  }

  @Test
  void engineSummariesDoNotMakeASessionStale() {
    String app = Sidecar.uniqueApp("j-summary");
    client.updateAppConfig(
        dev.contextengine.v1.UpdateAppConfigRequest.newBuilder()
            .setConfig(
                dev.contextengine.v1.AppConfig.newBuilder()
                    .setAppName(app)
                    .setEventsCompactionConfig(
                        dev.contextengine.v1.EventsCompactionConfig.newBuilder()
                            .setCompactionInterval(1)
                            .setOverlapSize(0))
                    .setSummarizer(
                        dev.contextengine.v1.SummarizerConfig.newBuilder()
                            .setExtractive(
                                dev.contextengine.v1.ExtractiveSummarizerConfig
                                    .getDefaultInstance())))
            .build());
    Session s = create(app, "u", null, "s");
    service
        .appendEvent(
            s,
            event("user", "question one", 1000L, Map.of()).toBuilder().invocationId("i1").build())
        .blockingGet();
    service
        .appendEvent(
            s, event("root", "answer one", 2000L, Map.of()).toBuilder().invocationId("i1").build())
        .blockingGet();
    dev.contextengine.v1.CompactResponse compacted =
        client.compact(
            dev.contextengine.v1.CompactRequest.newBuilder()
                .setAppName(app)
                .setUserId("u")
                .setSessionId("s")
                .setTrigger(
                    dev.contextengine.v1.CompactionTrigger.COMPACTION_TRIGGER_SLIDING_WINDOW)
                .build());
    assertTrue(compacted.hasSummary(), compacted.toString());
    // s was read before the engine appended its summary: the append goes through, after it
    service
        .appendEvent(
            s,
            event("user", "question two", 3000L, Map.of()).toBuilder().invocationId("i2").build())
        .blockingGet();
    // the runner's session leaves the engine's summaries out (RunnerView); the log keeps them
    assertEquals(3, s.events().size());
    assertTrue(s.events().stream().noneMatch(e -> e.actions().compaction().isPresent()));
    assertEquals(3, get(app, "u", "s", null).orElseThrow().events().size());
    List<Event> stored = service.listEvents(app, "u", "s").blockingGet().events();
    assertEquals(4, stored.size());
    assertTrue(stored.get(2).actions().compaction().isPresent());
  }

  @Test
  void sidecarDownIsUnavailable() {
    try (ContextEngineClient down =
        ContextEngineClient.builder()
            .target("127.0.0.1:" + Sidecar.closedPort())
            .timeout(Duration.ofSeconds(5))
            .build()) {
      ContextEngineSessionService dead = new ContextEngineSessionService(down);
      ContextEngineException error =
          assertThrows(
              ContextEngineException.class,
              () -> dead.getSession("a", "u", "s", Optional.empty()).blockingGet());
      assertEquals(Status.Code.UNAVAILABLE, error.code());
      assertTrue(
          error.getMessage().contains("cannot reach the contextengine sidecar"),
          error.getMessage());
      assertThrows(
          ContextEngineException.class,
          () -> dead.createSession("a", "u", Map.of(), null).blockingGet());
    }
  }

  @Test
  void negativeRecentEventsIsInvalidArgument() {
    String app = Sidecar.uniqueApp("j-neg");
    create(app, "u", null, "s");
    ContextEngineException error =
        assertThrows(
            ContextEngineException.class,
            () -> get(app, "u", "s", GetSessionConfig.builder().numRecentEvents(-1).build()));
    assertEquals(Status.Code.INVALID_ARGUMENT, error.code());
  }
}
