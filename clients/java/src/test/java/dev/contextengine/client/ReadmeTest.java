package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The README's Java section's blocks are examples/ReadmeExample.java,
 * examples/ContextViewExample.java ("contents since"), examples/Renderings.java and
 * examples/ContextToolsExample.java, and they run and print what they say (the renderings one in
 * RenderingsExampleTest, against the fake providers).
 */
class ReadmeTest {
  private static final Path EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/ReadmeExample.java");
  private static final Path SINCE_EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/ContextViewExample.java");
  private static final Path RENDERINGS_EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/Renderings.java");
  private static final Path TOOLS_EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/ContextToolsExample.java");

  private static String dedent(List<String> lines) {
    int indent =
        lines.stream()
            .filter(l -> !l.isBlank())
            .mapToInt(l -> l.length() - l.stripLeading().length())
            .min()
            .orElse(0);
    return lines.stream()
        .map(l -> l.isBlank() ? "" : l.substring(indent))
        .collect(Collectors.joining("\n"));
  }

  /** The {@code index}-th ```java block under ## Java. */
  private static String block(int index) throws IOException {
    String readme = Files.readString(Sidecar.REPO.resolve("README.md"), StandardCharsets.UTF_8);
    String[] parts = readme.split("\n## Java\n", 2);
    assertEquals(2, parts.length, "README.md has a ## Java section");
    String section = parts[1].split("\n## ", 2)[0];
    Matcher block = Pattern.compile("```java\n([\\s\\S]*?)```").matcher(section);
    for (int i = 0; i <= index; i++) {
      assertTrue(block.find(), "a ```java block number " + (i + 1) + " under ## Java");
    }
    return block.group(1);
  }

  /** The lines of an example between its README markers. */
  private static String marked(Path example) throws IOException {
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

  /** What an example prints, run in a JVM of its own against the shared sidecar. */
  private static List<String> run(String mainClass) throws Exception {
    return ExampleRun.lines(mainClass, Map.of());
  }

  @Test
  void theReadmeBlockIsTheExample() throws IOException {
    assertEquals(marked(EXAMPLE), block(0).strip());
  }

  @Test
  void theExampleRunsAndPrintsWhatItsCommentsSay() throws Exception {
    assertEquals(List.of("1 1", "NOT_FOUND SESSION_NOT_FOUND"), run("dev.contextengine.examples.ReadmeExample"));
  }

  @Test
  void theContentsSinceBlockIsItsExampleAndRuns() throws Exception {
    assertEquals(marked(SINCE_EXAMPLE), block(1).strip());
    assertEquals(List.of("1 2", "2 0"), run("dev.contextengine.examples.ContextViewExample"));
  }

  @Test
  void theRenderingsBlockIsItsExample() throws IOException {
    assertEquals(marked(RENDERINGS_EXAMPLE), block(2).strip());
  }

  /** The ```java block under ## Java that holds {@code text}. */
  private static String blockWith(String text) throws IOException {
    for (int i = 0; ; i++) {
      String block = block(i);
      if (block.contains(text)) {
        return block;
      }
    }
  }

  @Test
  void theContextToolsBlockIsItsExampleAndRuns() throws Exception {
    assertEquals(marked(TOOLS_EXAMPLE), blockWith("ce.contextTools(").strip());
    assertEquals(
        List.of("7 true", "true 1", "true"), run("dev.contextengine.examples.ContextToolsExample"));
  }
}
