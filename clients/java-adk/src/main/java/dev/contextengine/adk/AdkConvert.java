package dev.contextengine.adk;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.IntNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.LongNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.JsonBaseModel;
import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import com.google.adk.sessions.State;
import com.google.genai.types.Content;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * ADK Java objects to and from {@code contextengine.v1} messages.
 *
 * <p>ADK Java's {@link Event} mirrors the engine's {@code Event} field for field (the engine's is
 * ADK Python's superset), so an event converts through its JSON form: ADK's own Jackson mapper
 * writes it, {@link JsonFormat} parses it strictly into the proto (a key the proto does not know is
 * an {@link IllegalArgumentException}, never dropped), and back. On the way:
 *
 * <ul>
 *   <li><b>Time</b>: ADK Java's {@code Event.timestamp} and {@code EventCompaction.start/
 *       endTimestamp} are epoch milliseconds, the engine's are seconds (a double); milliseconds
 *       survive a round trip exactly, an engine timestamp with finer precision (ADK Python's) is
 *       rounded to the millisecond.
 *   <li><b>{@link State#REMOVED}</b> in a state delta is stored as JSON {@code null}, which is what
 *       the engine (and ADK Python, which never deletes) keeps for it; read back, a {@code null} in
 *       a delta is {@link State#REMOVED} again and a {@code null} state value is an absent key
 *       (Java's concurrent maps hold no nulls), so a removal stays a removal.
 *   <li><b>Numbers</b> inside JSON-valued fields ({@code Struct}, {@code Value}, {@code ListValue}:
 *       state deltas, function-call arguments and responses, custom metadata, grounding) are
 *       doubles in protobuf; an integral one below 2^53 comes back as an {@link Integer} (a {@link
 *       Long} outside the int range), as ADK Java's tools produce them; {@code -0.0} stays a
 *       double. A double that happened to be integral ({@code 2.0}) therefore comes back as {@code
 *       2}, the one loss of this conversion.
 *   <li>The engine's own fields ({@code sequence}, {@code pinned}, {@code contextEdits}, {@code
 *       EventCompaction.start_sequence / end_sequence}) are left out, and so are fields of the
 *       engine's {@code Event} that ADK Java's has no place for ({@link #FIELDS_ADK_JAVA_LACKS}:
 *       they come from ADK Python or TypeScript writers, or from the engine's rewind).
 *   <li>{@code EventActions.deletedArtifactIds} has no place in the engine's {@code Event}: a
 *       non-empty set is refused ({@link IllegalArgumentException}) rather than dropped.
 * </ul>
 */
public final class AdkConvert {
  private static final ObjectMapper MAPPER = JsonBaseModel.getMapper();
  private static final JsonFormat.Parser PARSER = JsonFormat.parser();
  private static final JsonFormat.Printer PRINTER =
      JsonFormat.printer().omittingInsignificantWhitespace();
  private static final Set<String> JSON_VALUES =
      Set.of("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue");
  private static final double EXACT_INTEGERS = 9007199254740992.0; // 2^53

  /**
   * The engine's {@code Event} fields (proto names) that ADK Java 1.8's {@code Event} cannot hold:
   * an engine event read into ADK Java goes without them.
   */
  public static final Set<String> FIELDS_ADK_JAVA_LACKS =
      Set.of(
          "turn_complete_reason",
          "interaction_status",
          "live_session_resumption_update",
          "live_session_id",
          "go_away",
          "voice_activity",
          "logprobs_result",
          "cache_metadata",
          "citation_metadata",
          "interaction_id",
          "environment_id",
          "output",
          "node_info",
          "isolation_scope",
          "actions.transfer_reason",
          "actions.agent_state",
          "actions.rewind_before_invocation_id",
          "actions.route",
          "actions.render_ui_widgets",
          "actions.set_model_response");

  /**
   * What google-genai for Java 1.58 (ADK Java 1.8's) has no place for inside contents and
   * transcriptions, as JSON paths of the engine's event ({@code []}: any element); an engine event
   * written by ADK Python with these reads into ADK Java without them. {@code functionResponse.
   * parts} written by ADK Python is a struct with Python's snake_case keys, which genai for Java
   * does not read.
   */
  public static final List<String> GENAI_JAVA_LACKS =
      List.of(
          "content.parts[].audioTranscription",
          "content.parts[].mediaResolution.num_tokens",
          "content.parts[].functionResponse.parts[].inline_data",
          "content.parts[].functionResponse.parts[].file_data",
          "inputTranscription.startOffset",
          "inputTranscription.endOffset",
          "inputTranscription.speakerLabel",
          "inputTranscription.words",
          "outputTranscription.startOffset",
          "outputTranscription.endOffset",
          "outputTranscription.speakerLabel",
          "outputTranscription.words");

  private AdkConvert() {}

  // Events ---------------------------------------------------------------------------------------

  /**
   * The engine's event for an ADK Java event. Throws {@link IllegalArgumentException} if the event
   * has a field or value the engine's {@code Event} cannot hold (nothing is dropped silently).
   */
  public static dev.contextengine.v1.Event eventToProto(Event event) {
    ObjectNode tree = MAPPER.valueToTree(event);
    JsonNode actions = tree.get("actions");
    if (actions instanceof ObjectNode actionsNode) {
      removedToNull(event, actionsNode);
      JsonNode deleted = actionsNode.remove("deletedArtifactIds");
      if (deleted != null && !deleted.isNull() && deleted.size() > 0) {
        throw new IllegalArgumentException(
            "event "
                + event.id()
                + ": deletedArtifactIds "
                + deleted
                + " has no place in the engine's Event");
      }
      JsonNode compaction = actionsNode.get("compaction");
      if (compaction instanceof ObjectNode c) {
        millisToSeconds(c, "startTimestamp");
        millisToSeconds(c, "endTimestamp");
      }
    }
    millisToSeconds(tree, "timestamp");
    customMetadataToObject(tree);
    payloadsWithNulls(event, tree);
    if (tree.get("longRunningToolIds") instanceof ArrayNode ids) {
      // a set in ADK (Java and Python): stored sorted, so equal sets are equal events
      List<String> sorted = new ArrayList<>();
      ids.forEach(id -> sorted.add(id.asText()));
      java.util.Collections.sort(sorted);
      ArrayNode out = JsonNodeFactory.instance.arrayNode();
      sorted.forEach(out::add);
      tree.set("longRunningToolIds", out);
    }
    dev.contextengine.v1.Event.Builder out = dev.contextengine.v1.Event.newBuilder();
    merge(prune(dev.contextengine.v1.Event.getDescriptor(), tree), out, "event " + event.id());
    return out.build();
  }

  /** The ADK Java event of an engine event (see the class documentation for what is left out). */
  public static Event eventFromProto(dev.contextengine.v1.Event message) {
    ObjectNode tree = jsonOf(message);
    tree.remove("sequence");
    tree.remove("pinned");
    tree.remove("contextEdits");
    for (String lacking : FIELDS_ADK_JAVA_LACKS) {
      if (!lacking.startsWith("actions.")) {
        tree.remove(camel(lacking));
      }
    }
    JsonNode actions = tree.get("actions");
    if (actions instanceof ObjectNode a) {
      for (String lacking : FIELDS_ADK_JAVA_LACKS) {
        if (lacking.startsWith("actions.")) {
          a.remove(camel(lacking.substring("actions.".length())));
        }
      }
      if (a.get("requestedToolConfirmations") instanceof ObjectNode confirmations) {
        // proto3 leaves out false / "": ADK Java's builder requires both
        for (Map.Entry<String, JsonNode> item : confirmations.properties()) {
          if (item.getValue() instanceof ObjectNode confirmation) {
            if (!confirmation.has("confirmed")) {
              confirmation.put("confirmed", false);
            }
            if (!confirmation.has("hint")) {
              confirmation.put("hint", "");
            }
          }
        }
      }
      if (a.get("compaction") instanceof ObjectNode c) {
        c.remove("startSequence");
        c.remove("endSequence");
        secondsToMillis(c, "startTimestamp");
        secondsToMillis(c, "endTimestamp");
      }
    }
    secondsToMillis(tree, "timestamp");
    customMetadataToList(tree);
    try {
      return MAPPER.treeToValue(tree, Event.class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("event " + message.getId() + ": " + e.getMessage(), e);
    }
  }

  // Contents -------------------------------------------------------------------------------------

  /** google-genai's {@link Content} as the engine's {@code Content}. */
  public static dev.contextengine.v1.Content contentToProto(Content content) {
    ObjectNode tree = MAPPER.valueToTree(content);
    dev.contextengine.v1.Content.Builder out = dev.contextengine.v1.Content.newBuilder();
    merge(prune(dev.contextengine.v1.Content.getDescriptor(), tree), out, "content");
    return out.build();
  }

  /** The engine's {@code Content} as google-genai's {@link Content} (integral numbers restored). */
  public static Content contentFromProto(dev.contextengine.v1.Content message) {
    try {
      return MAPPER.treeToValue(jsonOf(message), Content.class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("content: " + e.getMessage(), e);
    }
  }

  // State and sessions ---------------------------------------------------------------------------

  /**
   * A state map as a {@code Struct}; values are made JSON by ADK's mapper (as its persistent
   * services do) and {@link State#REMOVED} becomes {@code null}.
   */
  public static Struct stateToStruct(Map<String, Object> state) {
    ObjectNode tree = JsonNodeFactory.instance.objectNode();
    for (Map.Entry<String, Object> entry : state.entrySet()) {
      Object value = entry.getValue();
      tree.set(
          entry.getKey(),
          value == null || value == State.REMOVED
              ? NullNode.getInstance()
              : MAPPER.valueToTree(value));
    }
    Struct.Builder out = Struct.newBuilder();
    merge(tree, out, "state");
    return out.build();
  }

  /**
   * A {@code Struct} as a mutable state map: integral numbers as {@link Integer} / {@link Long},
   * and keys whose value is {@code null} left out (Java's concurrent maps hold no nulls).
   */
  public static ConcurrentHashMap<String, Object> stateFromStruct(Struct struct) {
    ConcurrentHashMap<String, Object> out = new ConcurrentHashMap<>();
    struct
        .getFieldsMap()
        .forEach(
            (key, value) -> {
              Object plain = plain(value);
              if (plain != null) {
                out.put(key, plain);
              }
            });
    return out;
  }

  /** The ADK Java session of an engine session: merged state, events converted, time in ms. */
  public static Session sessionFromProto(dev.contextengine.v1.Session message) {
    List<Event> events = new ArrayList<>(message.getEventsCount());
    for (dev.contextengine.v1.Event event : message.getEventsList()) {
      events.add(eventFromProto(event));
    }
    return Session.builder(message.getId())
        .appName(message.getAppName())
        .userId(message.getUserId())
        .state(stateFromStruct(message.getState()))
        .events(events)
        .lastUpdateTime(instantOfSeconds(message.getLastUpdateTime()))
        .build();
  }

  /**
   * Any JSON-object-shaped value (a genai {@code Tool}, a {@code ToolConfig}) as a {@code Struct}.
   */
  public static Struct structOf(Object value) {
    Struct.Builder out = Struct.newBuilder();
    merge(MAPPER.valueToTree(value), out, value.getClass().getSimpleName());
    return out.build();
  }

  /** Epoch seconds (a double) as an {@link Instant}, to the microsecond. */
  public static Instant instantOfSeconds(double seconds) {
    long micros = Math.round(seconds * 1_000_000.0);
    return Instant.ofEpochSecond(
        Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
  }

  /** An {@link Instant} as epoch seconds (a double). */
  public static double secondsOf(Instant instant) {
    return instant.getEpochSecond() + instant.getNano() / 1e9;
  }

  /**
   * A Java value of a protobuf {@code Value}: null, Boolean, String, Integer/Long/Double, Map,
   * List.
   */
  public static Object plain(Value value) {
    switch (value.getKindCase()) {
      case NUMBER_VALUE:
        return number(value.getNumberValue());
      case STRING_VALUE:
        return value.getStringValue();
      case BOOL_VALUE:
        return value.getBoolValue();
      case STRUCT_VALUE:
        Map<String, Object> map = new LinkedHashMap<>();
        value.getStructValue().getFieldsMap().forEach((k, v) -> map.put(k, plain(v)));
        return map;
      case LIST_VALUE:
        List<Object> list = new ArrayList<>();
        for (Value item : value.getListValue().getValuesList()) {
          list.add(plain(item));
        }
        return list;
      default:
        return null;
    }
  }

  // Internals ------------------------------------------------------------------------------------

  private static Object number(double value) {
    if (isRestorable(value)) {
      long integral = (long) value;
      if (integral >= Integer.MIN_VALUE && integral <= Integer.MAX_VALUE) {
        return (int) integral;
      }
      return integral;
    }
    return value;
  }

  private static boolean isRestorable(double value) {
    return value == Math.rint(value)
        && Math.abs(value) < EXACT_INTEGERS
        && !(value == 0.0 && Double.doubleToRawLongBits(value) != 0L);
  }

  /** The engine's JSON (proto JSON names) of a message, integral numbers restored. */
  private static ObjectNode jsonOf(Message message) {
    try {
      ObjectNode tree = (ObjectNode) MAPPER.readTree(PRINTER.print(message));
      restoreInMessage(message.getDescriptorForType(), tree);
      return tree;
    } catch (InvalidProtocolBufferException | JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void merge(JsonNode tree, Message.Builder out, String what) {
    try {
      PARSER.merge(MAPPER.writeValueAsString(tree), out);
    } catch (InvalidProtocolBufferException | JsonProcessingException e) {
      throw new IllegalArgumentException(
          what
              + " does not fit the engine's "
              + out.getDescriptorForType().getName()
              + ": "
              + e.getMessage(),
          e);
    }
  }

  /** {@link State#REMOVED} values of the delta written as {@code null}. */
  /**
   * Function-call arguments and function-response payloads as they are, nulls included: ADK's
   * mapper writes the {@code Optional<Map>} of a genai part without the map's null values (its
   * content inclusion is NON_ABSENT), so {@code {"result": null}} would be stored as {@code {}}.
   */
  private static void payloadsWithNulls(Event event, ObjectNode tree) {
    if (event.content().isEmpty()
        || !(tree.get("content") instanceof ObjectNode content)
        || !(content.get("parts") instanceof ArrayNode parts)) {
      return;
    }
    List<com.google.genai.types.Part> given = event.content().get().parts().orElse(List.of());
    for (int i = 0; i < given.size() && i < parts.size(); i++) {
      if (!(parts.get(i) instanceof ObjectNode part)) {
        continue;
      }
      com.google.genai.types.Part source = given.get(i);
      source
          .functionCall()
          .flatMap(c -> c.args())
          .ifPresent(args -> replace(part, "functionCall", "args", args));
      source
          .functionResponse()
          .flatMap(r -> r.response())
          .ifPresent(response -> replace(part, "functionResponse", "response", response));
    }
  }

  private static void replace(
      ObjectNode part, String field, String key, Map<String, Object> value) {
    if (part.get(field) instanceof ObjectNode node) {
      node.set(key, MAPPER.valueToTree(value));
    }
  }

  private static void removedToNull(Event event, ObjectNode actions) {
    Map<String, Object> delta = event.actions() == null ? null : event.actions().stateDelta();
    JsonNode node = actions.get("stateDelta");
    if (delta == null || !(node instanceof ObjectNode deltaNode)) {
      return;
    }
    delta.forEach(
        (key, value) -> {
          if (value == State.REMOVED) {
            deltaNode.set(key, NullNode.getInstance());
          }
        });
  }

  /**
   * ADK Java's {@code customMetadata} (a list of genai {@code CustomMetadata}: key and a string,
   * number or string-list value) as the engine's (ADK Python's) object of key to value.
   */
  private static void customMetadataToObject(ObjectNode tree) {
    JsonNode list = tree.get("customMetadata");
    if (!(list instanceof ArrayNode items)) {
      return;
    }
    ObjectNode object = JsonNodeFactory.instance.objectNode();
    for (JsonNode item : items) {
      String key = item.path("key").asText("");
      if (item.hasNonNull("stringValue")) {
        object.set(key, item.get("stringValue"));
      } else if (item.hasNonNull("numericValue")) {
        object.set(key, item.get("numericValue"));
      } else if (item.hasNonNull("stringListValue")) {
        object.set(key, item.get("stringListValue").path("values"));
      } else {
        object.set(key, NullNode.getInstance());
      }
    }
    tree.set("customMetadata", object);
  }

  /**
   * The engine's custom metadata object as ADK Java's list: strings, numbers and lists of strings
   * have a place there; other values (objects, booleans, mixed lists: written by ADK Python) are
   * left out, as are nulls.
   */
  private static void customMetadataToList(ObjectNode tree) {
    JsonNode object = tree.get("customMetadata");
    if (!(object instanceof ObjectNode entries)) {
      return;
    }
    ArrayNode list = JsonNodeFactory.instance.arrayNode();
    for (Map.Entry<String, JsonNode> entry : entries.properties()) {
      JsonNode value = entry.getValue();
      ObjectNode item = JsonNodeFactory.instance.objectNode().put("key", entry.getKey());
      if (value.isTextual()) {
        item.set("stringValue", value);
      } else if (value.isNumber()) {
        item.set("numericValue", value);
      } else if (value.isArray() && allText(value)) {
        item.set("stringListValue", JsonNodeFactory.instance.objectNode().set("values", value));
      } else {
        continue;
      }
      list.add(item);
    }
    tree.set("customMetadata", list);
  }

  private static boolean allText(JsonNode array) {
    for (JsonNode item : array) {
      if (!item.isTextual()) {
        return false;
      }
    }
    return true;
  }

  private static void millisToSeconds(ObjectNode node, String field) {
    JsonNode value = node.get(field);
    if (value != null && value.isNumber()) {
      node.put(field, value.asLong() / 1000.0);
    }
  }

  private static void secondsToMillis(ObjectNode node, String field) {
    JsonNode value = node.get(field);
    if (value != null && value.isNumber()) {
      node.put(field, Math.round(value.asDouble() * 1000.0));
    }
  }

  /**
   * Nulls and empty containers removed outside JSON-valued fields (ADK's mapper writes absent
   * fields as null); inside them everything is kept.
   */
  private static JsonNode prune(Descriptor descriptor, ObjectNode tree) {
    Iterator<Map.Entry<String, JsonNode>> fields = tree.properties().iterator();
    while (fields.hasNext()) {
      Map.Entry<String, JsonNode> entry = fields.next();
      JsonNode value = entry.getValue();
      if (value == null || value.isNull()) {
        fields.remove();
        continue;
      }
      FieldDescriptor field = fieldOf(descriptor, entry.getKey());
      if (field == null || field.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
        if (field != null && field.isRepeated() && value.isArray() && value.isEmpty()) {
          fields.remove();
        } else if (field != null && isOffset(field) && value.isNumber()) {
          // java.time.Duration (seconds, as ADK's mapper writes it) -> the engine's "1.5s"
          entry.setValue(
              JsonNodeFactory.instance.textNode(
                  value.decimalValue().stripTrailingZeros().toPlainString() + "s"));
        }
        continue;
      }
      Descriptor kind = field.getMessageType();
      if (JSON_VALUES.contains(kind.getFullName())) {
        continue;
      }
      if (field.isMapField()) {
        FieldDescriptor valueField = kind.findFieldByName("value");
        if (value.isObject() && value.isEmpty()) {
          fields.remove();
        } else if (value.isObject()
            && valueField.getJavaType() == FieldDescriptor.JavaType.MESSAGE
            && !JSON_VALUES.contains(valueField.getMessageType().getFullName())) {
          value
              .properties()
              .forEach(
                  item -> {
                    if (item.getValue() instanceof ObjectNode o) {
                      prune(valueField.getMessageType(), o);
                    }
                  });
        }
      } else if (field.isRepeated() && value instanceof ArrayNode array) {
        if (array.isEmpty()) {
          fields.remove();
        }
        for (JsonNode item : array) {
          if (item instanceof ObjectNode o) {
            prune(kind, o);
          }
        }
      } else if (value instanceof ObjectNode o) {
        prune(kind, o);
      }
    }
    return tree;
  }

  private static void restoreInMessage(Descriptor descriptor, ObjectNode tree) {
    Iterator<Map.Entry<String, JsonNode>> fields = tree.properties().iterator();
    while (fields.hasNext()) {
      Map.Entry<String, JsonNode> entry = fields.next();
      FieldDescriptor field = fieldOf(descriptor, entry.getKey());
      if (field != null && isOffset(field) && entry.getValue().isTextual()) {
        String text = entry.getValue().asText();
        if (text.endsWith("s")) { // the engine's "1.5s" -> ISO-8601, what java.time.Duration reads
          entry.setValue(
              JsonNodeFactory.instance.textNode("PT" + text.substring(0, text.length() - 1) + "S"));
        }
        continue;
      }
      if (field == null || field.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
        continue;
      }
      Descriptor kind = field.getMessageType();
      JsonNode value = entry.getValue();
      if (field.isMapField()) {
        FieldDescriptor valueField = kind.findFieldByName("value");
        if (valueField.getJavaType() == FieldDescriptor.JavaType.MESSAGE
            && value instanceof ObjectNode o) {
          o.properties()
              .forEach(
                  item -> item.setValue(restored(valueField.getMessageType(), item.getValue())));
        }
      } else if (field.isRepeated() && value instanceof ArrayNode array) {
        for (int i = 0; i < array.size(); i++) {
          array.set(i, restored(kind, array.get(i)));
        }
      } else {
        entry.setValue(restored(kind, value));
      }
    }
  }

  private static JsonNode restored(Descriptor kind, JsonNode value) {
    if (JSON_VALUES.contains(kind.getFullName())) {
      return integers(value);
    }
    if (value instanceof ObjectNode o) {
      restoreInMessage(kind, o);
    }
    return value;
  }

  private static JsonNode integers(JsonNode value) {
    if (value.isNumber()) {
      double d = value.asDouble();
      if (isRestorable(d)) {
        long integral = (long) d;
        return integral >= Integer.MIN_VALUE && integral <= Integer.MAX_VALUE
            ? IntNode.valueOf((int) integral)
            : LongNode.valueOf(integral);
      }
      return value;
    }
    if (value instanceof ObjectNode o) {
      o.properties().forEach(item -> item.setValue(integers(item.getValue())));
    } else if (value instanceof ArrayNode a) {
      for (int i = 0; i < a.size(); i++) {
        a.set(i, integers(a.get(i)));
      }
    }
    return value;
  }

  /** The engine's duration strings ("1.5s"), java.time.Duration in google-genai for Java. */
  private static boolean isOffset(FieldDescriptor field) {
    return field.getType() == FieldDescriptor.Type.STRING
        && (field.getName().equals("start_offset") || field.getName().equals("end_offset"));
  }

  private static final Map<Descriptor, Map<String, FieldDescriptor>> FIELDS =
      new ConcurrentHashMap<>();

  /** A field by its JSON name (or its proto name). */
  private static FieldDescriptor fieldOf(Descriptor descriptor, String name) {
    Map<String, FieldDescriptor> byName =
        FIELDS.computeIfAbsent(
            descriptor,
            d -> {
              Map<String, FieldDescriptor> map = new ConcurrentHashMap<>();
              for (FieldDescriptor f : d.getFields()) {
                map.put(f.getJsonName(), f);
                map.put(f.getName(), f);
              }
              return map;
            });
    return byName.get(name);
  }

  private static String camel(String snake) {
    StringBuilder out = new StringBuilder();
    boolean up = false;
    for (char c : snake.toCharArray()) {
      if (c == '_') {
        up = true;
      } else {
        out.append(up ? Character.toUpperCase(c) : c);
        up = false;
      }
    }
    return out.toString();
  }
}
