package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The README's Java section is examples/ReadmeExample.java, and it runs and prints what it says. */
class ReadmeTest {
  private static final Path EXAMPLE =
      Sidecar.REPO.resolve("clients/java/examples/dev/contextengine/examples/ReadmeExample.java");

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

  @Test
  void theReadmeBlockIsTheExample() throws IOException {
    String readme = Files.readString(Sidecar.REPO.resolve("README.md"), StandardCharsets.UTF_8);
    String[] parts = readme.split("\n## Java\n", 2);
    assertEquals(2, parts.length, "README.md has a ## Java section");
    String section = parts[1].split("\n## ", 2)[0];
    Matcher block = Pattern.compile("```java\n([\\s\\S]*?)```").matcher(section);
    assertTrue(block.find(), "a ```java block under ## Java");
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
    assertTrue(begin >= 0 && end > begin, "markers in " + EXAMPLE);
    assertEquals(dedent(lines.subList(begin + 1, end)).strip(), block.group(1).strip());
  }

  @Test
  void theExampleRunsAndPrintsWhatItsCommentsSay() throws Exception {
    ProcessBuilder builder =
        new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp",
            System.getProperty("java.class.path"),
            "dev.contextengine.examples.ReadmeExample");
    builder.environment().put("CONTEXTENGINE_TARGET", Sidecar.shared());
    builder.redirectErrorStream(true);
    Process process = builder.start();
    assertTrue(process.waitFor(60, TimeUnit.SECONDS), "the example finished");
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, process.exitValue(), out);
    assertEquals(List.of("1 1", "NOT_FOUND SESSION_NOT_FOUND"), Arrays.asList(out.strip().split("\n")));
  }
}
