package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.adk.JsonBaseModel;
import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.events.EventCompaction;
import com.google.adk.events.ToolConfirmation;
import com.google.adk.sessions.State;
import com.google.genai.types.Blob;
import com.google.genai.types.Content;
import com.google.genai.types.CustomMetadata;
import com.google.genai.types.FinishReason;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.FunctionResponse;
import com.google.genai.types.GenerateContentResponseUsageMetadata;
import com.google.genai.types.GroundingMetadata;
import com.google.genai.types.Part;
import com.google.genai.types.Transcription;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.contextengine.client.Sidecar;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Event, content and state conversion: ADK Java's own events and the golden engine events. */
class AdkConvertTest {
  static final Path GOLDEN = Sidecar.REPO.resolve("tests/golden/events");

  static JsonNode json(Object model) throws Exception {
    return JsonBaseModel.getMapper().readTree(JsonBaseModel.toJsonString(model));
  }

  /** An ADK Java event with every field ADK Java's Event has. */
  static Event richEvent() {
    Map<String, Object> args = new LinkedHashMap<>();
    args.put("amount", 7);
    args.put("big", 5_000_000_000L);
    args.put("ratio", 2.5);
    args.put("nested", Map.of("list", List.of(1, "two", true)));
    ConcurrentHashMap<String, Object> delta = new ConcurrentHashMap<>();
    delta.put("count", 3);
    delta.put("gone", State.REMOVED);
    delta.put("user:name", "Ada");
    ToolConfirmation confirmation =
        ToolConfirmation.builder().hint("ok?").confirmed(true).payload(Map.of("n", 1)).build();
    EventActions actions =
        EventActions.builder()
            .skipSummarization(true)
            .stateDelta(delta)
            .artifactDelta(Map.of("report.txt", 2))
            .transferToAgent("helper")
            .escalate(false)
            .requestedAuthConfigs(
                new ConcurrentHashMap<>(Map.of("fc-1", Map.of("scheme", "oauth"))))
            .requestedToolConfirmations(new ConcurrentHashMap<>(Map.of("fc-2", confirmation)))
            .endOfAgent(true)
            .compaction(
                EventCompaction.builder()
                    .startTimestamp(1_700_000_000_123L)
                    .endTimestamp(1_700_000_100_456L)
                    .compactedContent(Content.fromParts(Part.fromText("summary")))
                    .build())
            .build();
    Content content =
        Content.builder()
            .role("model")
            .parts(
                List.of(
                    Part.fromText("héllo ✓"),
                    Part.builder()
                        .text("thinking")
                        .thought(true)
                        .thoughtSignature(new byte[] {1, 2, 3})
                        .build(),
                    Part.builder()
                        .functionCall(
                            FunctionCall.builder().id("fc-1").name("convert").args(args).build())
                        .build(),
                    Part.builder()
                        .functionResponse(
                            FunctionResponse.builder()
                                .id("fc-0")
                                .name("lookup")
                                .response(Map.of("usd", 14))
                                .build())
                        .build(),
                    Part.builder()
                        .inlineData(
                            Blob.builder()
                                .mimeType("image/png")
                                .data(new byte[] {0, 1, (byte) 255})
                                .build())
                        .build()))
            .build();
    return Event.builder()
        .id("e-1")
        .invocationId("inv-1")
        .author("root")
        .content(content)
        .actions(actions)
        .longRunningToolIds(Set.of("fc-1"))
        .turnComplete(true)
        .errorCode(new FinishReason("MALFORMED_FUNCTION_CALL"))
        .errorMessage("bad call")
        .finishReason(new FinishReason(FinishReason.Known.STOP))
        .usageMetadata(
            GenerateContentResponseUsageMetadata.builder()
                .promptTokenCount(10)
                .candidatesTokenCount(5)
                .totalTokenCount(15)
                .build())
        .avgLogprobs(-0.25)
        .interrupted(false)
        .branch("root.helper")
        .groundingMetadata(GroundingMetadata.builder().webSearchQueries(List.of("weather")).build())
        .customMetadata(
            List.of(
                CustomMetadata.builder().key("k").stringValue("v").build(),
                CustomMetadata.builder().key("n").numericValue(3.5f).build()))
        .modelVersion("m-1")
        .inputTranscription(Transcription.builder().text("in").finished(true).build())
        .outputTranscription(Transcription.builder().text("out").finished(false).build())
        .timestamp(1_700_000_200_789L)
        .build();
  }

  @Test
  void adkJavaEventRoundTripsWithEveryField() throws Exception {
    Event event = richEvent();
    dev.contextengine.v1.Event proto = AdkConvert.eventToProto(event);
    assertEquals(1_700_000_200.789, proto.getTimestamp(), 1e-9);
    assertEquals(1_700_000_000.123, proto.getActions().getCompaction().getStartTimestamp(), 1e-9);
    assertTrue(
        proto.getActions().getStateDelta().getFieldsOrThrow("gone").hasNullValue(),
        "State.REMOVED is stored as null");
    assertEquals("v", proto.getCustomMetadata().getFieldsOrThrow("k").getStringValue());
    Event back = AdkConvert.eventFromProto(proto);
    assertEquals(json(event), json(back));
    assertSame(State.REMOVED, back.actions().stateDelta().get("gone"));
    Map<String, Object> argsBack =
        back.content().get().parts().get().get(2).functionCall().get().args().get();
    assertInstanceOf(Integer.class, argsBack.get("amount"));
    assertInstanceOf(Long.class, argsBack.get("big"));
    assertInstanceOf(Double.class, argsBack.get("ratio"));
    assertEquals(3, back.actions().stateDelta().get("count"));
  }

  @Test
  void nullsInArgumentsAndResponsesAreStored() {
    Map<String, Object> args = new LinkedHashMap<>();
    args.put("city", null);
    Map<String, Object> nested = new LinkedHashMap<>();
    nested.put("k", 1);
    nested.put("gone", null);
    Map<String, Object> response = new LinkedHashMap<>();
    response.put("result", null);
    response.put("nested", nested);
    Event event =
        Event.builder()
            .id("e-n")
            .author("root")
            .timestamp(1000L)
            .content(
                Content.builder()
                    .role("model")
                    .parts(
                        List.of(
                            Part.builder()
                                .functionCall(
                                    FunctionCall.builder().id("c").name("f").args(args).build())
                                .build(),
                            Part.builder()
                                .functionResponse(
                                    FunctionResponse.builder()
                                        .id("c")
                                        .name("f")
                                        .response(response)
                                        .build())
                                .build()))
                    .build())
            .build();
    dev.contextengine.v1.Content content = AdkConvert.eventToProto(event).getContent();
    // ADK's own mapper would write {} and {"nested": {"k": 1}}: google-adk keeps the None
    assertEquals(
        Value.KindCase.NULL_VALUE,
        content.getParts(0).getFunctionCall().getArgs().getFieldsOrThrow("city").getKindCase());
    Struct stored = content.getParts(1).getFunctionResponse().getResponse();
    assertEquals(Value.KindCase.NULL_VALUE, stored.getFieldsOrThrow("result").getKindCase());
    assertEquals(
        Value.KindCase.NULL_VALUE,
        stored.getFieldsOrThrow("nested").getStructValue().getFieldsOrThrow("gone").getKindCase());
  }

  @Test
  void deletedArtifactIdsAreRefusedNotDropped() {
    Event event = Event.builder().id("e-2").author("user").timestamp(1000L).build();
    event.actions().setDeletedArtifactIds(Set.of("a.txt"));
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> AdkConvert.eventToProto(event));
    assertTrue(error.getMessage().contains("deletedArtifactIds"), error.getMessage());
  }

  static Stream<Path> golden() throws Exception {
    return Files.list(GOLDEN).filter(p -> p.toString().endsWith(".binpb")).sorted();
  }

  /**
   * A golden engine event (written by google-adk 2.13) read into ADK Java and written back is the
   * same event, but for what ADK Java cannot hold (AdkConvert.FIELDS_ADK_JAVA_LACKS, the engine's
   * own fields, custom metadata values other than strings/numbers/string lists) and the timestamps,
   * rounded to the millisecond.
   */
  @ParameterizedTest
  @MethodSource("golden")
  void goldenEventsRoundTrip(Path file) throws Exception {
    dev.contextengine.v1.Event original =
        dev.contextengine.v1.Event.parseFrom(Files.readAllBytes(file));
    dev.contextengine.v1.Event back = AdkConvert.eventToProto(AdkConvert.eventFromProto(original));
    dev.contextengine.v1.Event want = expected(original);
    if (!want.equals(back)) {
      List<String> paths = new java.util.ArrayList<>();
      diff("", protoJson(want), protoJson(back), paths);
      paths.removeIf(
          p ->
              AdkConvert.GENAI_JAVA_LACKS.stream()
                  .anyMatch(lost -> p.replaceAll("\\[\\d+\\]", "[]").startsWith("." + lost)));
      assertEquals(List.of(), paths, file.getFileName().toString());
    }
  }

  static dev.contextengine.v1.Event expected(dev.contextengine.v1.Event original) {
    dev.contextengine.v1.Event.Builder out = original.toBuilder().clearSequence().clearPinned();
    dev.contextengine.v1.EventActions.Builder actions = out.getActionsBuilder();
    for (String field : AdkConvert.FIELDS_ADK_JAVA_LACKS) {
      if (field.startsWith("actions.")) {
        clear(actions, field.substring("actions.".length()));
      } else {
        clear(out, field);
      }
    }
    List<String> ids = new java.util.ArrayList<>(original.getLongRunningToolIdsList());
    java.util.Collections.sort(ids);
    out.clearLongRunningToolIds().addAllLongRunningToolIds(ids);
    out.setTimestamp(Math.round(original.getTimestamp() * 1000.0) / 1000.0);
    if (actions.hasCompaction()) {
      dev.contextengine.v1.EventCompaction.Builder c = actions.getCompactionBuilder();
      c.clearStartSequence().clearEndSequence();
      if (c.hasStartTimestamp()) {
        c.setStartTimestamp(Math.round(c.getStartTimestamp() * 1000.0) / 1000.0);
      }
      if (c.hasEndTimestamp()) {
        c.setEndTimestamp(Math.round(c.getEndTimestamp() * 1000.0) / 1000.0);
      }
    }
    if (out.hasCustomMetadata()) {
      Struct.Builder kept = Struct.newBuilder();
      out.getCustomMetadata()
          .getFieldsMap()
          .forEach(
              (k, v) -> {
                if (v.hasStringValue() || v.hasNumberValue() || allStrings(v)) {
                  kept.putFields(
                      k,
                      v.hasNumberValue()
                          ? Value.newBuilder().setNumberValue((float) v.getNumberValue()).build()
                          : v);
                }
              });
      out.setCustomMetadata(kept);
    }
    if (!original.hasActions()) {
      out.clearActions();
    }
    return out.build();
  }

  static JsonNode protoJson(Message m) throws Exception {
    return JsonBaseModel.getMapper()
        .readTree(com.google.protobuf.util.JsonFormat.printer().print(m));
  }

  /** The JSON paths where two trees differ. */
  static void diff(String path, JsonNode a, JsonNode b, List<String> out) {
    if (a != null && b != null && a.isObject() && b.isObject()) {
      Set<String> keys = new java.util.TreeSet<>();
      a.fieldNames().forEachRemaining(keys::add);
      b.fieldNames().forEachRemaining(keys::add);
      for (String k : keys) {
        diff(path + "." + k, a.get(k), b.get(k), out);
      }
    } else if (a != null && b != null && a.isArray() && b.isArray() && a.size() == b.size()) {
      for (int i = 0; i < a.size(); i++) {
        diff(path + "[" + i + "]", a.get(i), b.get(i), out);
      }
    } else if (a == null || !a.equals(b)) {
      out.add(path + ": " + a + " != " + b);
    }
  }

  static boolean allStrings(Value v) {
    return v.hasListValue()
        && v.getListValue().getValuesList().stream().allMatch(Value::hasStringValue);
  }

  static void clear(Message.Builder builder, String name) {
    FieldDescriptor field = builder.getDescriptorForType().findFieldByName(name);
    assertFalse(field == null, "no field " + name);
    builder.clearField(field);
  }

  @Test
  void stateKeepsIntegersAndDropsNulls() {
    Map<String, Object> state = new LinkedHashMap<>();
    state.put("n", 2);
    state.put("x", 2.5);
    state.put("gone", State.REMOVED);
    state.put("list", List.of(1, 2));
    Struct struct = AdkConvert.stateToStruct(state);
    assertTrue(struct.getFieldsOrThrow("gone").hasNullValue());
    Map<String, Object> back = AdkConvert.stateFromStruct(struct);
    assertEquals(Map.of("n", 2, "x", 2.5, "list", List.of(1, 2)), back);
  }
}
