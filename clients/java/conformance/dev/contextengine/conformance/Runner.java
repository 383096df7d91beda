package dev.contextengine.conformance;

import static dev.contextengine.conformance.Match.GSON;
import static dev.contextengine.conformance.Match.asList;
import static dev.contextengine.conformance.Match.asMap;
import static dev.contextengine.conformance.Match.show;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.client.ContextTools;
import dev.contextengine.client.FollowedStream;
import dev.contextengine.client.StreamOptions;
import dev.contextengine.conformance.Match.ScenarioError;
import dev.contextengine.conformance.Match.StepFailure;
import dev.contextengine.v1.CallContextToolRequest;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * The Java conformance runner: executes the shared YAML scenarios through {@link
 * ContextEngineClient} (so client-side validation, error mapping, retries and followed streams are
 * what is tested), with the same rules and the same output as the Python reference runner.
 *
 * <pre>
 * java -cp ... dev.contextengine.conformance.Runner --target 127.0.0.1:50151 [--only TEXT]...
 *     [--report FILE] SCENARIO_DIR
 * </pre>
 *
 * <p>Output: one JSON object per line for every step and every scenario, then {@code conformance
 * (java): N passed, M failed}. Exit status 0 when every scenario passed.
 */
public final class Runner {
  public static final String RUNNER = "java";
  private static final long DEFAULT_CALL_TIMEOUT_MS = 10_000;
  private static final long DEFAULT_FRAME_TIMEOUT_MS = 5_000;
  private static final long DEFAULT_QUIET_MS = 300;
  private static final long DEFAULT_POLL_TIMEOUT_MS = 15_000;
  private static final long DEFAULT_POLL_INTERVAL_MS = 50;
  private static final Set<String> SERVICES =
      Set.of(
          "SessionService",
          "ContextService",
          "CompactionService",
          "SubscriptionService",
          "MemoryService",
          "ContextToolsService");
  private static final Set<String> STREAMS = Set.of("SubscribeEvents", "WatchSessionState");
  private static final Map<String, List<String>> STEP_KEYS = new LinkedHashMap<>();

  static {
    STEP_KEYS.put("call", List.of("request", "expect", "expect_error", "capture", "timeout_ms"));
    STEP_KEYS.put("poll", List.of("request", "until", "capture", "timeout_ms", "interval_ms"));
    STEP_KEYS.put("subscribe", List.of("stream", "request"));
    STEP_KEYS.put("expect_frames", List.of("frames", "capture", "timeout_ms"));
    STEP_KEYS.put("expect_no_frames", List.of("within_ms"));
    STEP_KEYS.put("expect_stream_error", List.of("error", "timeout_ms"));
    STEP_KEYS.put("disconnect", List.of());
    STEP_KEYS.put("resume", List.of());
    STEP_KEYS.put("sleep_ms", List.of());
  }

  private static final List<String> COMMON_KEYS = List.of("name", "note");
  private static final List<String> SCENARIO_KEYS = List.of("name", "description", "tags", "steps");
  private static final JsonFormat.Printer PRINTER =
      JsonFormat.printer().preservingProtoFieldNames();
  private static final JsonFormat.Parser PARSER = JsonFormat.parser();
  private static final SecureRandom RANDOM = new SecureRandom();

  /** One scenario file. */
  public record Scenario(String name, Path path, Object data) {}

  /** How a failed call or stream failed. */
  record Failure(String code, String reason, Map<String, String> metadata, String message) {
    static Failure of(ContextEngineException e) {
      return new Failure(e.code().name(), e.reason(), e.metadata(), e.detail());
    }

    String describe() {
      return code + " " + reason + ": " + message + " " + GSON.toJson(metadata);
    }
  }

  private final ContextEngineClient client;
  private final Consumer<Map<String, Object>> emit;

  public Runner(ContextEngineClient client, Consumer<Map<String, Object>> emit) {
    this.client = client;
    this.emit = emit;
  }

  // --- methods ---------------------------------------------------------------------------------

  /** The client's method for an RPC ({@code Service/Method}): named after the RPC. */
  static Method clientMethod(Object name, boolean stream) {
    if (!(name instanceof String)) {
      throw new ScenarioError("a method name is a string, not " + show(name));
    }
    String[] parts = ((String) name).split("/", 2);
    if (!SERVICES.contains(parts[0])) {
      throw new ScenarioError("unknown service " + show(parts[0]));
    }
    if (parts.length < 2) {
      throw new ScenarioError("unknown method " + show(name));
    }
    if (STREAMS.contains(parts[1]) != stream) {
      throw new ScenarioError(name + (stream ? " is not a stream" : " is a stream: use subscribe"));
    }
    String local = Character.toLowerCase(parts[1].charAt(0)) + parts[1].substring(1);
    for (Method m : ContextEngineClient.class.getMethods()) {
      Class<?>[] params = m.getParameterTypes();
      boolean shape =
          stream ? params.length == 2 && params[1] == StreamOptions.class : params.length == 1;
      if (m.getName().equals(local) && shape && Message.class.isAssignableFrom(params[0])) {
        return m;
      }
    }
    throw new ScenarioError("unknown method " + show(name));
  }

  static Message parseRequest(Method method, Object json) {
    try {
      Message.Builder builder =
          (Message.Builder) method.getParameterTypes()[0].getMethod("newBuilder").invoke(null);
      PARSER.merge(GSON.toJson(json == null ? Map.of() : json), builder);
      return builder.build();
    } catch (InvalidProtocolBufferException | RuntimeException e) {
      throw new ScenarioError(
          "request does not parse as "
              + method.getParameterTypes()[0].getSimpleName()
              + ": "
              + e.getMessage());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }

  static Map<String, Object> asJson(Message message) {
    try {
      return asMap(GSON.fromJson(PRINTER.print(message), Object.class));
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Object invoke(Method method, Object target, Object... args) {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      throw new IllegalStateException(cause);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  // --- streams ---------------------------------------------------------------------------------

  static String frameCursor(Map<String, Object> frame) {
    for (String kind : List.of("event", "caught_up", "heartbeat")) {
      Object value = frame.get(kind);
      if (value != null) {
        Object cursor = asMap(value).get("cursor");
        return cursor == null ? "" : String.valueOf(cursor);
      }
    }
    Object batch = frame.get("events");
    if (batch != null) {
      Object events = asMap(batch).get("events");
      List<Object> list = events == null ? List.of() : asList(events);
      if (list.isEmpty()) {
        return "";
      }
      Object cursor = asMap(list.get(list.size() - 1)).get("cursor");
      return cursor == null ? "" : String.valueOf(cursor);
    }
    return "";
  }

  /** What waiting on a stream gave: a frame, its normal end, or its failure. */
  record Next(Map<String, Object> frame, boolean ended, Failure failure) {}

  final class ScenarioStream {
    final Object methodName;
    final Method method;
    final Map<String, Object> request;
    String cursor = "";
    private FollowedStream<?> frames;
    private Next outcome;

    ScenarioStream(Object methodName, Map<String, Object> request) {
      this.methodName = methodName;
      this.method = clientMethod(methodName, true);
      this.request = request;
    }

    void open() {
      close();
      outcome = null;
      Message message = parseRequest(method, request);
      try {
        // The client reopens broken streams by itself; a scenario's explicit resume is a new call.
        frames =
            (FollowedStream<?>)
                invoke(method, client, message, StreamOptions.DEFAULT.withMaxFailures(5));
      } catch (ContextEngineException e) {
        outcome = new Next(null, false, Failure.of(e));
      }
    }

    /** The next frame, or null when nothing came within {@code timeoutMs}. */
    Next next(long timeoutMs) {
      if (outcome != null) {
        return outcome;
      }
      if (frames == null) {
        throw new ScenarioError("the stream is not open");
      }
      Object frame;
      try {
        frame = frames.poll(Duration.ofMillis(Math.max(0, timeoutMs)));
      } catch (ContextEngineException e) {
        outcome = new Next(null, false, Failure.of(e));
        return outcome;
      } catch (NoSuchElementException e) {
        outcome = new Next(null, true, null);
        return outcome;
      }
      if (frame == null) {
        return null;
      }
      Map<String, Object> json = asJson((Message) frame);
      String c = frameCursor(json);
      if (!c.isEmpty()) {
        cursor = c;
      }
      return new Next(json, false, null);
    }

    void close() {
      if (frames != null) {
        frames.close();
        frames = null;
      }
    }
  }

  // --- scenarios -------------------------------------------------------------------------------

  public static List<Scenario> loadScenarios(Path directory, List<String> only) throws IOException {
    List<Path> files;
    try (Stream<Path> walk = Files.walk(directory)) {
      files =
          walk.filter(p -> Files.isRegularFile(p) && p.toString().endsWith(".yaml"))
              .sorted((a, b) -> a.toString().compareTo(b.toString()))
              .collect(Collectors.toList());
    }
    List<Scenario> scenarios = new ArrayList<>();
    for (Path path : files) {
      String name = directory.relativize(path).toString().replace('\\', '/');
      name = name.substring(0, name.length() - ".yaml".length());
      if (!only.isEmpty() && only.stream().noneMatch(name::contains)) {
        continue;
      }
      Yaml yaml = new Yaml(new SafeConstructor(new LoaderOptions()));
      Object data = yaml.load(Files.readString(path, StandardCharsets.UTF_8));
      scenarios.add(new Scenario(name, path, data));
    }
    return scenarios;
  }

  static void checkShape(Object data) {
    if (!(data instanceof Map)) {
      throw new ScenarioError("a scenario is a mapping");
    }
    Map<String, Object> scenario = asMap(data);
    Set<String> unknown = new TreeSet<>();
    for (Object key : scenario.keySet()) {
      if (!SCENARIO_KEYS.contains(String.valueOf(key))) {
        unknown.add(String.valueOf(key));
      }
    }
    if (!unknown.isEmpty()) {
      throw new ScenarioError("unknown scenario key(s) " + show(new ArrayList<>(unknown)));
    }
    for (String key : List.of("name", "description", "steps")) {
      if (!scenario.containsKey(key)) {
        throw new ScenarioError("missing scenario key " + show(key));
      }
    }
    Object steps = scenario.get("steps");
    if (!(steps instanceof List) || asList(steps).isEmpty()) {
      throw new ScenarioError("steps must be a non-empty list");
    }
    List<Object> list = asList(steps);
    for (int i = 0; i < list.size(); i++) {
      Object step = list.get(i);
      if (!(step instanceof Map)) {
        throw new ScenarioError("step " + i + ": a step is a mapping");
      }
      Map<String, Object> s = asMap(step);
      List<String> kinds =
          STEP_KEYS.keySet().stream().filter(s::containsKey).collect(Collectors.toList());
      if (kinds.size() != 1) {
        throw new ScenarioError(
            "step "
                + i
                + ": exactly one of "
                + String.join(", ", STEP_KEYS.keySet())
                + " is required");
      }
      String kind = kinds.get(0);
      List<String> allowed = new ArrayList<>(STEP_KEYS.get(kind));
      allowed.addAll(COMMON_KEYS);
      allowed.add(kind);
      Set<String> extra = new TreeSet<>();
      for (Object key : s.keySet()) {
        if (!allowed.contains(String.valueOf(key))) {
          extra.add(String.valueOf(key));
        }
      }
      if (!extra.isEmpty()) {
        throw new ScenarioError(
            "step " + i + " (" + kind + "): unknown key(s) " + show(new ArrayList<>(extra)));
      }
      if (kind.equals("call") && s.containsKey("expect") && s.containsKey("expect_error")) {
        throw new ScenarioError("step " + i + ": expect and expect_error exclude each other");
      }
      if (kind.equals("subscribe") && !s.containsKey("stream")) {
        throw new ScenarioError("step " + i + ": subscribe needs a stream name");
      }
    }
  }

  private static String stepKind(Map<String, Object> step) {
    for (String kind : STEP_KEYS.keySet()) {
      if (step.containsKey(kind)) {
        return kind;
      }
    }
    throw new ScenarioError("a step without a kind");
  }

  private static String stepLabel(Map<String, Object> step) {
    String kind = stepKind(step);
    Object name = step.get("name");
    if (name instanceof String && !((String) name).isEmpty()) {
      return (String) name;
    }
    return kind + " " + step.get(kind);
  }

  private static long millis(Object value, long fallback) {
    return value == null ? fallback : ((Number) value).longValue();
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Runs one scenario; true when every step passed. */
  public boolean run(Scenario scenario) {
    long started = System.nanoTime();
    try {
      checkShape(scenario.data());
    } catch (ScenarioError e) {
      report(scenario.name(), null, "fail", "malformed: " + e.getMessage(), 0, "");
      return false;
    }
    byte[] bytes = new byte[4];
    RANDOM.nextBytes(bytes);
    String runId = HexFormat.of().formatHex(bytes);
    Map<String, Object> variables = new HashMap<>();
    variables.put("run", runId);
    variables.put("app", "conf-" + RUNNER + "-" + runId);
    Map<String, ScenarioStream> streams = new HashMap<>();
    List<Object> steps = asList(asMap(scenario.data()).get("steps"));
    boolean ok = true;
    try {
      for (int i = 0; i < steps.size(); i++) {
        Map<String, Object> step = asMap(steps.get(i));
        String label = stepLabel(step);
        if (!ok) {
          report(scenario.name(), i, "skip", "", 0, label);
          continue;
        }
        long t0 = System.nanoTime();
        try {
          step(step, variables, streams);
          report(scenario.name(), i, "pass", "", elapsed(t0), label);
        } catch (StepFailure | ScenarioError e) {
          ok = false;
          report(scenario.name(), i, "fail", e.getMessage(), elapsed(t0), label);
        }
      }
    } finally {
      for (ScenarioStream stream : streams.values()) {
        stream.close();
      }
    }
    report(scenario.name(), null, ok ? "pass" : "fail", "", elapsed(started), "");
    return ok;
  }

  private static double elapsed(long t0) {
    return (System.nanoTime() - t0) / 1e6;
  }

  private void report(
      String scenario, Integer step, String status, String message, double ms, String label) {
    Map<String, Object> result = new LinkedHashMap<>();
    result.put("runner", RUNNER);
    result.put("scenario", scenario);
    result.put("step", step);
    result.put("status", status);
    result.put("message", message);
    double rounded = Math.round(ms * 10) / 10.0;
    result.put("ms", rounded == Math.rint(rounded) ? (Object) (long) rounded : (Object) rounded);
    if (!label.isEmpty()) {
      result.put("label", label);
    }
    emit.accept(result);
  }

  private Map<String, Object> unary(Object name, Object request, long timeoutMs) {
    Method method = clientMethod(name, false);
    Message message = parseRequest(method, request);
    ContextEngineClient timed = client.withTimeout(Duration.ofMillis(timeoutMs));
    if (message instanceof CallContextToolRequest) {
      // Through the helper a model loop uses, as the Python client's runner does.
      CallContextToolRequest call = (CallContextToolRequest) message;
      ContextTools tools =
          timed.contextTools(
              call.getAppName(),
              call.getUserId(),
              call.getSessionId(),
              call.getAgentName(),
              call.hasBranch() ? call.getBranch() : null,
              call.hasIsolationScope() ? call.getIsolationScope() : null);
      return asJson(tools.call(call.getCall(), call.getInvocationId()));
    }
    return asJson((Message) invoke(method, timed, message));
  }

  private void step(
      Map<String, Object> step,
      Map<String, Object> variables,
      Map<String, ScenarioStream> streams) {
    String kind = stepKind(step);
    switch (kind) {
      case "call":
        call(step, variables);
        return;
      case "poll":
        poll(step, variables);
        return;
      case "subscribe":
        {
          String name = String.valueOf(step.get("stream"));
          ScenarioStream old = streams.get(name);
          if (old != null) {
            old.close();
          }
          Object request = Match.substitute(step.getOrDefault("request", Map.of()), variables);
          ScenarioStream stream =
              new ScenarioStream(step.get("subscribe"), new LinkedHashMap<>(asMap(request)));
          stream.open();
          streams.put(name, stream);
          return;
        }
      case "expect_frames":
        expectFrames(step, variables, streamNamed(streams, step.get("expect_frames")));
        return;
      case "expect_no_frames":
        expectNoFrames(step, streamNamed(streams, step.get("expect_no_frames")));
        return;
      case "expect_stream_error":
        expectStreamError(step, variables, streamNamed(streams, step.get("expect_stream_error")));
        return;
      case "disconnect":
        streamNamed(streams, step.get("disconnect")).close();
        return;
      case "resume":
        {
          ScenarioStream stream = streamNamed(streams, step.get("resume"));
          stream.close();
          if (!stream.cursor.isEmpty()
              && String.valueOf(stream.methodName).endsWith("/SubscribeEvents")) {
            Object scope = stream.request.getOrDefault("scope", "SUBSCRIPTION_SCOPE_UNSPECIFIED");
            boolean bySequence =
                List.of("SUBSCRIPTION_SCOPE_UNSPECIFIED", "SUBSCRIPTION_SCOPE_SESSION")
                        .contains(scope)
                    || (scope instanceof Number && ((Number) scope).intValue() <= 1);
            stream.request.put(bySequence ? "after_sequence" : "after_cursor", stream.cursor);
          }
          stream.open();
          return;
        }
      case "sleep_ms":
        sleep(((Number) step.get("sleep_ms")).longValue());
        return;
      default:
        throw new ScenarioError("unknown step kind " + kind);
    }
  }

  private void call(Map<String, Object> step, Map<String, Object> variables) {
    Object request = Match.substitute(step.getOrDefault("request", Map.of()), variables);
    long timeoutMs = millis(step.get("timeout_ms"), DEFAULT_CALL_TIMEOUT_MS);
    Map<String, Object> data;
    try {
      data = unary(step.get("call"), request, timeoutMs);
    } catch (ContextEngineException e) {
      Failure failure = Failure.of(e);
      if (!step.containsKey("expect_error")) {
        throw new StepFailure("unexpected error: " + failure.describe());
      }
      checkError(Match.substitute(step.get("expect_error"), variables), failure);
      return;
    }
    if (step.containsKey("expect_error")) {
      throw new StepFailure("expected an error, got " + show(data));
    }
    if (step.containsKey("expect")) {
      Match.match(Match.substitute(step.get("expect"), variables), data, "response");
    }
    capture(step, variables, data);
  }

  private void poll(Map<String, Object> step, Map<String, Object> variables) {
    Object request = Match.substitute(step.getOrDefault("request", Map.of()), variables);
    Object until = Match.substitute(step.getOrDefault("until", Map.of()), variables);
    long timeoutMs = millis(step.get("timeout_ms"), DEFAULT_POLL_TIMEOUT_MS);
    long interval = millis(step.get("interval_ms"), DEFAULT_POLL_INTERVAL_MS);
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (true) {
      Map<String, Object> last;
      try {
        last = unary(step.get("poll"), request, DEFAULT_CALL_TIMEOUT_MS);
      } catch (ContextEngineException e) {
        throw new StepFailure("unexpected error while polling: " + Failure.of(e).describe());
      }
      try {
        Match.match(until, last, "response");
      } catch (StepFailure e) {
        if (System.currentTimeMillis() >= deadline) {
          throw new StepFailure("not reached within " + timeoutMs + " ms: " + e.getMessage());
        }
        sleep(interval);
        continue;
      }
      capture(step, variables, last);
      return;
    }
  }

  private void expectFrames(
      Map<String, Object> step, Map<String, Object> variables, ScenarioStream stream) {
    List<Object> expected =
        asList(Match.substitute(step.getOrDefault("frames", List.of()), variables));
    long deadline =
        System.currentTimeMillis() + millis(step.get("timeout_ms"), DEFAULT_FRAME_TIMEOUT_MS);
    List<Object> received = new ArrayList<>();
    for (int i = 0; i < expected.size(); i++) {
      Object exp = expected.get(i);
      boolean wantsHeartbeat = exp instanceof Map && asMap(exp).containsKey("heartbeat");
      Map<String, Object> frame = nextFrame(stream, deadline, wantsHeartbeat, "frame " + i);
      try {
        Match.match(exp, frame, "frames[" + i + "]");
      } catch (StepFailure e) {
        throw new StepFailure(e.getMessage() + " (frame: " + show(frame) + ")");
      }
      received.add(frame);
    }
    capture(step, variables, Map.of("frames", received));
  }

  private void expectNoFrames(Map<String, Object> step, ScenarioStream stream) {
    long deadline = System.currentTimeMillis() + millis(step.get("within_ms"), DEFAULT_QUIET_MS);
    while (true) {
      long remaining = deadline - System.currentTimeMillis();
      if (remaining <= 0) {
        return;
      }
      Next next = stream.next(remaining);
      if (next == null || next.frame() == null) {
        return;
      }
      if (!next.frame().containsKey("heartbeat")) {
        throw new StepFailure("expected no frame, got " + show(next.frame()));
      }
    }
  }

  private void expectStreamError(
      Map<String, Object> step, Map<String, Object> variables, ScenarioStream stream) {
    long deadline =
        System.currentTimeMillis() + millis(step.get("timeout_ms"), DEFAULT_FRAME_TIMEOUT_MS);
    Object expected = Match.substitute(step.getOrDefault("error", Map.of()), variables);
    while (true) {
      long remaining = deadline - System.currentTimeMillis();
      Next next = remaining > 0 ? stream.next(remaining) : null;
      if (next == null) {
        throw new StepFailure("timed out waiting for the stream to fail");
      }
      if (next.ended()) {
        throw new StepFailure("the stream ended without an error");
      }
      if (next.failure() != null) {
        checkError(expected, next.failure());
        return;
      }
      if (!next.frame().containsKey("heartbeat")) {
        throw new StepFailure("expected the stream to fail, got " + show(next.frame()));
      }
    }
  }

  private static Map<String, Object> nextFrame(
      ScenarioStream stream, long deadline, boolean wantsHeartbeat, String what) {
    while (true) {
      long remaining = deadline - System.currentTimeMillis();
      if (remaining <= 0) {
        throw new StepFailure("timed out waiting for " + what);
      }
      Next next = stream.next(remaining);
      if (next == null) {
        throw new StepFailure("timed out waiting for " + what);
      }
      if (next.ended()) {
        throw new StepFailure("the stream ended before " + what);
      }
      if (next.failure() != null) {
        throw new StepFailure(
            "the stream failed before " + what + ": " + next.failure().describe());
      }
      if (next.frame().containsKey("heartbeat") && !wantsHeartbeat) {
        continue;
      }
      return next.frame();
    }
  }

  private static void checkError(Object expected, Failure got) {
    Map<String, Object> exp = expected == null ? Map.of() : asMap(expected);
    Set<String> unknown = new TreeSet<>();
    for (String key : exp.keySet()) {
      if (!List.of("code", "reason", "metadata").contains(key)) {
        unknown.add(key);
      }
    }
    if (!unknown.isEmpty()) {
      throw new ScenarioError("unknown error key(s) " + show(new ArrayList<>(unknown)));
    }
    Map<String, Object> actual = new LinkedHashMap<>();
    actual.put("code", got.code());
    actual.put("reason", got.reason());
    actual.put("metadata", new LinkedHashMap<String, Object>(got.metadata()));
    Match.match(expected, actual, "error");
  }

  private static void capture(
      Map<String, Object> step, Map<String, Object> variables, Object data) {
    Object captures = step.get("capture");
    if (captures == null) {
      return;
    }
    for (Map.Entry<String, Object> entry : asMap(captures).entrySet()) {
      variables.put(entry.getKey(), Match.lookup(data, String.valueOf(entry.getValue())));
    }
  }

  private static ScenarioStream streamNamed(Map<String, ScenarioStream> streams, Object name) {
    ScenarioStream stream = streams.get(String.valueOf(name));
    if (stream == null) {
      throw new ScenarioError("no stream named " + show(name) + " (subscribe first)");
    }
    return stream;
  }

  /** Runs scenarios one after the other on one client; returns {passed, failed}. */
  public static int[] runScenarios(
      String target, List<Scenario> scenarios, Consumer<Map<String, Object>> emit) {
    try (ContextEngineClient client = ContextEngineClient.connect(target)) {
      Runner runner = new Runner(client, emit);
      int passed = 0;
      int failed = 0;
      for (Scenario scenario : scenarios) {
        if (runner.run(scenario)) {
          passed += 1;
        } else {
          failed += 1;
        }
      }
      return new int[] {passed, failed};
    }
  }

  public static void main(String[] args) throws IOException {
    String target = null;
    String report = null;
    String directory = null;
    List<String> only = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--target":
          target = args[++i];
          break;
        case "--report":
          report = args[++i];
          break;
        case "--only":
          only.add(args[++i]);
          break;
        default:
          directory = args[i];
      }
    }
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    if (target == null || directory == null) {
      System.err.println(
          "usage: Runner --target HOST:PORT [--only NAME]... [--report FILE] SCENARIO_DIR");
      System.exit(2);
    }
    List<Scenario> scenarios = loadScenarios(Path.of(directory), only);
    if (scenarios.isEmpty()) {
      System.err.println("no scenarios found in " + directory);
      System.exit(2);
    }
    List<String> lines = new ArrayList<>();
    final String reportFile = report;
    int[] totals =
        runScenarios(
            target,
            scenarios,
            result -> {
              String line = GSON.toJson(result);
              if (reportFile == null) {
                out.println(line);
                return;
              }
              lines.add(line);
              if ("fail".equals(result.get("status")) && result.get("step") != null) {
                out.println(
                    "FAIL "
                        + result.get("scenario")
                        + " step "
                        + result.get("step")
                        + " ("
                        + result.getOrDefault("label", "")
                        + "): "
                        + result.get("message"));
              }
            });
    if (reportFile != null) {
      Path path = Path.of(reportFile);
      if (path.getParent() != null) {
        Files.createDirectories(path.getParent());
      }
      Files.writeString(path, lines.stream().map(l -> l + "\n").collect(Collectors.joining()));
    }
    out.println("conformance (" + RUNNER + "): " + totals[0] + " passed, " + totals[1] + " failed");
    System.exit(totals[1] == 0 ? 0 : 1);
  }
}
