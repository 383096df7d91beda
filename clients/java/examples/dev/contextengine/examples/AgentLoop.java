package dev.contextengine.examples;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.client.Fingerprint;
import dev.contextengine.client.SessionRef;
import dev.contextengine.v1.AppendEventResponse;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.FunctionCall;
import dev.contextengine.v1.FunctionResponse;
import dev.contextengine.v1.ModelIdentity;
import dev.contextengine.v1.ModelProvider;
import dev.contextengine.v1.Part;
import dev.contextengine.v1.UsageMetadata;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * An agent loop around a fake model, the way a Java agent uses the sidecar (the same loop as
 * clients/typescript/examples/agent_loop.ts):
 *
 * <ol>
 *   <li>append the user's message,
 *   <li>build the context and "call the model" with it,
 *   <li>append the model's tool call, run the tool, append its result, build the context again,
 *   <li>append the model's answer, end the invocation (the engine may compact in the background),
 *   <li>print the context the next model call would get.
 * </ol>
 *
 * <p>Run it against a sidecar ({@code make run} in the repository root): {@code make java-example}
 * or {@code java -cp "$(cat target/test-classpath.txt):target/classes:target/test-classes"
 * dev.contextengine.examples.AgentLoop --target 127.0.0.1:50151} in clients/java.
 */
public final class AgentLoop {
  private AgentLoop() {}

  static final String APP = "example-agent-loop";
  static final String AGENT = "calculator";
  static final ModelIdentity MODEL =
      ModelIdentity.newBuilder()
          .setProvider(ModelProvider.MODEL_PROVIDER_GEMINI)
          .setModel("fake-model-1")
          .build();
  private static final Pattern PRODUCT = Pattern.compile("(\\d+)\\s*\\*\\s*(\\d+)");

  /** The tools the fake model may call. */
  static final Map<String, Function<Struct, Struct>> TOOLS =
      Map.of(
          "multiply",
          args ->
              Struct.newBuilder()
                  .putFields(
                      "result",
                      Value.newBuilder()
                          .setNumberValue(
                              args.getFieldsOrThrow("a").getNumberValue()
                                  * args.getFieldsOrThrow("b").getNumberValue())
                          .build())
                  .build());

  /** What the fake model said, and how many prompt tokens it saw. */
  record Reply(List<Part> parts, int promptTokens) {}

  private static Part text(String text) {
    return Part.newBuilder().setText(text).build();
  }

  private static Value number(double value) {
    return Value.newBuilder().setNumberValue(value).build();
  }

  /**
   * The fake model: calls multiply for a question about a product, then answers with its result.
   */
  static Reply fakeModel(List<Content> contents) {
    int promptTokens = contents.toString().length() / 4;
    Content last =
        contents.isEmpty() ? Content.getDefaultInstance() : contents.get(contents.size() - 1);
    for (Part part : last.getPartsList()) {
      if (part.hasFunctionResponse()) {
        Value result = part.getFunctionResponse().getResponse().getFieldsOrThrow("result");
        return new Reply(
            List.of(text("17 * 23 = " + Fingerprint.canonicalize(result.getNumberValue()))),
            promptTokens);
      }
    }
    String question =
        last.getPartsList().stream()
            .filter(Part::hasText)
            .map(Part::getText)
            .findFirst()
            .orElse("");
    Matcher factors = PRODUCT.matcher(question);
    if (!factors.find()) {
      return new Reply(List.of(text("I can only multiply.")), promptTokens);
    }
    Struct args =
        Struct.newBuilder()
            .putFields("a", number(Double.parseDouble(factors.group(1))))
            .putFields("b", number(Double.parseDouble(factors.group(2))))
            .build();
    FunctionCall call =
        FunctionCall.newBuilder()
            .setId("call-" + UUID.randomUUID())
            .setName("multiply")
            .setArgs(args)
            .build();
    return new Reply(List.of(Part.newBuilder().setFunctionCall(call).build()), promptTokens);
  }

  /** One line per content: text, calls and results (JSON with sorted keys). */
  static String render(Content content) {
    return content.getPartsList().stream()
        .map(
            part -> {
              if (part.hasFunctionCall()) {
                return "call "
                    + part.getFunctionCall().getName()
                    + "("
                    + Fingerprint.canonicalize(Fingerprint.json(part.getFunctionCall().getArgs()))
                    + ")";
              }
              if (part.hasFunctionResponse()) {
                return part.getFunctionResponse().getName()
                    + " -> "
                    + Fingerprint.canonicalize(
                        Fingerprint.json(part.getFunctionResponse().getResponse()));
              }
              return part.getText().replace("\n", " ");
            })
        .collect(Collectors.joining(" + "));
  }

  /** Runs the loop for one question; returns the final context's contents. */
  public static List<Content> agentLoop(String target, String question) {
    try (ContextEngineClient ce =
        ContextEngineClient.builder().target(target).timeout(Duration.ofSeconds(5)).build()) {
      SessionRef session =
          SessionRef.of(
              ce.createSession(
                      CreateSessionRequest.newBuilder().setAppName(APP).setUserId("ada").build())
                  .getSession());
      String invocationId = "inv-" + UUID.randomUUID();
      BuildContextRequest contextRequest =
          session.buildContext(AGENT).toBuilder().setModel(MODEL).build();

      // 1. The user's message (the client gives it an id, so a retried append is not a duplicate).
      ce.appendEvent(session.appendEvent(SessionRef.said("user", invocationId, question)));

      for (int turn = 0; turn < 4; turn++) {
        // 2. The context for this model call, then the (fake) model call itself.
        BuildContextResponse context = ce.buildContext(contextRequest);
        Reply reply = fakeModel(context.getContentsList());
        Event answer =
            Event.newBuilder()
                .setAuthor(AGENT)
                .setInvocationId(invocationId)
                .setContent(Content.newBuilder().setRole("model").addAllParts(reply.parts()))
                .setUsageMetadata(
                    UsageMetadata.newBuilder().setPromptTokenCount(reply.promptTokens()))
                .build();
        AppendEventResponse recorded =
            ce.appendEvent(
                session.appendEvent(answer).toBuilder()
                    .setExpectedLastSequence(
                        context.getLastSequence()) // nobody else wrote in between
                    .build());
        List<FunctionCall> calls = new ArrayList<>();
        for (Part part : reply.parts()) {
          if (part.hasFunctionCall()) {
            calls.add(part.getFunctionCall());
          }
        }
        if (calls.isEmpty()) {
          break;
        }
        // 3. Run the tools and record their results.
        AppendEventsRequest.Builder results =
            AppendEventsRequest.newBuilder()
                .setAppName(session.appName())
                .setUserId(session.userId())
                .setSessionId(session.sessionId())
                .setExpectedLastSequence(recorded.getLastSequence());
        for (FunctionCall call : calls) {
          Struct response =
              TOOLS
                  .getOrDefault(call.getName(), a -> Struct.getDefaultInstance())
                  .apply(call.getArgs());
          FunctionResponse result =
              FunctionResponse.newBuilder()
                  .setId(call.getId())
                  .setName(call.getName())
                  .setResponse(response)
                  .build();
          results.addEvents(
              Event.newBuilder()
                  .setAuthor(AGENT)
                  .setInvocationId(invocationId)
                  .setContent(
                      Content.newBuilder()
                          .setRole("user")
                          .addParts(Part.newBuilder().setFunctionResponse(result))));
        }
        ce.appendEvents(results.build());
      }

      // 4. The invocation is over: the engine decides in the background whether to compact.
      ce.endInvocation(session.endInvocation(invocationId));

      // 5. What the next model call would see.
      BuildContextResponse context = ce.buildContext(contextRequest);
      System.out.println(
          "context for "
              + AGENT
              + " in session "
              + session.sessionId()
              + ": "
              + context.getContentsCount()
              + " contents, "
              + context.getTokenEstimate().getTokens()
              + " tokens ("
              + context.getTokenEstimate().getCounter()
              + "), last sequence "
              + context.getLastSequence());
      for (Content content : context.getContentsList()) {
        System.out.println(
            "  " + String.format("%-5s", content.getRole()) + " | " + render(content));
      }
      return context.getContentsList();
    }
  }

  public static void main(String[] args) {
    String target = System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151");
    String question = "What is 17 * 23?";
    for (int i = 0; i + 1 < args.length; i++) {
      if (args[i].equals("--target")) {
        target = args[++i];
      } else if (args[i].equals("--question")) {
        question = args[++i];
      }
    }
    try {
      agentLoop(target, question);
    } catch (ContextEngineException e) {
      System.err.println(
          "error: "
              + e.getMessage()
              + " (code "
              + e.code()
              + ", reason "
              + (e.reason().isEmpty() ? "none" : e.reason())
              + ")");
      System.exit(1);
    }
  }
}
