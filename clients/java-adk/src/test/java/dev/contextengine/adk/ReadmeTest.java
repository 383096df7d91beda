package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import dev.contextengine.adk.examples.ContextToolsAgent;
import dev.contextengine.adk.examples.ReadmeExample;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.Guide;
import dev.contextengine.client.Sidecar;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.EventsCompactionConfig;
import dev.contextengine.v1.GetAppConfigRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The ADK Java guide (clients/java-adk/README.md): its first block is ReadmeExample's, its context
 * tools block ContextToolsAgent's, and both run.
 */
class ReadmeTest {
  static final String GUIDE = "clients/java-adk/README.md";
  static final Path EXAMPLE =
      Sidecar.REPO.resolve(
          "clients/java-adk/examples/dev/contextengine/adk/examples/ReadmeExample.java");
  static final Path TOOLS_EXAMPLE =
      Sidecar.REPO.resolve(
          "clients/java-adk/examples/dev/contextengine/adk/examples/ContextToolsAgent.java");

  @Test
  void theReadmeBlockIsTheExample() throws Exception {
    List<String> blocks = Guide.blocks(GUIDE, "java");
    assertEquals(2, blocks.size(), GUIDE + " has two ```java blocks");
    // the example's block, and the closing brace of its try that the guide shows
    assertEquals(marked(EXAMPLE) + "\n}", blocks.get(0).strip());
  }

  static String marked(Path example) throws java.io.IOException {
    return Guide.marked(example);
  }

  @Test
  void theContextToolsBlockIsItsExampleAndRuns() throws Exception {
    String found =
        Guide.blocks(GUIDE, "java").stream()
            .filter(b -> b.contains("new ContextEngineContextTools("))
            .findFirst()
            .orElse("")
            .strip();
    assertEquals(marked(TOOLS_EXAMPLE), found);

    String app = Sidecar.uniqueApp("j-tools-readme");
    try (ContextEngineClient client = ContextEngineClient.connect(Sidecar.shared())) {
      client.updateAppConfig(
          UpdateAppConfigRequest.newBuilder()
              .setConfig(
                  AppConfig.newBuilder()
                      .setAppName(app)
                      .setEventsCompactionConfig(
                          EventsCompactionConfig.newBuilder()
                              .setCompactionInterval(5)
                              .setOverlapSize(1)))
              .build());
      PluginTest.Scripted model =
          new PluginTest.Scripted(
              PluginTest.call("c1", "context_status", Map.of()), Part.fromText("All fine."));
      LlmAgent root = ContextToolsAgent.agent(client, app, model);
      AppConfig config =
          client.getAppConfig(GetAppConfigRequest.newBuilder().setAppName(app).build()).getConfig();
      assertTrue(config.getContextTools().getEnabled());
      assertEquals(
          5, config.getEventsCompactionConfig().getCompactionInterval(), "the rest is kept");
      ContextEngineSessionService sessions = new ContextEngineSessionService(client);
      Runner runner =
          Runner.builder()
              .agent(root)
              .appName(app)
              .sessionService(sessions)
              .artifactService(new InMemoryArtifactService())
              .plugins(new ContextEnginePlugin(client))
              .build();
      sessions.createSession(app, "u", Map.of(), "s").blockingGet();
      PluginTest.say(runner, "s", "How full is your context?");
      List<Content> last = model.requests.get(model.requests.size() - 1);
      assertTrue(PluginTest.text(last).contains("current_turn_starts_at"), PluginTest.text(last));
    }
  }

  @Test
  void theExampleRuns() {
    PluginTest.Scripted model = new PluginTest.Scripted(Part.fromText("Sunny in Lisbon."));
    LlmAgent root =
        LlmAgent.builder().name("root").instruction("You plan trips.").model(model).build();
    String id = ReadmeExample.run(Sidecar.shared(), root);
    try (ContextEngineClient client = ContextEngineClient.connect(Sidecar.shared())) {
      Session stored =
          new ContextEngineSessionService(client)
              .getSession("travel", "zoe", id, Optional.empty())
              .blockingGet();
      assertEquals(List.of("user", "root"), stored.events().stream().map(Event::author).toList());
      assertEquals("Porto", stored.state().get("user:home"));
      assertEquals(Map.of("user:home", "Porto"), stored.state());
    }
  }
}
