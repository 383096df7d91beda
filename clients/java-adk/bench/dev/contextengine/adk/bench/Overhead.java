package dev.contextengine.adk.bench;

import com.google.adk.agents.CallbackContext;
import com.google.adk.agents.InvocationContext;
import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.flows.llmflows.Contents;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.BaseLlmConnection;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.InMemorySessionService;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import dev.contextengine.adk.AdkConvert;
import dev.contextengine.adk.ContextEnginePlugin;
import dev.contextengine.adk.ContextEngineSessionService;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.v1.AppendEventsRequest;
import io.reactivex.rxjava3.core.Flowable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;

/**
 * Per model call overhead of the ADK Java drop-ins against ADK Java's own in-memory session service
 * and in-process contents building, at 100 / 1,000 / 10,000 events, in one run.
 *
 * <p>One model call's work outside the model: the contents of the request (drop-ins: {@code
 * ContextEnginePlugin.beforeModelCallback}, one BuildContext RPC; ADK: its {@code Contents} request
 * processor over the session's events) and recording the model's answer ({@code appendEvent}: one
 * AppendEvent RPC; ADK: {@code InMemorySessionService.appendEvent}). Prints the median of {@code
 * calls} calls per size (after warm-up) and the ratio.
 *
 * <pre>java -cp ... dev.contextengine.adk.bench.Overhead [host:port] [calls]</pre>
 */
public final class Overhead {
  private Overhead() {}

  static Event event(int i, long millis) {
    boolean user = i % 2 == 0;
    return Event.builder()
        .id(Event.generateEventId())
        .invocationId("inv-" + (i / 2))
        .author(user ? "user" : "root")
        .content(
            Content.builder()
                .role(user ? "user" : "model")
                .parts(
                    List.of(
                        Part.fromText(
                            (user ? "question " : "answer ")
                                + i
                                + " about the trip and the weather")))
                .build())
        .actions(EventActions.builder().build())
        .timestamp(millis)
        .build();
  }

  static InvocationContext context(BaseSessionService service, Session session, LlmAgent agent) {
    return InvocationContext.builder()
        .sessionService(service)
        .artifactService(new InMemoryArtifactService())
        .agent(agent)
        .session(session)
        .invocationId("inv-bench")
        .build();
  }

  static double median(long[] nanos) {
    long[] sorted = nanos.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2] / 1e6;
  }

  /** The command line. */
  public static void main(String[] args) {
    String env = System.getenv("CONTEXTENGINE_TARGET");
    String target =
        args.length > 0 ? args[0] : env != null && !env.isBlank() ? env : "127.0.0.1:50151";
    int calls = args.length > 1 ? Integer.parseInt(args[1]) : 30;
    // a model object (never called: only the work around the call is measured), so neither side
    // needs an API key to resolve a model name
    BaseLlm model =
        new BaseLlm("bench-model") {
          @Override
          public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
            return Flowable.error(new UnsupportedOperationException("not called by the benchmark"));
          }

          @Override
          public BaseLlmConnection connect(LlmRequest request) {
            throw new UnsupportedOperationException("not called by the benchmark");
          }
        };
    LlmAgent agent =
        LlmAgent.builder().name("root").model(model).instruction("You plan trips.").build();
    System.out.printf("%-8s %14s %14s %8s%n", "events", "drop-ins ms", "adk-java ms", "ratio");
    try (ContextEngineClient client =
        ContextEngineClient.builder().target(target).timeout(Duration.ofSeconds(60)).build()) {
      ContextEngineSessionService engine = new ContextEngineSessionService(client);
      ContextEnginePlugin plugin = new ContextEnginePlugin(client);
      // the first round (100 events) warms both sides' code up and is not printed
      boolean warming = true;
      for (int size : new int[] {100, 100, 1_000, 10_000}) {
        String app = "bench-" + UUID.randomUUID().toString().substring(0, 8);
        long start = System.currentTimeMillis() - size * 10L;
        // the drop-ins' session: filled in batches straight through the client
        engine.createSession(app, "u", Map.of(), "s").blockingGet();
        List<dev.contextengine.v1.Event> batch = new ArrayList<>();
        for (int i = 0; i < size; i++) {
          batch.add(AdkConvert.eventToProto(event(i, start + i * 10L)));
          if (batch.size() == 500 || i == size - 1) {
            client.appendEvents(
                AppendEventsRequest.newBuilder()
                    .setAppName(app)
                    .setUserId("u")
                    .setSessionId("s")
                    .addAllEvents(batch)
                    .build());
            batch.clear();
          }
        }
        Session ours = engine.getSession(app, "u", "s", Optional.empty()).blockingGet();
        InMemorySessionService memory = new InMemorySessionService();
        Session theirs = memory.createSession(app, "u", Map.of(), "s").blockingGet();
        for (int i = 0; i < size; i++) {
          memory.appendEvent(theirs, event(i, start + i * 10L)).blockingGet();
        }
        Contents contents = new Contents();
        long[] a = new long[calls];
        long[] b = new long[calls];
        int warm = 10;
        for (int k = -warm; k < calls; k++) {
          long t0 = System.nanoTime();
          CallbackContext cc =
              new CallbackContext(context(engine, ours, agent), EventActions.builder().build());
          LlmRequest.Builder request =
              LlmRequest.builder().model("bench-model").contents(List.of());
          plugin.beforeModelCallback(cc, request).blockingGet();
          engine.appendEvent(ours, event(2 * k + 1, System.currentTimeMillis())).blockingGet();
          long t1 = System.nanoTime();
          contents
              .processRequest(
                  context(memory, theirs, agent),
                  LlmRequest.builder().model("bench-model").contents(List.of()).build())
              .blockingGet();
          memory.appendEvent(theirs, event(2 * k + 1, System.currentTimeMillis())).blockingGet();
          long t2 = System.nanoTime();
          if (k >= 0) {
            a[k] = t1 - t0;
            b[k] = t2 - t1;
          }
        }
        if (warming) {
          warming = false;
          continue;
        }
        double ms = median(a);
        double adk = median(b);
        System.out.printf("%-8d %14.3f %14.3f %7.1fx%n", size, ms, adk, ms / adk);
      }
    }
  }
}
