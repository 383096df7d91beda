package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The Java guide's blocks (clients/java/README.md) are examples/ReadmeExample.java,
 * examples/ContextViewExample.java ("contents since"), examples/Renderings.java and
 * examples/ContextToolsExample.java and examples/CompactionExample.java, and they run and print
 * what they say (the renderings one in RenderingsExampleTest, against the fake providers).
 */
class ReadmeTest {
  private static final String GUIDE = "clients/java/README.md";
  private static final Path EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/ReadmeExample.java");
  private static final Path SINCE_EXAMPLE =
      Sidecar.REPO.resolve(
          "clients/java/examples/dev/contextengine/examples/ContextViewExample.java");
  private static final Path RENDERINGS_EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/Renderings.java");
  private static final Path TOOLS_EXAMPLE =
      Sidecar.REPO.resolve(
          "clients/java/examples/dev/contextengine/examples/ContextToolsExample.java");
  private static final Path COMPACTION_EXAMPLE =
      Sidecar.REPO.resolve(
          "clients/java/examples/dev/contextengine/examples/CompactionExample.java");

  /** The {@code index}-th ```java block of the guide. */
  private static String block(int index) throws IOException {
    List<String> blocks = Guide.blocks(GUIDE, "java");
    assertTrue(blocks.size() > index, "a ```java block number " + (index + 1) + " in " + GUIDE);
    return blocks.get(index);
  }

  private static String marked(Path example) throws IOException {
    return Guide.marked(example);
  }

  /** What an example prints, run in a JVM of its own against the shared sidecar. */
  private static List<String> run(String mainClass) throws Exception {
    return ExampleRun.lines(mainClass, Map.of());
  }

  @Test
  void theGuideHasItsFiveBlocks() throws IOException {
    assertEquals(5, Guide.blocks(GUIDE, "java").size());
  }

  @Test
  void theReadmeBlockIsTheExample() throws IOException {
    assertEquals(marked(EXAMPLE), block(0).strip());
  }

  @Test
  void theExampleRunsAndPrintsWhatItsCommentsSay() throws Exception {
    assertEquals(
        List.of("1 1", "NOT_FOUND SESSION_NOT_FOUND"),
        run("dev.contextengine.examples.ReadmeExample"));
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

  /** The ```java block of the guide that holds {@code text}. */
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

  @Test
  void theCompactionBlockIsItsExampleAndRuns() throws Exception {
    assertEquals(marked(COMPACTION_EXAMPLE), blockWith("ce.expandSummary(").strip());
    List<String> lines = run("dev.contextengine.examples.CompactionExample");
    assertEquals("1", lines.get(0), "one content: the summary");
    String summary = String.join("\n", lines.subList(1, lines.size() - 1));
    assertTrue(summary.matches("(?s).*TP1351.*Memmo Alfama.*"), summary);
    assertEquals("1 2 3 4", lines.get(lines.size() - 1));
  }
}
