package dev.contextengine.adk.examples;

import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.BaseLlmConnection;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.adk.tools.Annotations.Schema;
import com.google.adk.tools.FunctionTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.Part;
import dev.contextengine.adk.ContextEngineMemoryService;
import dev.contextengine.adk.ContextEnginePlugin;
import dev.contextengine.adk.ContextEngineSessionService;
import dev.contextengine.client.ContextEngineClient;
import io.reactivex.rxjava3.core.Flowable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedDeque;

/**
 * An ADK Java agent on the contextengine sidecar: a root agent with a tool and a sub-agent, a
 * scripted model (no API key), ADK's own Runner with the three drop-ins. Run it with {@code make
 * java-adk-example} (the sidecar of {@code make run}, or {@code CONTEXTENGINE_TARGET}; the first
 * argument overrides both).
 */
public final class TravelAgent {
  private TravelAgent() {}

  /** The root agent's tool. */
  public static Map<String, Object> lookup(@Schema(name = "city") String city) {
    return Map.of("weather", "sunny in " + city);
  }

  /** The sub-agent's tool. */
  public static Map<String, Object> convert(@Schema(name = "amount") int amount) {
    return Map.of("usd", amount * 2);
  }

  /** A model that answers from a script, and remembers how many contents each request had. */
  static final class ScriptedModel extends BaseLlm {
    final ConcurrentLinkedDeque<Part> script = new ConcurrentLinkedDeque<>();
    final List<Integer> requestSizes = new ArrayList<>();

    ScriptedModel() {
      super("scripted");
    }

    @Override
    public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
      requestSizes.add(request.contents().size());
      Part next = script.pollFirst();
      Part answer = next == null ? Part.fromText("(the script is over)") : next;
      return Flowable.just(
          LlmResponse.builder()
              .content(Content.builder().role("model").parts(List.of(answer)).build())
              .build());
    }

    @Override
    public BaseLlmConnection connect(LlmRequest request) {
      throw new UnsupportedOperationException();
    }
  }

  static Part call(String id, String name, Map<String, Object> args) {
    return Part.builder()
        .functionCall(FunctionCall.builder().id(id).name(name).args(args).build())
        .build();
  }

  /** Runs the conversation against {@code target}; returns the session as the engine holds it. */
  public static Session run(String target) {
    ScriptedModel model = new ScriptedModel();
    model.script.addAll(
        List.of(
            call("c-1", "lookup", Map.of("city", "Lisbon")),
            Part.fromText("It is sunny in Lisbon."),
            call("c-2", "transfer_to_agent", Map.of("agent_name", "helper")),
            call("c-3", "convert", Map.of("amount", 21)),
            Part.fromText("21 is 42 USD.")));
    LlmAgent helper =
        LlmAgent.builder()
            .name("helper")
            .description("Converts currencies.")
            .instruction("You convert currencies.")
            .model(model)
            .tools(FunctionTool.create(TravelAgent.class, "convert"))
            .build();
    LlmAgent root =
        LlmAgent.builder()
            .name("root")
            .description("Plans trips.")
            .instruction("You plan trips.")
            .model(model)
            .tools(FunctionTool.create(TravelAgent.class, "lookup"))
            .subAgents(helper)
            .build();
    String app = "travel-" + UUID.randomUUID().toString().substring(0, 8);
    try (ContextEngineClient client = ContextEngineClient.connect(target)) {
      ContextEngineSessionService sessions = new ContextEngineSessionService(client);
      Runner runner =
          Runner.builder()
              .agent(root)
              .appName(app)
              .sessionService(sessions)
              .memoryService(new ContextEngineMemoryService(client))
              .artifactService(new InMemoryArtifactService())
              .plugins(new ContextEnginePlugin(client))
              .build();
      Session session =
          sessions.createSession(app, "zoe", Map.of("user:home", "Porto"), null).blockingGet();
      for (String text : List.of("Weather in Lisbon?", "How much is 21 in USD?")) {
        System.out.println("user: " + text);
        for (Event event :
            runner
                .runAsync("zoe", session.id(), Content.fromParts(Part.fromText(text)))
                .toList()
                .blockingGet()) {
          System.out.println("  " + event.author() + ": " + event.stringifyContent());
        }
      }
      Session stored =
          sessions.getSession(app, "zoe", session.id(), java.util.Optional.empty()).blockingGet();
      System.out.println(
          "engine: "
              + stored.events().size()
              + " events, state "
              + stored.state()
              + ", model request sizes "
              + model.requestSizes);
      return stored;
    }
  }

  /** {@code TravelAgent [host:port]}. */
  public static void main(String[] args) {
    String env = System.getenv("CONTEXTENGINE_TARGET");
    String target =
        args.length > 0 ? args[0] : env != null && !env.isBlank() ? env : "127.0.0.1:50151";
    run(target);
  }
}
