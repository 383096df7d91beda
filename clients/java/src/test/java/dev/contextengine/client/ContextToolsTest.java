package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.CallContextToolRequest;
import dev.contextengine.v1.CallContextToolResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.ContextEdit;
import dev.contextengine.v1.ContextToolsConfig;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.FunctionCall;
import dev.contextengine.v1.FunctionResponse;
import dev.contextengine.v1.ListContextToolsRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The context tools through {@link ContextTools}, against a real sidecar. */
class ContextToolsTest {
  private static ContextEngineClient ce;

  @BeforeAll
  static void connect() {
    ce =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .build();
  }

  @AfterAll
  static void close() {
    ce.close();
  }

  static ContextEngineException thrown(Supplier<?> call) {
    return assertThrows(ContextEngineException.class, call::get);
  }

  /** A session of a new app whose configuration enables the tools (or not). */
  static SessionRef session(boolean enabled) {
    String app = Sidecar.uniqueApp("java-tools");
    ce.updateAppConfig(
        UpdateAppConfigRequest.newBuilder()
            .setConfig(
                AppConfig.newBuilder()
                    .setAppName(app)
                    .setContextTools(
                        ContextToolsConfig.newBuilder()
                            .setEnabled(enabled)
                            .setMaxHiddenFraction(1)))
            .build());
    return SessionRef.of(
        ce.createSession(CreateSessionRequest.newBuilder().setAppName(app).setUserId("u").build())
            .getSession());
  }

  /** Events 1-4: a finished turn with a bulky tool result; 5: the current turn's message. */
  static void bulkyTurn(SessionRef ref) {
    StringBuilder rows = new StringBuilder();
    for (int i = 0; i < 40; i++) {
      rows.append("row")
          .append(i)
          .append(": water level ")
          .append(i * 7 % 31)
          .append(" cm at station S")
          .append(i)
          .append(" measured twice; ");
    }
    Struct args = ContextTools.struct(Map.of("topic", "tides"));
    ce.appendEvents(
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .addEvents(SessionRef.said("user", "i1", "Find the tide tables."))
            .addEvents(
                ContextTools.callEvent(
                    "agent",
                    "i1",
                    FunctionCall.newBuilder().setId("c1").setName("fetch").setArgs(args).build()))
            .addEvents(
                ContextTools.answerEvent(
                    "agent",
                    "i1",
                    FunctionResponse.newBuilder()
                        .setId("c1")
                        .setName("fetch")
                        .setResponse(ContextTools.struct(Map.of("rows", rows.toString())))
                        .build()))
            .addEvents(SessionRef.said("agent", "i1", "High tide at 06:12, code TIDE-7."))
            .addEvents(SessionRef.said("user", "i2", "Tidy up your context."))
            .build());
  }

  static String texts(BuildContextResponse context) {
    StringBuilder out = new StringBuilder();
    for (Content content : context.getContentsList()) {
      out.append(content).append('\n');
    }
    return out.toString();
  }

  @Test
  void declarationsInEveryProvidersShape() {
    ContextTools tools =
        ce.contextTools(new SessionRef(Sidecar.uniqueApp("java-tools"), "u", "s"), "agent");
    List<String> names = new ArrayList<>();
    for (Map<String, Object> declaration : tools.declarations()) {
      names.add((String) declaration.get("name"));
    }
    assertEquals(
        List.of(
            "context_status",
            "context_pin",
            "context_unpin",
            "context_hide",
            "context_summarize",
            "context_expand",
            "context_search"),
        names);
    assertEquals(ContextTools.NAMES, Set.copyOf(names));
    @SuppressWarnings("unchecked")
    Map<String, Object> pin = (Map<String, Object>) tools.declarations().get(1).get("parameters");
    assertEquals("OBJECT", pin.get("type"));
    assertEquals(List.of("first"), pin.get("required"));

    Map<String, Object> chat = tools.declarations(ContextTools.Format.OPENAI_CHAT).get(3);
    assertEquals("function", chat.get("type"));
    assertEquals("context_hide", ((Map<?, ?>) chat.get("function")).get("name"));
    Map<String, Object> responses = tools.declarations(ContextTools.Format.OPENAI_RESPONSES).get(4);
    assertEquals("context_summarize", responses.get("name"));
    assertTrue(responses.containsKey("parameters"), responses.toString());
    Map<String, Object> anthropic = tools.declarations(ContextTools.Format.ANTHROPIC).get(6);
    assertEquals("context_search", anthropic.get("name"));
    assertTrue(anthropic.containsKey("input_schema"), anthropic.toString());

    assertTrue(ContextTools.handles("context_hide"));
    assertFalse(ContextTools.handles("fetch"));
    assertEquals(ContextTools.Format.OPENAI_RESPONSES, ContextTools.Format.of("openai_responses"));
    assertEquals("anthropic", ContextTools.Format.ANTHROPIC.wireName());
    assertThrows(IllegalArgumentException.class, () -> ContextTools.Format.of("gemini"));
  }

  @Test
  void aHiddenRangeIsOneStubUntilARewind() {
    SessionRef ref = session(true);
    bulkyTurn(ref);
    ContextTools tools = ce.contextTools(ref, "agent");
    // the model's call is appended first, as ADK's runner does
    FunctionCall hide =
        ContextTools.functionCall(
            "context_hide", Map.of("first", 2, "last", 3, "stub", "The tide tables."), "c2");
    ce.appendEvent(ref.appendEvent(ContextTools.callEvent("agent", "i2", hide)));
    CallContextToolResponse answer = tools.call(hide, "i2");
    assertFalse(answer.hasRefusal());
    assertEquals(
        List.of(
            ContextEdit.newBuilder()
                .setHide(
                    dev.contextengine.v1.HiddenRange.newBuilder()
                        .setRange(
                            dev.contextengine.v1.SequenceRange.newBuilder().setFirst(2).setLast(3))
                        .setStub("The tide tables."))
                .build()),
        answer.getEditsList());
    assertEquals("c2", answer.getResponse().getId());
    assertEquals("context_hide", answer.getResponse().getName());
    Map<String, Object> result = ContextTools.json(answer.getResponse().getResponse());
    assertEquals(true, result.get("ok"));
    assertTrue(result.get("tokens_hidden") instanceof Long, result.toString());
    assertTrue((Long) result.get("tokens_hidden") > 100, result.toString());

    // appending the answer records the edit on it
    Event stored =
        ce.appendEvent(
                ref.appendEvent(ContextTools.answerEvent("agent", "i2", answer.getResponse())))
            .getEvent();
    assertEquals(7, stored.getSequence());
    assertEquals(answer.getEditsList(), stored.getContextEditsList());
    String context = texts(ce.buildContext(ref.buildContext("agent")));
    assertFalse(context.contains("row39"), context);
    assertTrue(context.contains("The tide tables."), context);

    // expand reads the hidden events back: an OpenAI-style call, its arguments JSON text
    Map<String, Object> expanded = tools.run("context_expand", "{\"sequence\": 2}", "c3", "i2");
    assertEquals("hidden_range", expanded.get("kind"));
    assertEquals(2L, expanded.get("first"));
    assertEquals(3L, expanded.get("last"));
    assertTrue(((String) expanded.get("text")).contains("row39: water level"), expanded.toString());

    // a rewind before the hiding turn brings the events back
    ce.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .setRewindBeforeInvocationId("i2")
            .build());
    assertTrue(texts(ce.buildContext(ref.buildContext("agent"))).contains("row39"));
  }

  @Test
  void theModelsMistakesAreAnsweredTheCallersFail() {
    SessionRef ref = session(true);
    bulkyTurn(ref);
    ContextTools tools =
        ce.contextTools(ref.appName(), ref.userId(), ref.sessionId(), "agent", null, null);
    // an Anthropic-style call, its input JSON values: the current turn is never edited
    Map<String, Object> refused =
        tools.run("context_hide", Map.of("first", 4, "last", 5), "c2", "i2");
    assertEquals(false, refused.get("ok"));
    assertEquals("CONTEXT_EDIT_REFUSED", refused.get("reason"));
    assertEquals("current_turn", refused.get("rule"));
    assertTrue(((String) refused.get("message")).contains("ends before 5"), refused.toString());
    CallContextToolResponse wrongShape =
        tools.call(
            ContextTools.functionCall("context_pin", "{\"first\": 2, \"where\": \"here\"}", "c3"),
            "i2");
    assertEquals("INVALID_TOOL_ARGUMENTS", wrongShape.getRefusal().getReason());
    assertEquals("call.args.where", wrongShape.getRefusal().getMetadataMap().get("field"));
    assertEquals(0, wrongShape.getEditsCount());
    // a read-only tool with no arguments at all
    Map<String, Object> status = tools.run("context_status", "", "", "i2");
    assertEquals(5L, status.get("current_turn_starts_at"));
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> largest = (List<Map<String, Object>>) status.get("largest_events");
    assertEquals(3L, largest.get(0).get("sequence"));
    Map<String, Object> search =
        tools.run("context_search", Map.of("query", "high tide code", "limit", 2), "c4", "i2");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> results = (List<Map<String, Object>>) search.get("results");
    assertEquals(4L, results.get(0).get("sequence"));

    assertThrows(
        IllegalArgumentException.class, () -> tools.run("context_status", "[1, 2]", "", "i2"));
    assertThrows(
        IllegalArgumentException.class, () -> tools.run("context_status", "{oops", "", "i2"));

    ContextEngineException unknown = thrown(() -> tools.run("delete_everything", "{}", "", "i2"));
    assertEquals(Status.Code.INVALID_ARGUMENT, unknown.code());
    assertEquals("UNKNOWN_CONTEXT_TOOL", unknown.reason());
    assertEquals("delete_everything", unknown.metadata().get("name"));
    ContextEngineException missing =
        thrown(
            () ->
                ce.contextTools(new SessionRef(ref.appName(), "u", "missing"), "agent")
                    .run("context_status", "", "", ""));
    assertEquals("SESSION_NOT_FOUND", missing.reason());
    SessionRef off = session(false);
    ContextEngineException disabled =
        thrown(() -> ce.contextTools(off, "agent").run("context_status", "", "", ""));
    assertEquals(Status.Code.FAILED_PRECONDITION, disabled.code());
    assertEquals("CONTEXT_TOOLS_DISABLED", disabled.reason());
    assertEquals(off.appName(), disabled.metadata().get("app_name"));
  }

  @Test
  void listingIsRetriedCallingNeverIs() {
    ClientTest.Attempts attempts = new ClientTest.Attempts();
    try (ContextEngineClient down =
        ContextEngineClient.builder()
            .target("127.0.0.1:" + Sidecar.closedPort())
            .intercept(attempts)
            .build()) {
      assertEquals(Status.Code.UNAVAILABLE, thrown(() -> down.listContextTools("a", "")).code());
      assertEquals(4, attempts.of("ListContextTools"), "a read is retried");
      ContextTools tools = down.contextTools(new SessionRef("a", "u", "s"), "agent");
      assertEquals(
          Status.Code.UNAVAILABLE, thrown(() -> tools.run("context_status", "", "", "")).code());
      assertEquals(1, attempts.of("CallContextTool"), "a call may append a summary: never retried");
      // missing ids are rejected before sending
      ContextEngineException noApp =
          thrown(() -> down.listContextTools(ListContextToolsRequest.getDefaultInstance()));
      assertEquals("MISSING_FIELD", noApp.reason());
      assertEquals(Map.of("field", "app_name"), noApp.metadata());
      assertTrue(noApp.clientSide());
      ContextEngineException noSession =
          thrown(
              () ->
                  down.callContextTool(
                      CallContextToolRequest.newBuilder().setAppName("a").setUserId("u").build()));
      assertEquals(Map.of("field", "session_id"), noSession.metadata());
      assertEquals(4, attempts.of("ListContextTools"));
      assertEquals(1, attempts.of("CallContextTool"));
    }
  }

  @Test
  void structsAndJsonValues() {
    Map<String, Object> values = new LinkedHashMap<>();
    values.put("n", 12);
    values.put("x", 1.5);
    values.put("big", 9007199254740992.0);
    values.put("none", null);
    values.put("list", Arrays.asList(1L, "two", true, Map.of("k", 3)));
    Struct struct = ContextTools.struct(values);
    assertEquals(Value.KindCase.NULL_VALUE, struct.getFieldsOrThrow("none").getKindCase());
    Map<String, Object> back = ContextTools.json(struct);
    assertEquals(12L, back.get("n"));
    assertEquals(1.5, back.get("x"));
    assertEquals(9007199254740992.0, back.get("big"), "2^53 and beyond stay doubles");
    assertTrue(back.containsKey("none"));
    assertNull(back.get("none"));
    assertEquals(List.of(1L, "two", true, Map.of("k", 3L)), back.get("list"));
    assertThrows(
        IllegalArgumentException.class, () -> ContextTools.struct(Map.of("when", new Object())));
    FunctionCall call = ContextTools.functionCall("context_pin", "  ", "");
    assertFalse(call.hasId());
    assertEquals(0, call.getArgs().getFieldsCount());
    assertEquals("c", ContextTools.functionCall("context_pin", Map.of("first", 1), "c").getId());
  }
}
