package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.contextengine.v1.CreateSessionRequest;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * W3C trace context from the client: a real {@code contextengine serve} started here with traces on
 * ({@code --tracing-otlp-endpoint} to a port nobody listens on: spans are made, their export fails
 * quietly) and JSON logs, whose line of each RPC names the trace id of the RPC's span. A call made
 * under a span of the agent's must log that span's trace id (the sidecar's span is its child); with
 * {@code traceContext(false)} it must not. And the client works without {@code opentelemetry-api}
 * on the class path (a JVM of its own without it).
 */
class TracingTest {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static Sidecar sidecar;

  @BeforeAll
  static void start() {
    sidecar =
        Sidecar.start(
            null,
            List.of(
                "--log-format",
                "json",
                "--log-level",
                "INFO",
                "--tracing-otlp-endpoint",
                "http://127.0.0.1:9"));
  }

  @AfterAll
  static void stop() {
    sidecar.close();
  }

  private static String hex(int bytes) {
    byte[] value = new byte[bytes];
    RANDOM.nextBytes(value);
    return HexFormat.of().formatHex(value);
  }

  /** Creates a session of a new app under a (sampled) span of {@code traceId}; the app's name. */
  static String createUnderSpan(ContextEngineClient client, String traceId) {
    String app = "java-trace-" + UUID.randomUUID();
    SpanContext parent =
        SpanContext.create(traceId, hex(8), TraceFlags.getSampled(), TraceState.getDefault());
    Scope scope = Span.wrap(parent).makeCurrent();
    try {
      client.createSession(
          CreateSessionRequest.newBuilder().setAppName(app).setUserId("u").build());
    } finally {
      scope.close();
    }
    return app;
  }

  /** The trace id the sidecar logged for the CreateSession of {@code app} (waits for its line). */
  static String loggedTraceId(Sidecar sidecar, String app) throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (System.nanoTime() < deadline) {
      for (String line : sidecar.log().split("\n")) {
        if (!line.startsWith("{")) {
          continue;
        }
        JsonObject record = JsonParser.parseString(line).getAsJsonObject();
        JsonElement appName = record.get("app");
        JsonElement method = record.get("method");
        if (appName != null
            && app.equals(appName.getAsString())
            && method != null
            && method.getAsString().endsWith("CreateSession")) {
          JsonElement traceId = record.get("trace_id");
          return traceId == null ? "" : traceId.getAsString();
        }
      }
      Thread.sleep(50);
    }
    return fail("no CreateSession line for " + app + " in the sidecar's log:\n" + sidecar.log());
  }

  @Test
  void theSidecarsRpcSpanJoinsTheCurrentSpansTrace() throws InterruptedException {
    try (ContextEngineClient client =
        ContextEngineClient.builder().target(sidecar.target).build()) {
      String traceId = hex(16);
      String app = createUnderSpan(client, traceId);
      assertEquals(traceId, loggedTraceId(sidecar, app));
    }
  }

  @Test
  void nothingIsSentWithTraceContextOff() throws InterruptedException {
    try (ContextEngineClient client =
        ContextEngineClient.builder().target(sidecar.target).traceContext(false).build()) {
      String traceId = hex(16);
      String logged = loggedTraceId(sidecar, createUnderSpan(client, traceId));
      assertTrue(
          logged.matches("[0-9a-f]{32}"), "the sidecar traces the RPC on its own: " + logged);
      assertNotEquals(traceId, logged);
    }
  }

  @Test
  void theClientWorksWithoutOpenTelemetry() throws IOException, InterruptedException {
    Path target = Path.of("target");
    List<String> entries = new ArrayList<>();
    entries.add(target.resolve("classes").toString());
    entries.add(target.resolve("test-classes").toString());
    for (String entry :
        Files.readString(target.resolve("test-classpath.txt"), StandardCharsets.UTF_8)
            .trim()
            .split(File.pathSeparator)) {
      if (!entry.contains("opentelemetry")) {
        entries.add(entry);
      }
    }
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child =
        new ProcessBuilder(
                java,
                "-cp",
                entries.stream().collect(Collectors.joining(File.pathSeparator)),
                WithoutOpenTelemetry.class.getName(),
                sidecar.target)
            .redirectErrorStream(true)
            .start();
    assertTrue(child.waitFor(60, TimeUnit.SECONDS));
    String output = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, child.exitValue(), output);
    assertEquals("no opentelemetry-api; session created", output.trim());
  }

  /** Run in a JVM without {@code opentelemetry-api}: a call works, the API is really absent. */
  static final class WithoutOpenTelemetry {
    private WithoutOpenTelemetry() {}

    public static void main(String[] args) {
      try {
        Class.forName("io.opentelemetry.context.Context");
        System.out.println("opentelemetry-api is on the class path");
        System.exit(2);
      } catch (ClassNotFoundException expected) {
        // the point of the exercise
      }
      try (ContextEngineClient client = ContextEngineClient.builder().target(args[0]).build()) {
        client.createSession(
            CreateSessionRequest.newBuilder().setAppName("java-no-otel").setUserId("u").build());
      }
      System.out.println("no opentelemetry-api; session created");
    }
  }
}
