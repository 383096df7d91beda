package dev.contextengine.bench;

import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.SessionRef;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.Part;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.stream.Collectors;

/**
 * Latency of AppendEvent and BuildContext from the Java client, one blocking call at a time, in the
 * agent-loop pattern of clients/typescript/bench/latency.ts (a prefilled session, then per
 * iteration one appended event and one context). {@code python -m bench clients} runs it beside the
 * Python and TypeScript clients against the same sidecar.
 *
 * <pre>
 * java -cp ... dev.contextengine.bench.Latency --target 127.0.0.1:50151 [--iterations 500]
 *     [--prefill 40] [--warmup 50] [--json]
 * </pre>
 */
public final class Latency {
  private Latency() {}

  static Event turn(int i) {
    boolean user = i % 2 == 0;
    String text =
        user
            ? "Question number " + i + ": what about city " + i + "?"
            : "Answer " + i + ": sunny, " + (i % 30) + " C.";
    return Event.newBuilder()
        .setAuthor(user ? "user" : "assistant")
        .setInvocationId("inv-" + (i / 2))
        .setContent(
            Content.newBuilder()
                .setRole(user ? "user" : "model")
                .addParts(Part.newBuilder().setText(text)))
        .build();
  }

  static void runSession(
      ContextEngineClient ce,
      String app,
      int iterations,
      int prefill,
      List<Double> append,
      List<Double> build) {
    SessionRef ref =
        SessionRef.of(
            ce.createSession(
                    CreateSessionRequest.newBuilder().setAppName(app).setUserId("bench").build())
                .getSession());
    AppendEventsRequest.Builder batch =
        AppendEventsRequest.newBuilder()
            .setAppName(app)
            .setUserId("bench")
            .setSessionId(ref.sessionId());
    for (int i = 0; i < prefill; i++) {
      batch.addEvents(turn(i));
    }
    ce.appendEvents(batch.build());
    for (int i = 0; i < iterations; i++) {
      long t0 = System.nanoTime();
      ce.appendEvent(ref.appendEvent(turn(prefill + i)));
      append.add((System.nanoTime() - t0) / 1e6);
      t0 = System.nanoTime();
      BuildContextResponse context = ce.buildContext(ref.buildContext("assistant"));
      build.add((System.nanoTime() - t0) / 1e6);
      if (context.getLastSequence() != prefill + i + 1) {
        throw new IllegalStateException(
            "the context reflects sequence "
                + context.getLastSequence()
                + ", not "
                + (prefill + i + 1));
      }
    }
  }

  private static String json(List<Double> values) {
    return values.stream()
        .map(v -> String.format(Locale.ROOT, "%.4f", v))
        .collect(Collectors.joining(",", "[", "]"));
  }

  private static double percentile(List<Double> values, double p) {
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int index = (int) Math.min(sorted.size() - 1, Math.max(0, Math.ceil(p * sorted.size()) - 1));
    return sorted.get(index);
  }

  public static void main(String[] args) {
    String target = "127.0.0.1:50151";
    int iterations = 500;
    int prefill = 40;
    int warmup = 50;
    boolean asJson = false;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--target":
          target = args[++i];
          break;
        case "--iterations":
          iterations = Integer.parseInt(args[++i]);
          break;
        case "--prefill":
          prefill = Integer.parseInt(args[++i]);
          break;
        case "--warmup":
          warmup = Integer.parseInt(args[++i]);
          break;
        case "--json":
          asJson = true;
          break;
        default:
          throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    String app = "bench-java-" + UUID.randomUUID().toString().substring(0, 8);
    List<Double> append = new ArrayList<>();
    List<Double> build = new ArrayList<>();
    try (ContextEngineClient ce =
        ContextEngineClient.builder().target(target).timeout(Duration.ofSeconds(10)).build()) {
      runSession(ce, app, warmup, prefill, new ArrayList<>(), new ArrayList<>());
      runSession(ce, app, iterations, prefill, append, build);
    }
    if (asJson) {
      System.out.println(
          "{\"client\":\"java\",\"iterations\":"
              + iterations
              + ",\"prefill\":"
              + prefill
              + ",\"append_ms\":"
              + json(append)
              + ",\"build_context_ms\":"
              + json(build)
              + "}");
    } else {
      System.out.printf(
          Locale.ROOT,
          "java: AppendEvent p50 %.2f ms p99 %.2f ms; BuildContext p50 %.2f ms p99 %.2f ms (%d iterations)%n",
          percentile(append, 0.5),
          percentile(append, 0.99),
          percentile(build, 0.5),
          percentile(build, 0.99),
          iterations);
    }
  }
}
