package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.agents.CallbackContext;
import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.plugins.BasePlugin;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.adk.tools.Annotations.Schema;
import com.google.adk.tools.LongRunningFunctionTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionResponse;
import com.google.genai.types.Part;
import com.google.protobuf.Value;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.EventActions;
import dev.contextengine.v1.ExtractiveSummarizerConfig;
import dev.contextengine.v1.GetCompactionStatusRequest;
import dev.contextengine.v1.ListEventsRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.SummarizerConfig;
import dev.contextengine.v1.UpdateAppConfigRequest;
import io.reactivex.rxjava3.core.Maybe;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ADK Java's Runner on the drop-ins acts as google-adk 2.13 does where ADK Java alone does not:
 * routing after a rewind, a long-running call answered after a summary covered it, the answer's
 * invocation, transfer answers. Against a real sidecar; the generated conversations of {@code make
 * adk-parity} check the same against google-adk itself.
 */
class RunnerViewTest {
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

  public static Map<String, Object> start_refund(@Schema(name = "order") String order) {
    return Map.of("status", order + " pending");
  }

  /** Notes the agent of every model call. */
  static final class Agents extends BasePlugin {
    final List<String> calls = new ArrayList<>();

    Agents() {
      super("test-agents");
    }

    @Override
    public Maybe<LlmResponse> beforeModelCallback(
        CallbackContext context, LlmRequest.Builder request) {
      calls.add(context.agentName());
      return Maybe.empty();
    }
  }

  static final class App {
    final String name;
    final PluginTest.Scripted model;
    final Agents agents = new Agents();
    final ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    final Runner runner;

    App(String prefix, Part... script) {
      name = Sidecar.uniqueApp(prefix);
      model = new PluginTest.Scripted(script);
      LlmAgent helper =
          LlmAgent.builder().name("helper").description("Helps.").model(model).build();
      LlmAgent root =
          LlmAgent.builder()
              .name("root")
              .model(model)
              .tools(LongRunningFunctionTool.create(RunnerViewTest.class, "start_refund"))
              .subAgents(helper)
              .build();
      runner =
          Runner.builder()
              .agent(root)
              .appName(name)
              .sessionService(sessions)
              .artifactService(new InMemoryArtifactService())
              .plugins(new ContextEnginePlugin(client), agents)
              .build();
      sessions.createSession(name, "u", Map.of(), "s").blockingGet();
    }

    List<Event> run(Content message) {
      return runner.runAsync("u", "s", message).toList().blockingGet();
    }

    List<Event> say(String text) {
      return run(Content.fromParts(Part.fromText(text)));
    }

    List<dev.contextengine.v1.Event> stored() {
      return client
          .listEvents(
              ListEventsRequest.newBuilder()
                  .setAppName(name)
                  .setUserId("u")
                  .setSessionId("s")
                  .build())
          .getEventsList();
    }

    void compacting(int interval) {
      client.updateAppConfig(
          UpdateAppConfigRequest.newBuilder()
              .setConfig(
                  AppConfig.newBuilder()
                      .setAppName(name)
                      .setEventsCompactionConfig(
                          dev.contextengine.v1.EventsCompactionConfig.newBuilder()
                              .setCompactionInterval(interval)
                              .setOverlapSize(0))
                      .setSummarizer(
                          SummarizerConfig.newBuilder()
                              .setExtractive(ExtractiveSummarizerConfig.getDefaultInstance())))
              .build());
    }

    void settle() throws InterruptedException {
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (client
              .getCompactionStatus(
                  GetCompactionStatusRequest.newBuilder()
                      .setAppName(name)
                      .setUserId("u")
                      .setSessionId("s")
                      .build())
              .getRunning()
          && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
    }
  }

  static Part transfer(String id, String to) {
    return PluginTest.call(id, "transfer_to_agent", Map.of("agent_name", to));
  }

  static Content answer(String id) {
    return Content.builder()
        .role("user")
        .parts(
            List.of(
                Part.builder()
                    .functionResponse(
                        FunctionResponse.builder()
                            .id(id)
                            .name("start_refund")
                            .response(Map.of("status", "done"))
                            .build())
                    .build()))
        .build();
  }

  @Test
  void aRewoundTransferDoesNotRouteTheNextTurn() {
    App app =
        new App(
            "j-rewind-route",
            Part.fromText("hi"),
            transfer("t-1", "helper"),
            Part.fromText("helper here"),
            Part.fromText("root again"));
    app.say("one");
    List<Event> second = app.say("ask the helper");
    assertEquals(List.of("root", "root", "helper"), app.agents.calls);
    client.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(app.name)
            .setUserId("u")
            .setSessionId("s")
            .setRewindBeforeInvocationId(second.get(0).invocationId())
            .build());
    app.say("three");
    // google-adk routes on the log with the rewind applied: the root agent spoke last there
    assertEquals("root", app.agents.calls.get(3));
    // the runner's session has neither the rewound turn nor the rewind
    Session session =
        app.sessions.getSession(app.name, "u", "s", java.util.Optional.empty()).blockingGet();
    assertTrue(
        session.events().stream().noneMatch(e -> e.author().equals("helper")),
        session.events().toString());
    assertEquals(4, session.events().size());
  }

  @Test
  void aLongRunningCallAnsweredAfterASummaryCoveredItResumesItsInvocation() throws Exception {
    App app =
        new App(
            "j-lro-summary",
            PluginTest.call("r-1", "start_refund", Map.of("order", "o1")),
            Part.fromText("started"),
            Part.fromText("two"),
            Part.fromText("three"),
            Part.fromText("refunded"));
    app.compacting(1);
    List<Event> first = app.say("refund o1");
    app.settle();
    app.say("two");
    app.settle();
    app.say("three");
    app.settle();
    assertTrue(
        app.stored().stream().anyMatch(e -> e.getActions().hasCompaction()), "summaries were made");
    // ADK Java alone: IllegalStateException, No function call event found for function response IDs
    List<Event> answered = app.run(answer("r-1"));
    assertEquals("root", app.agents.calls.get(app.agents.calls.size() - 1));
    String call = first.get(0).invocationId();
    for (Event event : answered) {
      assertEquals(call, event.invocationId(), "yielded with the call's invocation");
    }
    List<dev.contextengine.v1.Event> stored = app.stored();
    dev.contextengine.v1.Event userAnswer =
        stored.stream()
            .filter(
                e ->
                    e.getContent().getPartsCount() > 0
                        && e.getContent().getParts(0).hasFunctionResponse()
                        && e.getAuthor().equals("user"))
            .findFirst()
            .orElseThrow();
    assertEquals(call, userAnswer.getInvocationId(), "stored with the call's invocation");
    List<dev.contextengine.v1.Event> conversation =
        stored.stream().filter(e -> !e.getActions().hasCompaction()).toList();
    assertEquals(call, conversation.get(conversation.size() - 1).getInvocationId());
  }

  @Test
  void aTransferIsAnsweredAsGoogleAdkAnswersIt() {
    App app = new App("j-transfer-answer", transfer("t-1", "helper"), Part.fromText("helper here"));
    app.say("ask the helper");
    dev.contextengine.v1.Event answer =
        app.stored().stream()
            .filter(e -> e.getActions().getTransferToAgent().equals("helper"))
            .findFirst()
            .orElseThrow();
    Value result =
        answer
            .getContent()
            .getParts(0)
            .getFunctionResponse()
            .getResponse()
            .getFieldsOrThrow("result");
    assertEquals(Value.KindCase.NULL_VALUE, result.getKindCase(), answer.toString());
  }

  static dev.contextengine.v1.Event event(String invocation, String text) {
    return dev.contextengine.v1.Event.newBuilder()
        .setInvocationId(invocation)
        .setAuthor("user")
        .setContent(
            dev.contextengine.v1.Content.newBuilder()
                .addParts(dev.contextengine.v1.Part.newBuilder().setText(text)))
        .build();
  }

  static dev.contextengine.v1.Event rewind(String invocation, String target) {
    return dev.contextengine.v1.Event.newBuilder()
        .setInvocationId(invocation)
        .setAuthor("user")
        .setActions(EventActions.newBuilder().setRewindBeforeInvocationId(target))
        .build();
  }

  static List<String> texts(List<dev.contextengine.v1.Event> events) {
    return events.stream()
        .map(e -> e.hasContent() ? e.getContent().getParts(0).getText() : "R")
        .toList();
  }

  @Test
  void rewindsApplyAsGoogleAdkAppliesThem() {
    // google-adk's own example (adk-semantics 6.1): a(i1) b(i1) c(i2) d(i2) REWIND(i2) e(i3) -> a,
    // b, e
    List<dev.contextengine.v1.Event> log =
        List.of(
            event("i1", "a"),
            event("i1", "b"),
            event("i2", "c"),
            event("i2", "d"),
            rewind("r1", "i2"),
            event("i3", "e"));
    assertEquals(List.of("a", "b", "e"), texts(RunnerView.live(log)));
    // an unknown invocation: only the rewind goes
    assertEquals(
        List.of("a", "b"),
        texts(RunnerView.live(List.of(event("i1", "a"), rewind("r1", "nope"), event("i1", "b")))));
    // a rewind inside a rewound stretch has no effect; one to a rewound-away invocation reaches
    // back to it
    List<dev.contextengine.v1.Event> nested =
        List.of(
            event("i1", "a"),
            event("i2", "b"),
            rewind("r1", "i1"),
            event("i3", "c"),
            rewind("r2", "i2"),
            event("i4", "d"));
    assertEquals(List.of("a", "d"), texts(RunnerView.live(nested)));
  }

  @Test
  void aMessageResumesOneInvocationOnly() {
    Event call1 =
        Event.builder()
            .id("e1")
            .invocationId("i1")
            .author("root")
            .content(
                Content.builder()
                    .role("model")
                    .parts(List.of(PluginTest.call("a", "start_refund", Map.of())))
                    .build())
            .build();
    Event call2 =
        Event.builder()
            .id("e2")
            .invocationId("i2")
            .author("root")
            .content(
                Content.builder()
                    .role("model")
                    .parts(List.of(PluginTest.call("b", "start_refund", Map.of())))
                    .build())
            .build();
    Event both =
        Event.builder()
            .id("e3")
            .invocationId("i3")
            .author("user")
            .content(
                Content.builder()
                    .role("user")
                    .parts(
                        List.of(answer("a").parts().get().get(0), answer("b").parts().get().get(0)))
                    .build())
            .build();
    Event unknown =
        Event.builder().id("e4").invocationId("i3").author("user").content(answer("c")).build();
    Event one =
        Event.builder().id("e5").invocationId("i3").author("user").content(answer("b")).build();
    assertEquals("i2", InvocationAliases.resumedInvocation(List.of(call1, call2), one));
    assertNull(
        InvocationAliases.resumedInvocation(List.of(call1, call2), both),
        "two invocations: a new one");
    assertNull(
        InvocationAliases.resumedInvocation(List.of(call1, call2), unknown), "no call: a new one");
    assertNull(
        InvocationAliases.resumedInvocation(List.of(call1, call2), message("text")), "no response");
  }

  static Event message(String text) {
    return Event.builder()
        .id("e6")
        .invocationId("i3")
        .author("user")
        .content(Content.fromParts(Part.fromText(text)))
        .build();
  }
}
