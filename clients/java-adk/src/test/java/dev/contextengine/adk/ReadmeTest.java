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
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.EventsCompactionConfig;
import dev.contextengine.v1.GetAppConfigRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * README "Using it from ADK Java": its first block is ReadmeExample's, its context tools block
 * ContextToolsAgent's, and both run.
 */
class ReadmeTest {
  static final Path EXAMPLE =
      TestSidecar.REPO.resolve("clients/java-adk/examples/dev/contextengine/adk/examples/ReadmeExample.java");
  static final Path TOOLS_EXAMPLE =
      TestSidecar.REPO.resolve("clients/java-adk/examples/dev/contextengine/adk/examples/ContextToolsAgent.java");

  static String dedent(List<String> lines) {
    int indent = lines.stream().filter(l -> !l.isBlank())
        .mapToInt(l -> l.length() - l.stripLeading().length()).min().orElse(0);
    return lines.stream().map(l -> l.isBlank() ? "" : l.substring(indent)).collect(Collectors.joining("\n"));
  }

  @Test
  void theReadmeBlockIsTheExample() throws Exception {
    String readme = Files.readString(TestSidecar.REPO.resolve("README.md"), StandardCharsets.UTF_8);
    String[] parts = readme.split("\n## Using it from ADK Java\n", 2);
    assertEquals(2, parts.length, "README.md has the section");
    Matcher block = Pattern.compile("```java\n([\\s\\S]*?)```").matcher(parts[1].split("\n## ", 2)[0]);
    assertTrue(block.find());
    // the example's block, and the closing brace of its try that the README shows
    assertEquals(marked(EXAMPLE) + "\n}", block.group(1).strip());
  }

  /** The lines of an example between its README markers. */
  static String marked(Path example) throws java.io.IOException {
    List<String> lines = Files.readAllLines(example, StandardCharsets.UTF_8);
    int begin = -1;
    int end = -1;
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).strip().equals("// README begin")) {
        begin = i;
      } else if (lines.get(i).strip().equals("// README end")) {
        end = i;
      }
    }
    assertTrue(begin >= 0 && end > begin, "markers in " + example);
    return dedent(lines.subList(begin + 1, end)).strip();
  }

  @Test
  void theContextToolsBlockIsItsExampleAndRuns() throws Exception {
    String readme = Files.readString(TestSidecar.REPO.resolve("README.md"), StandardCharsets.UTF_8);
    Matcher block =
        Pattern.compile("```java\n([\\s\\S]*?)```").matcher(readme.split("\n## Using it from ADK Java\n", 2)[1].split("\n## ", 2)[0]);
    String found = "";
    while (block.find() && found.isEmpty()) {
      found = block.group(1).contains("new ContextEngineContextTools(") ? block.group(1).strip() : "";
    }
    assertEquals(marked(TOOLS_EXAMPLE), found);

    String app = TestSidecar.uniqueApp("j-tools-readme");
    try (ContextEngineClient client = ContextEngineClient.connect(TestSidecar.shared())) {
      client.updateAppConfig(UpdateAppConfigRequest.newBuilder().setConfig(AppConfig.newBuilder().setAppName(app)
          .setEventsCompactionConfig(EventsCompactionConfig.newBuilder().setCompactionInterval(5).setOverlapSize(1))).build());
      PluginTest.Scripted model = new PluginTest.Scripted(
          PluginTest.call("c1", "context_status", Map.of()), Part.fromText("All fine."));
      LlmAgent root = ContextToolsAgent.agent(client, app, model);
      AppConfig config = client.getAppConfig(GetAppConfigRequest.newBuilder().setAppName(app).build()).getConfig();
      assertTrue(config.getContextTools().getEnabled());
      assertEquals(5, config.getEventsCompactionConfig().getCompactionInterval(), "the rest is kept");
      ContextEngineSessionService sessions = new ContextEngineSessionService(client);
      Runner runner = Runner.builder().agent(root).appName(app).sessionService(sessions)
          .artifactService(new InMemoryArtifactService()).plugins(new ContextEnginePlugin(client)).build();
      sessions.createSession(app, "u", Map.of(), "s").blockingGet();
      PluginTest.say(runner, "s", "How full is your context?");
      List<Content> last = model.requests.get(model.requests.size() - 1);
      assertTrue(PluginTest.text(last).contains("current_turn_starts_at"), PluginTest.text(last));
    }
  }

  @Test
  void theExampleRuns() {
    PluginTest.Scripted model = new PluginTest.Scripted(Part.fromText("Sunny in Lisbon."));
    LlmAgent root = LlmAgent.builder().name("root").instruction("You plan trips.").model(model).build();
    String id = ReadmeExample.run(TestSidecar.shared(), root);
    try (ContextEngineClient client = ContextEngineClient.connect(TestSidecar.shared())) {
      Session stored = new ContextEngineSessionService(client).getSession("travel", "zoe", id, Optional.empty()).blockingGet();
      assertEquals(List.of("user", "root"), stored.events().stream().map(Event::author).toList());
      assertEquals("Porto", stored.state().get("user:home"));
      assertEquals(Map.of("user:home", "Porto"), stored.state());
    }
  }
}
