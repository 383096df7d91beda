package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.adk.tools.Annotations.Schema;
import com.google.adk.tools.BaseTool;
import com.google.adk.tools.FunctionTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionDeclaration;
import com.google.genai.types.FunctionResponse;
import com.google.genai.types.Part;
import com.google.protobuf.Struct;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.client.ContextTools;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.ContextEdit;
import dev.contextengine.v1.ContextToolsConfig;
import dev.contextengine.v1.ListEventsRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The context tools in ADK Java's own Runner, through the toolset drop-in, against a real sidecar
 * (tests/adk/test_context_tools.py for ADK Java): a scripted model reads a bulky report, calls
 * context_status, hides the report's call and result, and searches for a fact in it. The runner
 * appends the calls and answers as for any tool; the engine records the hide on the answer, the
 * next model call gets a stub instead of the report, and a rewind before the hiding turn (the
 * engine's RewindSession: ADK Java's Runner has no rewind) brings the report back.
 */
public class ContextToolsTest {
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

  public static Map<String, Object> fetchReport(@Schema(name = "topic") String topic) {
    List<String> rows = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      rows.add("row " + i + ": measurements of " + topic + " with many digits 0123456789");
    }
    return Map.of("report", rows, "code", "7Q-ALPHA");
  }

  static void enable(String app, boolean enabled) {
    client.updateAppConfig(
        UpdateAppConfigRequest.newBuilder()
            .setConfig(
                AppConfig.newBuilder()
                    .setAppName(app)
                    .setContextTools(ContextToolsConfig.newBuilder().setEnabled(enabled)))
            .build());
  }

  static Map<String, Object> args(Object... keysAndValues) {
    Map<String, Object> out = new HashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      out.put((String) keysAndValues[i], keysAndValues[i + 1]);
    }
    return out;
  }

  /** The response of the function-response part that ends a request's contents. */
  static Map<String, Object> lastAnswer(List<Content> request) {
    Content last = request.get(request.size() - 1);
    FunctionResponse response = last.parts().orElseThrow().get(0).functionResponse().orElseThrow();
    return response.response().orElseThrow();
  }

  static Runner runner(String app, LlmAgent agent, ContextEngineSessionService sessions) {
    return Runner.builder()
        .agent(agent)
        .appName(app)
        .sessionService(sessions)
        .artifactService(new InMemoryArtifactService())
        .plugins(new ContextEnginePlugin(client))
        .build();
  }

  @Test
  void theModelHidesAReportAndFindsAFactAgain() {
    String app = Sidecar.uniqueApp("j-tools");
    enable(app, true);
    PluginTest.Scripted model =
        new PluginTest.Scripted(
            // 1 user, 2 call, 3 report, 4 text
            PluginTest.call("c1", "fetchReport", Map.of("topic", "tides")),
            Part.fromText("The code is in it."),
            // 5 user, 6 status call, 7 status, 8 hide call, 9 hide answer, 10 text
            PluginTest.call("c2", "context_status", Map.of()),
            PluginTest.call(
                "c3", "context_hide", args("first", 2, "last", 3, "stub", "The tides report.")),
            Part.fromText("Hidden."),
            // 11 user, 12 search call, 13 results, 14 text
            PluginTest.call("c4", "context_search", Map.of("query", "code")),
            Part.fromText("7Q-ALPHA"),
            Part.fromText("Back."));
    ContextEngineContextTools toolset = new ContextEngineContextTools(client);
    LlmAgent agent =
        LlmAgent.builder()
            .name("root")
            .instruction("You read reports.")
            .model(model)
            .tools(FunctionTool.create(ContextToolsTest.class, "fetchReport"), toolset)
            .build();
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner = runner(app, agent, sessions);
    Session session = sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    PluginTest.say(runner, session.id(), "Read the tides report.");
    PluginTest.say(runner, session.id(), "Tidy up your context.");
    PluginTest.say(runner, session.id(), "What was the code?");

    List<List<Content>> requests = model.requests;
    assertEquals(7, requests.size());
    Map<String, Object> status = lastAnswer(requests.get(3));
    assertEquals(true, status.get("ok"));
    assertEquals(5, status.get("current_turn_starts_at"), "whole numbers come back as integers");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> largest = (List<Map<String, Object>>) status.get("largest_events");
    assertEquals(3, largest.get(0).get("sequence"));
    Map<String, Object> hidden = lastAnswer(requests.get(4));
    assertEquals(true, hidden.get("ok"), hidden.toString());
    assertEquals("The tides report.", hidden.get("stub"));
    // the model call after the hide gets the stub, not the report
    String after = PluginTest.text(requests.get(4));
    assertFalse(after.contains("row 59"), after);
    assertTrue(after.contains("The tides report."), after);
    assertTrue(PluginTest.text(requests.get(3)).contains("row 59"));
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> results =
        (List<Map<String, Object>>) lastAnswer(requests.get(6)).get("results");
    Map<Object, Object> found = new HashMap<>();
    for (Map<String, Object> result : results) {
      found.put(result.get("sequence"), result.get("where"));
    }
    assertEquals("hidden (2..3)", found.get(3), found.toString());
    assertFalse(found.containsKey(11), found.toString());

    // the engine recorded the edit on the answer event, with the call's id; ADK's events lack it
    List<dev.contextengine.v1.Event> stored =
        client
            .listEvents(
                ListEventsRequest.newBuilder()
                    .setAppName(app)
                    .setUserId("u")
                    .setSessionId(session.id())
                    .build())
            .getEventsList();
    List<dev.contextengine.v1.Event> edited = new ArrayList<>();
    for (dev.contextengine.v1.Event event : stored) {
      if (event.getContextEditsCount() > 0) {
        edited.add(event);
      }
    }
    assertEquals(1, edited.size());
    assertEquals(9, edited.get(0).getSequence());
    ContextEdit edit = edited.get(0).getContextEdits(0);
    assertEquals(2, edit.getHide().getRange().getFirst());
    assertEquals(3, edit.getHide().getRange().getLast());
    assertEquals("c3", edited.get(0).getContent().getParts(0).getFunctionResponse().getId());
    Session adk =
        sessions.getSession(app, "u", session.id(), java.util.Optional.empty()).blockingGet();
    assertFalse(adk.events().get(8).toJson().contains("contextEdits"));

    // a rewind before the hiding turn (the engine's: ADK Java's Runner has none) brings it back
    client.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(app)
            .setUserId("u")
            .setSessionId(session.id())
            .setRewindBeforeInvocationId(adk.events().get(4).invocationId())
            .build());
    PluginTest.say(runner, session.id(), "Again?");
    String back = PluginTest.text(requests.get(requests.size() - 1));
    assertTrue(back.contains("row 59"), back);
    assertFalse(back.contains("The tides report."), back);
  }

  @Test
  void theDeclarationsAreTheEnginesAndTheFilterKeepsSome() {
    List<BaseTool> all =
        new ContextEngineContextTools(client).getTools(null).toList().blockingGet();
    List<String> names = new ArrayList<>();
    for (BaseTool tool : all) {
      names.add(tool.name());
    }
    assertEquals(ContextTools.NAMES, Set.copyOf(names));
    assertEquals(7, names.size());
    // every declaration converts to ADK Java's without losing a field
    List<Struct> engine =
        client.listContextTools(Sidecar.uniqueApp("j-tools"), "").getFunctionDeclarationsList();
    for (int i = 0; i < engine.size(); i++) {
      FunctionDeclaration declaration = all.get(i).declaration().orElseThrow();
      assertEquals(
          ContextTools.json(engine.get(i)),
          ContextTools.json(AdkConvert.structOf(declaration)),
          declaration.toJson());
      assertEquals(declaration.description().orElseThrow(), all.get(i).description());
    }
    ContextEngineContextTools some =
        new ContextEngineContextTools(client, List.of("context_status", "context_search"));
    List<String> kept = new ArrayList<>();
    for (BaseTool tool : some.getTools(null).toList().blockingGet()) {
      kept.add(tool.name());
    }
    assertEquals(List.of("context_status", "context_search"), kept);
  }

  @Test
  void toolsAnAppHasNotEnabledFailTheRun() {
    String app = Sidecar.uniqueApp("j-tools-off");
    enable(app, false);
    PluginTest.Scripted model =
        new PluginTest.Scripted(PluginTest.call("c1", "context_status", Map.of()));
    LlmAgent agent =
        LlmAgent.builder()
            .name("root")
            .instruction("You read reports.")
            .model(model)
            .tools(new ContextEngineContextTools(client))
            .build();
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner = runner(app, agent, sessions);
    Session session = sessions.createSession(app, "u", Map.of(), "s").blockingGet();
    ContextEngineException error =
        assertThrows(
            ContextEngineException.class, () -> PluginTest.say(runner, session.id(), "Status?"));
    assertEquals("CONTEXT_TOOLS_DISABLED", error.reason());
    List<Event> events =
        sessions
            .getSession(app, "u", session.id(), java.util.Optional.empty())
            .blockingGet()
            .events();
    assertEquals(
        "context_status",
        events.get(events.size() - 1).functionCalls().get(0).name().orElseThrow(),
        "the call was appended, no answer");
  }
}
