package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** An example's {@code main} run in a JVM of its own, against the shared sidecar. */
public final class ExampleRun {
  private ExampleRun() {}

  /**
   * The lines {@code mainClass} prints (stdout and stderr), run with this JVM's class path and
   * {@code CONTEXTENGINE_TARGET} set to the shared sidecar, plus {@code environment}; it must exit
   * with 0 within 60 s.
   */
  public static List<String> lines(String mainClass, Map<String, String> environment)
      throws Exception {
    ProcessBuilder builder =
        new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp",
            System.getProperty("java.class.path"),
            mainClass);
    builder.environment().put("CONTEXTENGINE_TARGET", Sidecar.shared());
    builder.environment().putAll(environment);
    builder.redirectErrorStream(true);
    Process process = builder.start();
    assertTrue(process.waitFor(60, TimeUnit.SECONDS), "the example finished");
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, process.exitValue(), out);
    return Arrays.asList(out.strip().split("\n"));
  }
}
