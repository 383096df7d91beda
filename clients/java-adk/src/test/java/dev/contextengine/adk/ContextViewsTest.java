package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.RewindSessionRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The plugin's "contents since": the model receives exactly what it receives without it (through
 * tool calls, a rewind and a later turn), while the engine sent only the contents added since each
 * call; a view bound of one keeps answers right for sessions taking turns.
 */
public class ContextViewsTest {
  static ContextEngineClient client;
  static ContextEngineClient spied;

  /** {base_contents_count, contents sent} of each BuildContext answer {@code spied} received. */
  static final List<List<Integer>> SENT = new CopyOnWriteArrayList<>();

  /** Records what each BuildContext answer carried on the wire. */
  static final class Record implements ClientInterceptor {
    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
          next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          super.start(
              new ForwardingClientCallListener.SimpleForwardingClientCallListener<R>(listener) {
                @Override
                public void onMessage(R message) {
                  if (message instanceof BuildContextResponse answer) {
                    SENT.add(List.of(answer.getBaseContentsCount(), answer.getContentsCount()));
                  }
                  super.onMessage(message);
                }
              },
              headers);
        }
      };
    }
  }

  @BeforeAll
  static void connect() {
    client =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(30))
            .build();
    spied =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(30))
            .intercept(new Record())
            .build();
  }

  @AfterAll
  static void close() {
    client.close();
    spied.close();
  }

  /** The contents of every model call of a conversation with a rewind, as ADK's JSON. */
  static List<String> conversation(String app, ContextEnginePlugin plugin) {
    PluginTest.Scripted model =
        new PluginTest.Scripted(
            PluginTest.call("c-1", "lookup", Map.of("city", "Lisbon")),
            Part.fromText("sunny"),
            Part.fromText("secret answer"),
            Part.fromText("hi again"),
            Part.fromText("bye"));
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner =
        Runner.builder()
            .agent(PluginTest.agent(model))
            .appName(app)
            .sessionService(sessions)
            .artifactService(new InMemoryArtifactService())
            .plugins(plugin)
            .build();
    Session session = sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    PluginTest.say(runner, "s", "weather?");
    List<Event> secret = PluginTest.say(runner, "s", "secret 2");
    client.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(app)
            .setUserId("u")
            .setSessionId(session.id())
            .setRewindBeforeInvocationId(secret.get(0).invocationId())
            .build());
    PluginTest.say(runner, "s", "hello 3");
    PluginTest.say(runner, "s", "four");
    List<String> out = new ArrayList<>();
    for (List<Content> request : model.requests) {
      out.add(PluginTest.text(request));
    }
    return out;
  }

  @Test
  void theModelReceivesTheSameContentsWhileOnlyNewOnesCrossTheWire() {
    List<String> whole =
        conversation(
            Sidecar.uniqueApp("j-views-off"),
            new ContextEnginePlugin(
                client, "contextengine", ContextEnginePlugin.DEFAULT_CONTENTS_CACHE_SIZE, 0));
    SENT.clear();
    List<String> since = conversation(Sidecar.uniqueApp("j-views"), new ContextEnginePlugin(spied));
    assertEquals(whole, since);
    assertEquals(5, since.size());
    // weather? (and the tool's answer), the secret turn, then after the rewind a full answer,
    // and the turn after it held again
    List<Integer> bases = SENT.stream().map(s -> s.get(0)).toList();
    assertEquals(0, bases.get(0));
    assertTrue(bases.get(1) > 0 && bases.get(2) > 0 && bases.get(4) > 0, SENT.toString());
    assertEquals(0, bases.get(3), "after the rewind the held contents are not the prefix: " + SENT);
    // a held call received only the new turn (the user's message, or a tool call and its result)
    assertTrue(SENT.stream().allMatch(s -> s.get(0) == 0 || s.get(1) <= 2), SENT.toString());
    int sent = SENT.stream().mapToInt(s -> s.get(1)).sum();
    int received = SENT.stream().mapToInt(s -> s.get(0) + s.get(1)).sum();
    assertTrue(sent < received, sent + " contents sent for " + received);
  }

  @Test
  void oneViewForSessionsTakingTurnsStaysRight() {
    String app = Sidecar.uniqueApp("j-views-bound");
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    ContextViews views = new ContextViews(client, 1);
    for (String id : List.of("a", "b")) {
      sessions.createSession(app, "u", Map.of(), id).blockingGet();
    }
    for (int turn = 0; turn < 3; turn++) {
      for (String id : List.of("a", "b")) {
        Session session =
            sessions.getSession(app, "u", id, java.util.Optional.empty()).blockingGet();
        sessions
            .appendEvent(
                session,
                ContentCacheTest.event("inv-" + turn, "user", Part.fromText(id + " asks " + turn)))
            .blockingGet();
        sessions
            .appendEvent(
                session,
                ContentCacheTest.event(
                    "inv-" + turn, "root", Part.fromText(id + " answers " + turn)))
            .blockingGet();
        BuildContextRequest request =
            BuildContextRequest.newBuilder()
                .setAppName(app)
                .setUserId("u")
                .setSessionId(id)
                .setAgentName("root")
                .build();
        BuildContextResponse answer = views.build(request);
        // the view's answer is a full build's, and the answer for the other session is right too
        assertEquals(client.buildContext(request), answer);
        assertEquals(1, views.size());
      }
    }
    assertThrows(IllegalArgumentException.class, () -> new ContextViews(client, -1));
  }
}
