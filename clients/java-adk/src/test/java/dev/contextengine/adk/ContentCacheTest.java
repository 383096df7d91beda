package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.adk.JsonBaseModel;
import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.Part;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.BuildContextRequest;
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
 * The plugin's converted-contents cache gives what a fresh conversion gives, against a real
 * sidecar's BuildContext: after appends, a rewind, and a session deleted and re-created with other
 * events under the same id; a small bound (evictions) and no cache at all too.
 */
public class ContentCacheTest {
  static ContextEngineClient client;
  static ContextEngineSessionService sessions;

  @BeforeAll
  static void connect() {
    client =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(30))
            .build();
    sessions = new ContextEngineSessionService(client);
  }

  @AfterAll
  static void close() {
    client.close();
  }

  static Event event(String invocation, String author, Part part) {
    return Event.builder()
        .id(Event.generateEventId())
        .invocationId(invocation)
        .author(author)
        .content(
            Content.builder()
                .role(author.equals("user") ? "user" : "model")
                .parts(List.of(part))
                .build())
        .actions(EventActions.builder().build())
        .timestamp(System.currentTimeMillis())
        .build();
  }

  static List<dev.contextengine.v1.Content> build(String app) {
    return client
        .buildContext(
            BuildContextRequest.newBuilder()
                .setAppName(app)
                .setUserId("u")
                .setSessionId("s")
                .setAgentName("root")
                .build())
        .getContentsList();
  }

  /** The cache's conversion equals a fresh one, content by content (as ADK's JSON). */
  static void assertFresh(ContentCache cache, List<dev.contextengine.v1.Content> contents) {
    List<String> fresh = new ArrayList<>();
    for (dev.contextengine.v1.Content c : contents) {
      fresh.add(JsonBaseModel.toJsonString(AdkConvert.contentFromProto(c)));
    }
    List<String> cached = new ArrayList<>();
    for (Content c : cache.convert(contents)) {
      cached.add(JsonBaseModel.toJsonString(c));
    }
    assertEquals(fresh, cached);
  }

  static Session append(Session session, String invocation, int turn) {
    sessions
        .appendEvent(session, event(invocation, "user", Part.fromText("question " + turn)))
        .blockingGet();
    sessions
        .appendEvent(
            session,
            event(
                invocation,
                "root",
                Part.builder()
                    .functionCall(
                        FunctionCall.builder()
                            .id("c-" + turn)
                            .name("lookup")
                            .args(Map.of("city", "Lisbon", "n", turn))
                            .build())
                    .build()))
        .blockingGet();
    sessions
        .appendEvent(session, event(invocation, "root", Part.fromText("answer " + turn)))
        .blockingGet();
    return session;
  }

  @Test
  void cachedConversionsAreFreshOnesThroughAppendsRewindsAndRecreation() {
    String app = Sidecar.uniqueApp("j-cache");
    for (long size : new long[] {ContextEnginePlugin.DEFAULT_CONTENTS_CACHE_SIZE, 4, 0}) {
      String appOf = app + "-" + size;
      ContentCache cache = new ContentCache(size);
      Session session = sessions.createSession(appOf, "u", Map.of(), "s").blockingGet();
      for (int turn = 0; turn < 4; turn++) {
        append(session, "inv-" + turn, turn);
        assertFresh(cache, build(appOf));
      }
      if (size == ContextEnginePlugin.DEFAULT_CONTENTS_CACHE_SIZE) {
        // every content converted once: the prefix of each call was reused, not converted again
        assertEquals(build(appOf).size(), cache.size());
      } else {
        assertEquals(Math.min(size, build(appOf).size()), cache.size());
      }
      client.rewindSession(
          RewindSessionRequest.newBuilder()
              .setAppName(appOf)
              .setUserId("u")
              .setSessionId("s")
              .setRewindBeforeInvocationId("inv-2")
              .build());
      assertFresh(cache, build(appOf));
      session = sessions.getSession(appOf, "u", "s", Optional.empty()).blockingGet();
      append(session, "inv-9", 9);
      assertFresh(cache, build(appOf));
      sessions.deleteSession(appOf, "u", "s").blockingAwait();
      Session again = sessions.createSession(appOf, "u", Map.of(), "s").blockingGet();
      append(again, "inv-0", 100);
      assertFresh(cache, build(appOf));
    }
  }

  @Test
  void aNegativeBoundIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> new ContentCache(-1));
  }
}
