package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import dev.contextengine.v1.RenderFormat;
import dev.contextengine.v1.RenderedContext;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** {@link RequestPart}: each format's fields, held items, and what it refuses (no server). */
class RequestPartTest {
  private static final String USER = "{\"role\":\"user\",\"content\":\"Hi.\"}";
  private static final String MODEL = "{\"role\":\"assistant\",\"content\":\"Hello.\"}";

  private static RenderedContext rendered(RenderFormat format, String system, String... items) {
    return RenderedContext.newBuilder()
        .setFormat(format)
        .setSystem(system)
        .addAllItems(List.of(items))
        .build();
  }

  private static List<String> texts(JsonArray items) {
    List<String> texts = new ArrayList<>();
    items.forEach(item -> texts.add(item.toString()));
    return texts;
  }

  @Test
  void chatIsMessagesOnlyTheSystemMessageAmongThem() {
    String system = "{\"role\":\"system\",\"content\":\"You plan trips.\"}";
    JsonObject part =
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "", system, USER));
    assertEquals(Set.of("messages"), part.keySet());
    assertEquals(List.of(system, USER), texts(part.getAsJsonArray("messages")));
    assertEquals(
        "system",
        part.getAsJsonArray("messages").get(0).getAsJsonObject().get("role").getAsString());
  }

  @Test
  void responsesIsInputAndInstructionsWhenThereIsASystemPart() {
    String item =
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Hi.\"}]}";
    JsonObject part =
        RequestPart.of(
            rendered(RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES, "\"You plan trips.\"", item));
    assertEquals(Set.of("input", "instructions"), part.keySet());
    assertEquals(List.of(item), texts(part.getAsJsonArray("input")));
    assertEquals(new JsonPrimitive("You plan trips."), part.get("instructions"));

    JsonObject bare =
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES, "", item));
    assertEquals(Set.of("input"), bare.keySet());
  }

  @Test
  void anthropicIsMessagesAndSystemAsAStringOrBlocks() {
    String blocks =
        "[{\"type\":\"text\",\"text\":\"You plan trips.\",\"cache_control\":{\"type\":\"ephemeral\"}}]";
    JsonObject part =
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES, blocks, USER));
    assertEquals(Set.of("messages", "system"), part.keySet());
    assertEquals(blocks, part.get("system").toString());
    assertEquals(List.of(USER), texts(part.getAsJsonArray("messages")));

    JsonObject plain =
        RequestPart.of(
            rendered(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES, "\"Be brief.\"", USER));
    assertEquals("Be brief.", plain.get("system").getAsString());
    assertEquals(
        Set.of("messages"),
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES, "")).keySet());
  }

  @Test
  void itemsComeBackAsTheSameBytesNumbersAndTextsAsWritten() {
    // Compact JSON is what the engine sends; toString() writes it again without HTML escapes.
    String call =
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\","
            + "\"input\":{\"big\":12345678901234567890123,\"x\":-0.0,\"y\":1e400,\"z\":0.1}}]}";
    String text =
        "{\"role\":\"user\",\"content\":\"<a href='x'>&</a> \\\"é\\\" 日本 \\u0000 \\ud83d\\ude00\"}";
    JsonObject part =
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES, "", call, text));
    JsonArray messages = part.getAsJsonArray("messages");
    assertEquals(call, messages.get(0).toString());
    assertEquals(JsonParser.parseString(text), messages.get(1));
    assertEquals(
        "<a href='x'>&</a> \"é\" 日本 \u0000 😀",
        messages.get(1).getAsJsonObject().get("content").getAsString());
  }

  @Test
  void heldItemsComeFirstAndTheAnswerBuildsOnThem() {
    List<JsonElement> held =
        List.of(
            JsonParser.parseString(USER),
            JsonParser.parseString(MODEL),
            JsonParser.parseString(USER));
    String next = "{\"role\":\"user\",\"content\":\"Bye.\"}";
    RenderedContext answer =
        rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "", next).toBuilder()
            .setBaseItemsCount(2)
            .build();
    JsonObject part = RequestPart.of(answer, held);
    assertEquals(List.of(USER, MODEL, next), texts(part.getAsJsonArray("messages")));

    // The part is the caller's: changing it leaves the held items as they were.
    part.getAsJsonArray("messages").get(0).getAsJsonObject().addProperty("content", "changed");
    assertEquals(USER, held.get(0).toString());
  }

  @Test
  void heldItemsAreIgnoredWhenTheAnswerIsWhole() {
    List<JsonElement> held = List.of(JsonParser.parseString(MODEL));
    JsonObject part =
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "", USER), held);
    assertEquals(List.of(USER), texts(part.getAsJsonArray("messages")));
  }

  @Test
  void tooFewHeldItemsAreRefused() {
    RenderedContext answer =
        rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "", USER).toBuilder()
            .setBaseItemsCount(2)
            .build();
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> RequestPart.of(answer, List.of(JsonParser.parseString(USER))));
    assertEquals("the answer builds on 2 held items, 1 given", e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> RequestPart.of(answer));
    assertThrows(
        IllegalArgumentException.class,
        () -> RequestPart.of(answer.toBuilder().setBaseItemsCount(-1).build()));
  }

  @Test
  void anAnswerWithoutARenderingIsRefused() {
    IllegalArgumentException none =
        assertThrows(
            IllegalArgumentException.class,
            () -> RequestPart.of(RenderedContext.getDefaultInstance()));
    assertTrue(none.getMessage().startsWith("no rendering in the answer"), none.getMessage());
    RenderedContext unknown =
        RenderedContext.newBuilder().setFormatValue(42).addItems(USER).build();
    assertThrows(IllegalArgumentException.class, () -> RequestPart.of(unknown));
  }

  @Test
  void itemsAndSystemPartsThatAreNotJsonAreRefused() {
    for (String bad : List.of("", "{", "abc", "{\"a\":1} x", "{'a':1}", "[1,]", "{\"a\":1}{}")) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "", USER, bad)),
              bad);
      assertTrue(e.getMessage().startsWith("item 1 of the rendering"), e.getMessage());
    }
    IllegalArgumentException system =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                RequestPart.of(
                    rendered(
                        RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES, "You plan trips.", USER)));
    assertTrue(
        system.getMessage().startsWith("the system part of the rendering"), system.getMessage());
    // A Chat rendering has no system part (the system message is an item): its system is not read.
    assertFalse(
        RequestPart.of(rendered(RenderFormat.RENDER_FORMAT_OPENAI_CHAT, "not JSON", USER))
            .has("system"));
  }
}
