package dev.contextengine.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * The code blocks of a guide (clients/java/README.md, clients/kotlin/README.md, ...), and the part
 * of an example that a guide shows (between its {@code // README begin} and {@code // README end}
 * lines), for the tests that check that the two agree.
 */
public final class Guide {
  private Guide() {}

  /**
   * The fenced blocks in {@code language} of the guide at {@code page} (from the repository's
   * root).
   */
  public static List<String> blocks(String page, String language) throws IOException {
    String text = Files.readString(Sidecar.REPO.resolve(page), StandardCharsets.UTF_8);
    Matcher block =
        Pattern.compile("^```" + Pattern.quote(language) + "\n([\\s\\S]*?)^```", Pattern.MULTILINE)
            .matcher(text);
    List<String> blocks = new ArrayList<>();
    while (block.find()) {
      blocks.add(block.group(1));
    }
    return blocks;
  }

  /** The lines of an example between its markers, without their common indentation. */
  public static String marked(Path example) throws IOException {
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
    if (begin < 0 || end <= begin) {
      throw new AssertionError("no // README begin / end markers in " + example);
    }
    return dedent(lines.subList(begin + 1, end)).strip();
  }

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
}
