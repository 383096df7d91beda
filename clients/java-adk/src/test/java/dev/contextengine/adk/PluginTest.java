package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.JsonBaseModel;
import com.google.adk.agents.LlmAgent;
import com.google.adk.apps.App;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.memory.MemoryEntry;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.BaseLlmConnection;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.InMemorySessionService;
import com.google.adk.sessions.Session;
import com.google.adk.summarizer.EventsCompactionConfig;
import com.google.adk.tools.Annotations.Schema;
import com.google.adk.tools.FunctionTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.Part;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.ExtractiveSummarizerConfig;
import dev.contextengine.v1.GetCompactionStatusRequest;
import dev.contextengine.v1.ListEventsRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.SummarizerConfig;
import dev.contextengine.v1.UpdateAppConfigRequest;
import io.reactivex.rxjava3.core.Flowable;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The plugin and the memory service in ADK Java's own Runner, against a real sidecar. */
public class PluginTest {
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

  public static Map<String, Object> lookup(@Schema(name = "city") String city) {
    return Map.of("weather", "sunny in " + city, "degrees", 21);
  }

  /** Answers from a script; keeps every request's contents. */
  public static final class Scripted extends BaseLlm {
    final Deque<Part> script = new ArrayDeque<>();
    final List<List<Content>> requests = new ArrayList<>();

    public Scripted(Part... parts) {
      super("scripted");
      script.addAll(List.of(parts));
    }

    @Override
    public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
      requests.add(List.copyOf(request.contents()));
      Part next = script.isEmpty() ? Part.fromText("done") : script.pollFirst();
      return Flowable.just(
          LlmResponse.builder()
              .content(Content.builder().role("model").parts(List.of(next)).build())
              .build());
    }

    @Override
    public BaseLlmConnection connect(LlmRequest request) {
      throw new UnsupportedOperationException();
    }
  }

  static Part call(String id, String name, Map<String, Object> args) {
    return Part.builder()
        .functionCall(FunctionCall.builder().id(id).name(name).args(args).build())
        .build();
  }

  static LlmAgent agent(BaseLlm model) {
    return LlmAgent.builder()
        .name("root")
        .instruction("You plan trips.")
        .model(model)
        .tools(FunctionTool.create(PluginTest.class, "lookup"))
        .build();
  }

  static Runner runner(String app, LlmAgent agent, BaseSessionService sessions) {
    return Runner.builder()
        .agent(agent)
        .appName(app)
        .sessionService(sessions)
        .memoryService(new ContextEngineMemoryService(client))
        .artifactService(new InMemoryArtifactService())
        .plugins(new ContextEnginePlugin(client))
        .build();
  }

  static List<Event> say(Runner runner, String session, String text) {
    return runner
        .runAsync("u", session, Content.fromParts(Part.fromText(text)))
        .toList()
        .blockingGet();
  }

  static String text(List<Content> contents) {
    StringBuilder out = new StringBuilder();
    for (Content c : contents) {
      out.append(JsonBaseModel.toJsonString(c));
    }
    return out.toString();
  }

  @Test
  void contentsAreTheEnginesRewindsIncluded() {
    String app = Sidecar.uniqueApp("j-plugin");
    Scripted model =
        new Scripted(
            call("c-1", "lookup", Map.of("city", "Lisbon")),
            Part.fromText("sunny"),
            Part.fromText("secret answer"),
            Part.fromText("hi again"));
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner = runner(app, agent(model), sessions);
    Session session = sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    say(runner, "s", "weather?");
    List<Event> secret = say(runner, "s", "secret 2");
    client.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(app)
            .setUserId("u")
            .setSessionId(session.id())
            .setRewindBeforeInvocationId(secret.get(0).invocationId())
            .build());
    say(runner, "s", "hello 3");
    List<Content> last = model.requests.get(model.requests.size() - 1);
    // what the engine builds for the agent now is what the model got
    List<Content> engine = new ArrayList<>();
    client
        .buildContext(
            BuildContextRequest.newBuilder()
                .setAppName(app)
                .setUserId("u")
                .setSessionId("s")
                .setAgentName("root")
                .build())
        .getContentsList()
        .forEach(c -> engine.add(AdkConvert.contentFromProto(c)));
    assertFalse(
        text(last).contains("secret"), "the rewound turn is not in the history: " + text(last));
    assertTrue(text(last).contains("sunny in Lisbon"), text(last));
    assertTrue(text(last).contains("hello 3"), text(last));
    // the engine's contents now also hold the model's answer to "hello 3"
    assertEquals(text(last), text(engine.subList(0, last.size())));
    // integers in tool responses come back as integers in the request
    assertTrue(text(last).contains("\"degrees\":21"), text(last));
  }

  @Test
  void afterRunEndsTheInvocationSoTheEngineCompacts() throws Exception {
    String app = Sidecar.uniqueApp("j-compact");
    client.updateAppConfig(
        UpdateAppConfigRequest.newBuilder()
            .setConfig(
                AppConfig.newBuilder()
                    .setAppName(app)
                    .setEventsCompactionConfig(
                        dev.contextengine.v1.EventsCompactionConfig.newBuilder()
                            .setCompactionInterval(2)
                            .setOverlapSize(0))
                    .setSummarizer(
                        SummarizerConfig.newBuilder()
                            .setExtractive(ExtractiveSummarizerConfig.getDefaultInstance())))
            .build());
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner = runner(app, agent(new Scripted()), sessions);
    sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    say(runner, "s", "one");
    say(runner, "s", "two");
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (client
            .getCompactionStatus(
                GetCompactionStatusRequest.newBuilder()
                    .setAppName(app)
                    .setUserId("u")
                    .setSessionId("s")
                    .build())
            .getRunning()
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    boolean compacted =
        client
            .listEvents(
                ListEventsRequest.newBuilder()
                    .setAppName(app)
                    .setUserId("u")
                    .setSessionId("s")
                    .build())
            .getEventsList()
            .stream()
            .anyMatch(e -> e.getActions().hasCompaction());
    assertTrue(compacted, "EndInvocation after each run let the engine compact");
    // the session object read again is not stale for the summary, and a third turn runs
    say(runner, "s", "three");
  }

  @Test
  void adksOwnCompactionIsRefused() {
    String app = Sidecar.uniqueApp("j_double").replace("-", "_");
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    App configured =
        App.builder()
            .name(app)
            .rootAgent(agent(new Scripted()))
            .plugins(new ContextEnginePlugin(client))
            .eventsCompactionConfig(new EventsCompactionConfig(3, 1))
            .build();
    Runner runner =
        Runner.builder()
            .app(configured)
            .sessionService(sessions)
            .artifactService(new InMemoryArtifactService())
            .build();
    sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    IllegalStateException error =
        assertThrows(IllegalStateException.class, () -> say(runner, "s", "hi"));
    assertTrue(error.getMessage().contains("eventsCompactionConfig"), error.getMessage());
  }

  @Test
  void eventsAdkJavaProducesRoundTrip() throws Exception {
    InMemorySessionService memory = new InMemorySessionService();
    Scripted model =
        new Scripted(
            call("c-1", "lookup", Map.of("city", "Porto")), Part.fromText("sunny in Porto"));
    LlmAgent agent = agent(model);
    Runner plain =
        Runner.builder()
            .agent(agent)
            .appName("plain")
            .sessionService(memory)
            .artifactService(new InMemoryArtifactService())
            .build();
    memory.createSession("plain", "u", Map.of(), "s").blockingGet();
    plain.runAsync("u", "s", Content.fromParts(Part.fromText("weather?"))).toList().blockingGet();
    List<Event> events =
        memory.getSession("plain", "u", "s", java.util.Optional.empty()).blockingGet().events();
    assertEquals(4, events.size());
    for (Event event : events) {
      Event back = AdkConvert.eventFromProto(AdkConvert.eventToProto(event));
      assertEquals(AdkConvertTest.json(event), AdkConvertTest.json(back), event.toJson());
    }
  }

  @Test
  void memoryServiceAddsAndSearches() {
    String app = Sidecar.uniqueApp("j-memory");
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    ContextEngineMemoryService memory = new ContextEngineMemoryService(client);
    Runner runner =
        runner(app, agent(new Scripted(Part.fromText("Lisbon is lovely in spring"))), sessions);
    Session session = sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    say(runner, "s", "tell me about Lisbon");
    memory
        .addSessionToMemory(
            sessions.getSession(app, "u", "s", java.util.Optional.empty()).blockingGet())
        .blockingAwait();
    List<MemoryEntry> found =
        memory.searchMemory(app, "u", "Lisbon spring").blockingGet().memories();
    assertFalse(found.isEmpty());
    assertTrue(
        found.stream()
            .anyMatch(
                m ->
                    "root".equals(m.author())
                        && m.content().parts().get().get(0).text().orElse("").contains("spring")));
    assertTrue(memory.searchMemory(app, "u", "   ").blockingGet().memories().isEmpty());
    assertTrue(memory.searchMemory(app, "other-user", "Lisbon").blockingGet().memories().isEmpty());
    assertEquals("s", session.id());
  }
}
