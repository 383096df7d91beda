package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import com.google.genai.types.Part;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.RewindSessionRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * getSession with the events it keeps gives what a fresh read gives (a new service, nothing kept),
 * against a real sidecar: after its own appends, another writer's, a rewind, and a session deleted
 * (by another service) and re-created with other events under the same id.
 */
public class SessionLogCacheTest {
  static ContextEngineClient client;

  @BeforeAll
  static void connect() {
    client =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(30))
            .build();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  static List<String> json(Session session) {
    List<String> out = new ArrayList<>();
    for (Event event : session.events()) {
      out.add(event.toJson());
    }
    out.add(session.state().toString());
    return out;
  }

  static Session read(ContextEngineSessionService service, String app) {
    return service.getSession(app, "u", "s", Optional.empty()).blockingGet();
  }

  /** The kept read equals a fresh one; returns the kept read. */
  static Session assertFresh(ContextEngineSessionService kept, String app) {
    Session cached = read(kept, app);
    ContextEngineSessionService nothingKept = new ContextEngineSessionService(client);
    Session fresh = read(nothingKept, app);
    assertEquals(json(fresh), json(cached));
    assertEquals(
        nothingKept.lastSequence(fresh).orElseThrow(), kept.lastSequence(cached).orElseThrow());
    return cached;
  }

  @Test
  void keptEventsReadAsFreshOnesThroughAppendsRewindsAndRecreation() {
    String app = Sidecar.uniqueApp("j-logs");
    ContextEngineSessionService kept = new ContextEngineSessionService(client);
    ContextEngineSessionService other = new ContextEngineSessionService(client);
    Session session = kept.createSession(app, "u", Map.of("k", 1), "s").blockingGet();
    for (int turn = 0; turn < 3; turn++) {
      kept.appendEvent(
              session, ContentCacheTest.event("inv-" + turn, "user", Part.fromText("q" + turn)))
          .blockingGet();
      kept.appendEvent(
              session, ContentCacheTest.event("inv-" + turn, "root", Part.fromText("a" + turn)))
          .blockingGet();
      session = assertFresh(kept, app);
    }
    // another writer
    Session theirs = read(other, app);
    other
        .appendEvent(
            theirs, ContentCacheTest.event("inv-x", "user", Part.fromText("from elsewhere")))
        .blockingGet();
    Session first = assertFresh(kept, app);
    // every read has its own events (ADK Java's are mutable)
    assertNotSame(first.events().get(0), assertFresh(kept, app).events().get(0));
    client.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(app)
            .setUserId("u")
            .setSessionId("s")
            .setRewindBeforeInvocationId("inv-1")
            .build());
    session = assertFresh(kept, app);
    // deleted by another service and made again under the same id with other events
    other.deleteSession(app, "u", "s").blockingAwait();
    Session again = other.createSession(app, "u", Map.of("k", 2), "s").blockingGet();
    other
        .appendEvent(again, ContentCacheTest.event("inv-new", "user", Part.fromText("new life")))
        .blockingGet();
    session = assertFresh(kept, app);
    assertEquals(1, session.events().size());
    // deleted through the kept service: empty, then re-created: read whole
    kept.deleteSession(app, "u", "s").blockingAwait();
    assertNull(kept.getSession(app, "u", "s", Optional.empty()).blockingGet());
    kept.createSession(app, "u", Map.of(), "s").blockingGet();
    assertEquals(0, assertFresh(kept, app).events().size());
  }
}
