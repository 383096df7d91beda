package dev.contextengine.client;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import dev.contextengine.v1.RenderFormat;
import dev.contextengine.v1.RenderedContext;
import java.io.IOException;
import java.io.StringReader;
import java.util.List;
import java.util.Objects;

/**
 * A BuildContext rendering ({@link RenderedContext}) as the provider's own request part, a Gson
 * {@link JsonObject}: the engine sends each item as one JSON text and the system part as JSON; this
 * parses them into the fields of the provider's request body.
 *
 * <ul>
 *   <li>OpenAI Chat Completions: {@code {"messages": [...]}} (the system message is the first);
 *   <li>OpenAI Responses: {@code {"input": [...]}}, and {@code "instructions"} when there is a
 *       system instruction;
 *   <li>Anthropic Messages: {@code {"messages": [...]}}, and {@code "system"} when there is one.
 * </ul>
 *
 * <p>Add the rest of the request ({@code model}, {@code max_tokens}, tools, ...) and send the
 * object's {@code toString()} (compact JSON) as the body. A rendering answered to {@code
 * render.since} ({@code base_items_count} > 0) holds only the items after the held ones: give
 * {@link #of(RenderedContext, List)} the held items too ({@link RenderedView} does it all).
 */
public final class RequestPart {
  /** Gson's reader of any JSON value (numbers kept as written: -0.0 stays -0.0). */
  private static final TypeAdapter<JsonElement> JSON = new Gson().getAdapter(JsonElement.class);

  private RequestPart() {}

  /** The request part of a whole rendering (one answered without {@code since}). */
  public static JsonObject of(RenderedContext rendered) {
    return of(rendered, List.of());
  }

  /**
   * The request part of {@code rendered}, whose first {@code base_items_count} items are the first
   * of {@code held} (the items of an earlier part). The part is new: changing it changes neither
   * {@code held} nor a later part.
   *
   * @throws IllegalArgumentException for a rendering of no known format (an answer without one),
   *     fewer held items than {@code base_items_count}, or an item or system part that is not JSON
   */
  public static JsonObject of(RenderedContext rendered, List<? extends JsonElement> held) {
    Objects.requireNonNull(rendered, "rendered");
    Objects.requireNonNull(held, "held");
    String itemsKey = itemsKey(rendered.getFormat());
    int base = rendered.getBaseItemsCount();
    if (base < 0 || held.size() < base) {
      throw new IllegalArgumentException(
          "the answer builds on " + base + " held items, " + held.size() + " given");
    }
    JsonArray items = new JsonArray();
    for (JsonElement item : held.subList(0, base)) {
      items.add(item.deepCopy());
    }
    for (int i = 0; i < rendered.getItemsCount(); i++) {
      items.add(parse(rendered.getItems(i), "item " + (base + i)));
    }
    JsonObject part = new JsonObject();
    part.add(itemsKey, items);
    String systemKey = systemKey(rendered.getFormat());
    if (systemKey != null && !rendered.getSystem().isEmpty()) {
      part.add(systemKey, parse(rendered.getSystem(), "the system part"));
    }
    return part;
  }

  /** The request field the items go in: {@code messages}, or {@code input} for Responses. */
  private static String itemsKey(RenderFormat format) {
    switch (format) {
      case RENDER_FORMAT_OPENAI_CHAT:
      case RENDER_FORMAT_ANTHROPIC_MESSAGES:
        return "messages";
      case RENDER_FORMAT_OPENAI_RESPONSES:
        return "input";
      default:
        throw new IllegalArgumentException("no rendering in the answer (format " + format + ")");
    }
  }

  /** The request field of the system part (null: it is among the items). */
  private static String systemKey(RenderFormat format) {
    switch (format) {
      case RENDER_FORMAT_OPENAI_RESPONSES:
        return "instructions";
      case RENDER_FORMAT_ANTHROPIC_MESSAGES:
        return "system";
      default:
        return null;
    }
  }

  /** One JSON value, strictly (Gson's JsonParser would take "abc" or a trailing comma). */
  private static JsonElement parse(String json, String what) {
    try (JsonReader reader = new JsonReader(new StringReader(json))) {
      JsonElement value = JSON.read(reader);
      if (reader.peek() != JsonToken.END_DOCUMENT) {
        throw new IllegalArgumentException(
            what + " of the rendering has more after its JSON value");
      }
      return value;
    } catch (IOException | JsonParseException | IllegalStateException e) {
      throw new IllegalArgumentException(
          what + " of the rendering is not JSON: " + e.getMessage(), e);
    }
  }
}
