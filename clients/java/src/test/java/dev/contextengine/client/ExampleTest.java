package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.contextengine.examples.AgentLoop;
import dev.contextengine.v1.Content;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** examples/AgentLoop runs an agent loop against a real server and prints the expected context. */
class ExampleTest {
  @Test
  void theAgentLoopPrintsTheContext() {
    PrintStream original = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    List<Content> contents;
    try {
      System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
      contents = AgentLoop.agentLoop(Sidecar.shared(), "What is 17 * 23?");
    } finally {
      System.setOut(original);
    }
    assertEquals(4, contents.size());
    List<String> lines =
        Arrays.asList(captured.toString(StandardCharsets.UTF_8).strip().split("\n"));
    assertTrue(
        lines.get(0).matches("^context for calculator in session \\S+: 4 contents, \\d+ tokens.*"),
        lines.get(0));
    assertEquals(
        List.of(
            "  user  | What is 17 * 23?",
            "  model | call multiply({\"a\":17,\"b\":23})",
            "  user  | multiply -> {\"result\":391}",
            "  model | 17 * 23 = 391"),
        lines.subList(1, lines.size()));
  }

  @Test
  void theExampleFailsClearlyWhenTheServerIsDown() {
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class,
            () -> AgentLoop.agentLoop("127.0.0.1:" + Sidecar.closedPort(), "What is 17 * 23?"));
    assertEquals(Status.Code.UNAVAILABLE, e.code());
    assertTrue(e.getMessage().contains("cannot reach the contextengine sidecar"), e.getMessage());
  }
}
