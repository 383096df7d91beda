package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.agents.LlmAgent;
import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import com.google.genai.types.Part;
import dev.contextengine.adk.examples.ReadmeExample;
import dev.contextengine.client.ContextEngineClient;
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

/** README "Using it from ADK Java": its block is ReadmeExample's, and that runs. */
class ReadmeTest {
  static final Path EXAMPLE =
      TestSidecar.REPO.resolve("clients/java-adk/examples/dev/contextengine/adk/examples/ReadmeExample.java");

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
    List<String> lines = Files.readAllLines(EXAMPLE, StandardCharsets.UTF_8);
    int begin = -1;
    int end = -1;
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).strip().equals("// README begin")) {
        begin = i;
      } else if (lines.get(i).strip().equals("// README end")) {
        end = i;
      }
    }
    // the example's block, and the closing brace of its try that the README shows
    String example = dedent(lines.subList(begin + 1, end)) + "\n}";
    assertEquals(example.strip(), block.group(1).strip());
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
