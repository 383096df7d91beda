package dev.contextengine.adk.parity;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.JsonBaseModel;
import com.google.adk.agents.CallbackContext;
import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.events.Event;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.BaseLlmConnection;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.plugins.BasePlugin;
import com.google.adk.runner.Runner;
import com.google.adk.tools.Annotations.Schema;
import com.google.adk.tools.FunctionTool;
import com.google.adk.tools.LongRunningFunctionTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.FunctionResponse;
import com.google.genai.types.GenerateContentResponseUsageMetadata;
import com.google.genai.types.Part;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.adk.ContextEngineMemoryService;
import dev.contextengine.adk.ContextEnginePlugin;
import dev.contextengine.adk.ContextEngineSessionService;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.GetCompactionStatusRequest;
import dev.contextengine.v1.GetCompactionStatusResponse;
import dev.contextengine.v1.GetSessionRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;
import io.reactivex.rxjava3.core.Flowable;
import io.reactivex.rxjava3.core.Maybe;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The ADK Java driver of the cross-language parity (clients/conformance/adk/README.md): runs
 * conversation.json through ADK Java's own Runner with the drop-ins and a scripted model, and
 * writes one JSON line per model call and per turn.
 *
 * <pre>
 * java -cp ... dev.contextengine.adk.parity.Driver --target HOST:PORT --conversation FILE
 *     --app APP --user USER --session SESSION --out REPORT.jsonl
 * </pre>
 *
 * Exit status 0 only when every turn ran; 1 with a message naming the turn otherwise; 2 on bad
 * arguments.
 */
public final class Driver {
  static final ObjectMapper JSON = JsonBaseModel.getMapper();

  /** A failure of the script (a model call without an answer, an answer left over, ...). */
  static final class DriverFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    DriverFailure(String message) {
      super(message);
    }
  }

  // The conversation's tools, exactly as the contract says.

  /** lookup(city) -> {"weather": "sunny in " + city}. */
  public static Map<String, Object> lookup(@Schema(name = "city") String city) {
    return Map.of("weather", "sunny in " + city);
  }

  /** convert(amount) -> {"usd": amount * 2}, a number. */
  public static Map<String, Object> convert(@Schema(name = "amount") double amount) {
    return Map.of("usd", amount * 2);
  }

  /** start_refund(order), long-running -> {"status": order + " pending"}. */
  public static Map<String, Object> start_refund(@Schema(name = "order") String order) {
    return Map.of("status", order + " pending");
  }

  /** One model for every agent: the next answer of the current turn. */
  static final class ScriptedModel extends BaseLlm {
    final Deque<JsonNode> answers = new ArrayDeque<>();
    String turn = "";
    final Driver driver;

    ScriptedModel(Driver driver) {
      super("scripted");
      this.driver = driver;
    }

    @Override
    public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
      return Flowable.fromCallable(() -> answer(request));
    }

    private LlmResponse answer(LlmRequest request) throws Exception {
      ArrayNode contents = JSON.createArrayNode();
      for (Content content : request.contents()) {
        contents.add(JSON.readTree(content.toJson()));
      }
      driver.recordCall(turn, contents);
      JsonNode next = answers.pollFirst();
      if (next == null) {
        throw new DriverFailure("turn " + turn + ": a model call with no answer left in the turn");
      }
      List<Part> parts = new ArrayList<>();
      if (next.has("text")) {
        parts.add(Part.fromText(next.get("text").asText()));
      } else {
        for (JsonNode call : next.get("calls")) {
          @SuppressWarnings("unchecked")
          Map<String, Object> args = JSON.convertValue(call.get("args"), Map.class);
          parts.add(
              Part.builder()
                  .functionCall(
                      FunctionCall.builder()
                          .id(call.get("id").asText())
                          .name(call.get("name").asText())
                          .args(args)
                          .build())
                  .build());
        }
      }
      int promptTokens = JSON.writeValueAsString(contents).length() / 4;
      return LlmResponse.builder()
          .content(Content.builder().role("model").parts(parts).build())
          .usageMetadata(
              GenerateContentResponseUsageMetadata.builder()
                  .promptTokenCount(promptTokens)
                  .candidatesTokenCount(5)
                  .build())
          .build();
    }

    @Override
    public BaseLlmConnection connect(LlmRequest request) {
      throw new UnsupportedOperationException("the scripted model has no live connection");
    }
  }

  /** Notes which agent makes each model call (after the ContextEnginePlugin has built it). */
  final class Recorder extends BasePlugin {
    Recorder() {
      super("parity-recorder");
    }

    @Override
    public Maybe<LlmResponse> beforeModelCallback(
        CallbackContext context, LlmRequest.Builder request) {
      callingAgent = context.agentName();
      invocationId = context.invocationId();
      return Maybe.empty();
    }
  }

  private final ContextEngineClient client;
  private final String app;
  private final String user;
  private final String session;
  private final BufferedWriter out;
  private String callingAgent = "";
  private String invocationId = "";
  private int calls;

  Driver(ContextEngineClient client, String app, String user, String session, BufferedWriter out) {
    this.client = client;
    this.app = app;
    this.user = user;
    this.session = session;
    this.out = out;
  }

  void recordCall(String turn, ArrayNode contents) throws Exception {
    long last =
        client
            .getSession(
                GetSessionRequest.newBuilder()
                    .setAppName(app)
                    .setUserId(user)
                    .setSessionId(session)
                    .setNumRecentEvents(0)
                    .build())
            .getSession()
            .getLastSequence();
    ObjectNode line = JSON.createObjectNode();
    line.put("kind", "model_call").put("turn", turn).put("index", calls++);
    line.put("agent", callingAgent).put("last_sequence", last);
    line.set("contents", contents);
    write(line);
  }

  void write(ObjectNode line) throws Exception {
    out.write(JSON.writeValueAsString(line));
    out.newLine();
    out.flush();
  }

  void run(JsonNode conversation) throws Exception {
    AppConfig.Builder config = AppConfig.newBuilder();
    JsonFormat.parser()
        .merge(JSON.writeValueAsString(conversation.get("engine_app_config")), config);
    client.updateAppConfig(
        UpdateAppConfigRequest.newBuilder().setConfig(config.setAppName(app)).build());

    ScriptedModel model = new ScriptedModel(this);
    JsonNode agents = conversation.get("agents");
    LlmAgent helper =
        LlmAgent.builder()
            .name("helper")
            .model(model)
            .instruction(agents.get("helper").get("instruction").asText())
            .description(agents.get("helper").get("description").asText())
            .tools(FunctionTool.create(Driver.class, "convert"))
            .build();
    LlmAgent root =
        LlmAgent.builder()
            .name("root")
            .model(model)
            .instruction(agents.get("root").get("instruction").asText())
            .description(agents.get("root").get("description").asText())
            .tools(
                FunctionTool.create(Driver.class, "lookup"),
                LongRunningFunctionTool.create(Driver.class, "start_refund"))
            .subAgents(helper)
            .build();
    ContextEngineSessionService sessions = new ContextEngineSessionService(client);
    Runner runner =
        Runner.builder()
            .agent(root)
            .appName(app)
            .sessionService(sessions)
            .memoryService(new ContextEngineMemoryService(client))
            .artifactService(new InMemoryArtifactService())
            .plugins(new ContextEnginePlugin(client), new Recorder())
            .build();
    sessions.createSession(app, user, (Map<String, Object>) null, session).blockingGet();

    Map<String, String> invocations = new HashMap<>();
    for (JsonNode turn : conversation.get("turns")) {
      String id = turn.get("id").asText();
      if (turn.has("rewind")) {
        String target = invocations.get(turn.get("rewind").asText());
        if (target == null) {
          throw new DriverFailure(
              "turn " + id + ": no invocation recorded for " + turn.get("rewind"));
        }
        client.rewindSession(
            RewindSessionRequest.newBuilder()
                .setAppName(app)
                .setUserId(user)
                .setSessionId(session)
                .setRewindBeforeInvocationId(target)
                .build());
      }
      model.turn = id;
      model.answers.clear();
      turn.get("answers").forEach(model.answers::add);
      invocationId = "";
      List<Event> events =
          runner.runAsync(user, session, userContent(turn.get("user"))).toList().blockingGet();
      if (!model.answers.isEmpty()) {
        throw new DriverFailure(
            "turn " + id + ": " + model.answers.size() + " answer(s) left over");
      }
      String invocation = events.isEmpty() ? invocationId : events.get(0).invocationId();
      invocations.put(id, invocation);
      waitForCompaction(id);
      ObjectNode line = JSON.createObjectNode();
      line.put("kind", "turn").put("turn", id).put("invocation_id", invocation);
      write(line);
    }
    ObjectNode done = JSON.createObjectNode();
    done.put("kind", "done").put("app", app).put("user", user).put("session", session);
    done.put("port", "java").put("model_calls", calls);
    write(done);
  }

  static Content userContent(JsonNode user) {
    if (user.has("text")) {
      return Content.builder()
          .role("user")
          .parts(List.of(Part.fromText(user.get("text").asText())))
          .build();
    }
    JsonNode fr = user.get("function_response");
    @SuppressWarnings("unchecked")
    Map<String, Object> response = JSON.convertValue(fr.get("response"), Map.class);
    return Content.builder()
        .role("user")
        .parts(
            List.of(
                Part.builder()
                    .functionResponse(
                        FunctionResponse.builder()
                            .id(fr.get("id").asText())
                            .name(fr.get("name").asText())
                            .response(response)
                            .build())
                    .build()))
        .build();
  }

  void waitForCompaction(String turn) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (true) {
      GetCompactionStatusResponse status =
          client.getCompactionStatus(
              GetCompactionStatusRequest.newBuilder()
                  .setAppName(app)
                  .setUserId(user)
                  .setSessionId(session)
                  .build());
      if (status.getFailures() > 0) {
        throw new DriverFailure(
            "turn " + turn + ": the summarizer failed: " + status.getLastError());
      }
      if (!status.getRunning()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new DriverFailure("turn " + turn + ": compaction still running after 30 s");
      }
      Thread.sleep(10);
    }
  }

  /**
   * The runs the command line asks for: (conversation, app, report) of one conversation, or of
   * every {@code *.json} of a directory, each on app {@code APP-<name>} with its report {@code
   * <name>.jsonl} in the {@code --out} directory.
   */
  static List<String[]> jobs(Map<String, String> args) throws java.io.IOException {
    Path source = Path.of(args.get("conversation"));
    if (!Files.isDirectory(source)) {
      return List.<String[]>of(new String[] {source.toString(), args.get("app"), args.get("out")});
    }
    List<String[]> out = new ArrayList<>();
    try (var files = Files.list(source)) {
      for (Path path : files.filter(p -> p.toString().endsWith(".json")).sorted().toList()) {
        String name = path.getFileName().toString().replaceFirst("\\.json$", "");
        out.add(
            new String[] {
              path.toString(),
              args.get("app") + "-" + name,
              Path.of(args.get("out")).resolve(name + ".jsonl").toString()
            });
      }
    }
    return out;
  }

  /** The command line (see the class documentation). */
  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) {
        break;
      }
      args.put(argv[i].substring(2), argv[i + 1]);
    }
    for (String required : List.of("target", "conversation", "app", "user", "session", "out")) {
      if (!args.containsKey(required)) {
        System.err.println(
            "usage: Driver --target HOST:PORT --conversation FILE|DIR --app APP --user USER "
                + "--session SESSION --out REPORT.jsonl|DIR (missing --"
                + required
                + ")");
        System.exit(2);
      }
    }
    int status = 0;
    try (ContextEngineClient client =
        ContextEngineClient.builder()
            .target(args.get("target"))
            .timeout(Duration.ofSeconds(30))
            .build()) {
      for (String[] job : jobs(args)) {
        JsonNode conversation = JSON.readTree(Files.readString(Path.of(job[0])));
        Path report = Path.of(job[2]);
        if (report.getParent() != null) {
          Files.createDirectories(report.getParent());
        }
        try (BufferedWriter out = Files.newBufferedWriter(report, StandardCharsets.UTF_8)) {
          Driver driver = new Driver(client, job[1], args.get("user"), args.get("session"), out);
          String failure = null;
          try {
            driver.run(conversation);
          } catch (DriverFailure e) {
            failure = e.getMessage();
          } catch (RuntimeException e) {
            Throwable cause = e;
            while (cause.getCause() != null && !(cause instanceof DriverFailure)) {
              cause = cause.getCause();
            }
            failure = cause.toString();
          }
          if (failure != null) {
            ObjectNode line = JSON.createObjectNode();
            line.put("kind", "failed").put("message", failure);
            driver.write(line);
            System.err.println("java driver: " + Path.of(job[0]).getFileName() + ": " + failure);
            status = 1;
          }
        }
      }
    }
    System.exit(status);
  }
}
