package dev.contextengine.client;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonParseException;
import com.google.gson.ToNumberPolicy;
import com.google.gson.reflect.TypeToken;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.ListValue;
import com.google.protobuf.NullValue;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.v1.CallContextToolRequest;
import dev.contextengine.v1.CallContextToolResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.FunctionCall;
import dev.contextengine.v1.FunctionResponse;
import dev.contextengine.v1.ListContextToolsResponse;
import dev.contextengine.v1.Part;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The context tools of one agent in one session: the helper a model loop uses ({@link
 * ContextEngineClient#contextTools}).
 *
 * <p>The engine declares and runs the seven tools ({@code ContextToolsService}), so this helper
 * only carries the session and the agent: {@link #declarations(Format)} gives the tools in a
 * provider's shape, {@link #answer} runs a google-genai style {@link FunctionCall} and returns the
 * {@link FunctionResponse} to append, {@link #run} runs a call an OpenAI or Anthropic model made
 * (its name and JSON arguments) and returns the result to send back. The call and its answer must
 * both be appended to the session (the call before the tool runs, as ADK's runner does): the
 * answer's edit is recorded when it is appended. The app's (or the session's) {@code
 * ContextToolsConfig.enabled} must be set.
 *
 * <pre>{@code
 * ContextTools tools = ce.contextTools(ref, "agent");
 * List<Map<String, Object>> declared = tools.declarations(ContextTools.Format.OPENAI_CHAT);
 * // the model calls context_hide: append its call, run it, append the answer
 * Map<String, Object> result = tools.run("context_hide", "{\"first\": 2, \"last\": 3}", "call-1", "inv-2");
 * }</pre>
 *
 * <p>Thread-safe; the declarations are read once and kept (they are the same for every app).
 */
public final class ContextTools {
  /** The context tools' names ({@code ListContextTools} declares them). */
  public static final Set<String> NAMES =
      Set.of(
          "context_status",
          "context_pin",
          "context_unpin",
          "context_hide",
          "context_summarize",
          "context_expand",
          "context_search");

  /** The providers' shapes of the declarations. */
  public enum Format {
    /** google-genai {@code FunctionDeclaration}s (snake_case JSON). */
    GENAI,
    /** OpenAI Chat Completions tools: {@code {"type": "function", "function": {...}}}. */
    OPENAI_CHAT,
    /** OpenAI Responses API tools: {@code {"type": "function", "name", ...}}. */
    OPENAI_RESPONSES,
    /** Anthropic tools: {@code {"name", "description", "input_schema"}}. */
    ANTHROPIC;

    /**
     * The format's name as the other clients spell it ({@code "genai"}, {@code "openai_chat"},
     * ...).
     */
    public String wireName() {
      return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The format named {@code name} ({@code "genai"}, {@code "openai_chat"}, {@code
     * "openai_responses"}, {@code "anthropic"}).
     */
    public static Format of(String name) {
      for (Format format : values()) {
        if (format.wireName().equals(name)) {
          return format;
        }
      }
      throw new IllegalArgumentException(
          "unknown format " + name + " (genai, openai_chat, openai_responses or anthropic)");
    }
  }

  // JSON texts of the providers' tools: whole numbers as Long, as every result of this class.
  private static final Gson GSON =
      new GsonBuilder().setObjectToNumberStrategy(ToNumberPolicy.LONG_OR_DOUBLE).create();
  private static final Type JSON_OBJECT = new TypeToken<Map<String, Object>>() {}.getType();
  private static final double EXACT_INTEGERS = 9007199254740992.0; // 2^53

  private final ContextEngineClient client;
  private final String appName;
  private final String userId;
  private final String sessionId;
  private final String agentName;
  private final String branch;
  private final String isolationScope;
  private final AtomicReference<ListContextToolsResponse> listed = new AtomicReference<>();

  /**
   * The tools of {@code agentName} in a session, through {@code client}; {@code branch} and {@code
   * isolationScope} (null: none) are the agent's, as in its {@code BuildContext} requests.
   */
  public ContextTools(
      ContextEngineClient client,
      String appName,
      String userId,
      String sessionId,
      String agentName,
      String branch,
      String isolationScope) {
    this.client = Objects.requireNonNull(client, "client");
    this.appName = Objects.requireNonNull(appName, "appName");
    this.userId = Objects.requireNonNull(userId, "userId");
    this.sessionId = Objects.requireNonNull(sessionId, "sessionId");
    this.agentName = agentName == null ? "" : agentName;
    this.branch = branch;
    this.isolationScope = isolationScope;
  }

  /** The session. */
  public SessionRef session() {
    return new SessionRef(appName, userId, sessionId);
  }

  /** The agent whose context the tools look at and edit. */
  public String agentName() {
    return agentName;
  }

  /** Whether {@code name} is a context tool's. */
  public static boolean handles(String name) {
    return NAMES.contains(name);
  }

  /** The tools as google-genai {@code FunctionDeclaration}s (JSON objects). */
  public List<Map<String, Object>> declarations() {
    return declarations(Format.GENAI);
  }

  /**
   * The tools in a provider's shape, as JSON objects (read once with {@code ListContextTools}, then
   * kept). Blocks; throws {@link ContextEngineException}.
   */
  public List<Map<String, Object>> declarations(Format format) {
    ListContextToolsResponse known = listed.get();
    if (known == null) {
      known = client.listContextTools(appName, userId);
      listed.compareAndSet(null, known);
    }
    return declarations(known, format);
  }

  /** The tools of a {@code ListContextTools} answer in a provider's shape, as JSON objects. */
  public static List<Map<String, Object>> declarations(
      ListContextToolsResponse listed, Format format) {
    List<Map<String, Object>> out = new ArrayList<>();
    if (format == Format.GENAI) {
      for (Struct declaration : listed.getFunctionDeclarationsList()) {
        out.add(json(declaration));
      }
      return out;
    }
    List<String> texts;
    switch (format) {
      case OPENAI_CHAT:
        texts = listed.getOpenaiChatToolsList();
        break;
      case OPENAI_RESPONSES:
        texts = listed.getOpenaiResponsesToolsList();
        break;
      default:
        texts = listed.getAnthropicToolsList();
    }
    for (String text : texts) {
      out.add(GSON.fromJson(text, JSON_OBJECT));
    }
    return out;
  }

  /** The {@code CallContextTool} request of a call of this agent in this session. */
  public CallContextToolRequest request(FunctionCall call, String invocationId) {
    CallContextToolRequest.Builder out =
        CallContextToolRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setSessionId(sessionId)
            .setAgentName(agentName)
            .setCall(Objects.requireNonNull(call, "call"))
            .setInvocationId(invocationId == null ? "" : invocationId);
    if (branch != null) {
      out.setBranch(branch);
    }
    if (isolationScope != null) {
      out.setIsolationScope(isolationScope);
    }
    return out.build();
  }

  /**
   * The engine's whole answer to a call: the function response, the edits it makes once appended,
   * and the refusal when there is one. Never retried (a summary may be appended). Blocks; throws
   * {@link ContextEngineException}.
   */
  public CallContextToolResponse call(FunctionCall call, String invocationId) {
    return client.callContextTool(request(call, invocationId));
  }

  /** {@link #call} without blocking (cancelling the future cancels the call). */
  public CompletableFuture<CallContextToolResponse> callAsync(
      FunctionCall call, String invocationId) {
    return client.callContextToolAsync(request(call, invocationId));
  }

  /** The {@link FunctionResponse} answering {@code call} (append it in the answer event). */
  public FunctionResponse answer(FunctionCall call, String invocationId) {
    return call(call, invocationId).getResponse();
  }

  /**
   * Runs a call an OpenAI or Anthropic model made, its arguments the JSON text OpenAI sends ({@code
   * ""}: none), and returns the result to send back as the tool's output (JSON values, whole
   * numbers as {@link Long}). {@code callId} ({@code ""}: none) is copied to the answer. Arguments
   * that are not a JSON object are an {@link IllegalArgumentException}; arguments of the wrong
   * shape for the tool are answered to the model ({@code ok: false}).
   */
  public Map<String, Object> run(
      String name, String arguments, String callId, String invocationId) {
    return json(answer(functionCall(name, arguments, callId), invocationId).getResponse());
  }

  /**
   * {@link #run(String, String, String, String)} with the arguments as JSON values (Anthropic's
   * {@code input}).
   */
  public Map<String, Object> run(
      String name, Map<String, ?> arguments, String callId, String invocationId) {
    return json(answer(functionCall(name, arguments, callId), invocationId).getResponse());
  }

  /** A {@link FunctionCall} of {@code name} with arguments in JSON text ({@code ""}: none). */
  public static FunctionCall functionCall(String name, String arguments, String callId) {
    Struct.Builder args = Struct.newBuilder();
    if (arguments != null && !arguments.isBlank()) {
      try {
        JsonFormat.parser().merge(arguments, args);
      } catch (InvalidProtocolBufferException | JsonParseException e) {
        throw new IllegalArgumentException(
            "the arguments of " + name + " are not a JSON object: " + e.getMessage(), e);
      }
    }
    return functionCall(name, args.build(), callId);
  }

  /** A {@link FunctionCall} of {@code name} with arguments as JSON values (maps, lists, ...). */
  public static FunctionCall functionCall(String name, Map<String, ?> arguments, String callId) {
    return functionCall(name, struct(arguments == null ? Map.of() : arguments), callId);
  }

  private static FunctionCall functionCall(String name, Struct args, String callId) {
    FunctionCall.Builder call =
        FunctionCall.newBuilder().setName(Objects.requireNonNull(name, "name")).setArgs(args);
    if (callId != null && !callId.isEmpty()) {
      call.setId(callId);
    }
    return call.build();
  }

  /**
   * The event of a model's call (role "model"), to append before the call runs: the log holds the
   * call, and the engine looks for it when the answer is appended.
   */
  public static Event callEvent(String author, String invocationId, FunctionCall call) {
    return event(author, invocationId, "model", Part.newBuilder().setFunctionCall(call).build());
  }

  /** The event of a call's answer (role "user"), to append: the engine records its edit on it. */
  public static Event answerEvent(String author, String invocationId, FunctionResponse response) {
    return event(
        author, invocationId, "user", Part.newBuilder().setFunctionResponse(response).build());
  }

  private static Event event(String author, String invocationId, String role, Part part) {
    return Event.newBuilder()
        .setAuthor(Objects.requireNonNull(author, "author"))
        .setInvocationId(invocationId == null ? "" : invocationId)
        .setContent(Content.newBuilder().setRole(role).addParts(part))
        .build();
  }

  /**
   * A {@code Struct} as JSON values: maps, lists, strings, booleans, null, and numbers as {@link
   * Long} when whole (below 2^53) else {@link Double}: a Struct holds every number as a double, and
   * a model reads {@code 12} better than {@code 12.0}.
   */
  public static Map<String, Object> json(Struct struct) {
    Map<String, Object> out = new LinkedHashMap<>();
    struct.getFieldsMap().forEach((key, value) -> out.put(key, json(value)));
    return out;
  }

  /** A protobuf {@code Value} as a JSON value (see {@link #json(Struct)}). */
  public static Object json(Value value) {
    switch (value.getKindCase()) {
      case NUMBER_VALUE:
        double number = value.getNumberValue();
        if (number == Math.rint(number) && Math.abs(number) < EXACT_INTEGERS) {
          return (long) number;
        }
        return number;
      case STRING_VALUE:
        return value.getStringValue();
      case BOOL_VALUE:
        return value.getBoolValue();
      case STRUCT_VALUE:
        return json(value.getStructValue());
      case LIST_VALUE:
        List<Object> list = new ArrayList<>();
        for (Value item : value.getListValue().getValuesList()) {
          list.add(json(item));
        }
        return list;
      default:
        return null;
    }
  }

  /**
   * JSON values (maps with string keys, lists, strings, numbers, booleans, null) as a {@code
   * Struct}.
   */
  public static Struct struct(Map<String, ?> values) {
    Struct.Builder out = Struct.newBuilder();
    values.forEach((key, value) -> out.putFields(key, value(value, key)));
    return out.build();
  }

  private static Value value(Object value, String where) {
    if (value == null) {
      return Value.newBuilder().setNullValue(NullValue.NULL_VALUE).build();
    }
    if (value instanceof Boolean) {
      return Value.newBuilder().setBoolValue((Boolean) value).build();
    }
    if (value instanceof Number) {
      return Value.newBuilder().setNumberValue(((Number) value).doubleValue()).build();
    }
    if (value instanceof CharSequence) {
      return Value.newBuilder().setStringValue(value.toString()).build();
    }
    if (value instanceof Map) {
      Struct.Builder struct = Struct.newBuilder();
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
        if (!(entry.getKey() instanceof String)) {
          throw new IllegalArgumentException(
              where + ": a JSON object's keys are strings, not " + entry.getKey());
        }
        String key = (String) entry.getKey();
        struct.putFields(key, value(entry.getValue(), where + "." + key));
      }
      return Value.newBuilder().setStructValue(struct).build();
    }
    if (value instanceof Iterable) {
      ListValue.Builder list = ListValue.newBuilder();
      int i = 0;
      for (Object item : (Iterable<?>) value) {
        list.addValues(value(item, where + "[" + i++ + "]"));
      }
      return Value.newBuilder().setListValue(list).build();
    }
    throw new IllegalArgumentException(
        where + ": not a JSON value (" + value.getClass().getName() + ")");
  }

  @Override
  public String toString() {
    return "ContextTools["
        + appName
        + "/"
        + userId
        + "/"
        + sessionId
        + ", agent "
        + agentName
        + "]";
  }
}
