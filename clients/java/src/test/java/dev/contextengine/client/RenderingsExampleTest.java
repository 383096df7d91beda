package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.contextengine.examples.Renderings;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.ContextCacheConfig;
import dev.contextengine.v1.RenderFormat;
import dev.contextengine.v1.UpdateAppConfigRequest;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * examples/Renderings.java against a real sidecar and the fake providers (a process that checks
 * every body against the OpenAI and Anthropic SDKs' types and answers 400 for one they refuse), and
 * renderings with calls, results and cache breakpoints sent the same way.
 */
class RenderingsExampleTest {
  private static FakeProviders fake;

  @BeforeAll
  static void start() {
    fake = FakeProviders.start();
  }

  @AfterAll
  static void stop() {
    fake.close();
  }

  /** The fake's answer to {@code n} messages whose last one said {@code last}. */
  private static void assertSeen(int n, String last, String answer) {
    assertEquals("Seen " + n + " messages; the last said: " + last + ".", answer);
  }

  /** The example exits with 0 only when every request was answered 200, and prints each answer. */
  @Test
  void theExampleSendsEveryRenderingAndTheFakeAcceptsEachOne() throws Exception {
    assertEquals(
        List.of(
            "OpenAI chat: Seen 4 messages; the last said: And where do we stay?.",
            "OpenAI responses: Seen 3 messages; the last said: And where do we stay?.",
            "Anthropic: Seen 3 messages; the last said: And where do we stay?.",
            "Anthropic: Seen 5 messages; the last said: Near the river?.",
            "Anthropic, held: 5 items"),
        ExampleRun.lines("dev.contextengine.examples.Renderings", fake.environment()));
  }

  /** The fake checks messages and what is in them (a call, a block) against the SDKs' types. */
  @Test
  void theFakeRefusesWhatTheProvidersWould() {
    String[][] refused = {
      {
        "/v1/chat/completions",
        "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"robot\",\"content\":\"Hi.\"}]}"
      },
      {
        "/v1/chat/completions",
        "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\"}]}]}"
      },
      {
        "/v1/responses",
        "{\"model\":\"gpt-4o\",\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}"
      },
      {
        "/v1/messages",
        "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\","
            + "\"content\":[{\"type\":\"tool_result\",\"content\":\"x\"}]}]}"
      },
      {
        "/v1/messages",
        "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":10,\"system\":[{\"type\":\"txt\"}],"
            + "\"messages\":[{\"role\":\"user\",\"content\":\"Hi.\"}]}"
      },
    };
    for (String[] request : refused) {
      String base =
          request[0].equals("/v1/messages")
              ? fake.anthropicBaseUrl()
              : fake.openAiBaseUrl().replaceFirst("/v1$", "");
      JsonObject body = JsonParser.parseString(request[1]).getAsJsonObject();
      IllegalStateException e =
          assertThrows(
              IllegalStateException.class,
              () -> Renderings.post(base + request[0], body),
              request[1]);
      assertTrue(e.getMessage().startsWith("HTTP 400 "), e.getMessage());
    }
  }

  /** The provider's answer to {@code part} of {@code format}, sent to the fake. */
  private static String send(RenderFormat format, JsonObject part) throws Exception {
    part.addProperty(
        "model",
        format == RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES ? "claude-sonnet-4-5" : "gpt-4o");
    switch (format) {
      case RENDER_FORMAT_OPENAI_CHAT:
        return Renderings.post(fake.openAiBaseUrl() + "/chat/completions", part)
            .getAsJsonArray("choices")
            .get(0)
            .getAsJsonObject()
            .getAsJsonObject("message")
            .get("content")
            .getAsString();
      case RENDER_FORMAT_OPENAI_RESPONSES:
        return Renderings.post(fake.openAiBaseUrl() + "/responses", part)
            .getAsJsonArray("output")
            .get(0)
            .getAsJsonObject()
            .getAsJsonArray("content")
            .get(0)
            .getAsJsonObject()
            .get("text")
            .getAsString();
      default:
        part.addProperty("max_tokens", 64);
        return Renderings.post(fake.anthropicBaseUrl() + "/v1/messages", part)
            .getAsJsonArray("content")
            .get(0)
            .getAsJsonObject()
            .get("text")
            .getAsString();
    }
  }

  @Test
  void callsResultsAndCacheBreakpointsAreAcceptedInEveryFormat() throws Exception {
    try (ContextEngineClient ce = ContextEngineClient.connect(Sidecar.shared())) {
      SessionRef ref = ClientTest.newSession(ce);
      ce.updateAppConfig(
          UpdateAppConfigRequest.newBuilder()
              .setConfig(
                  AppConfig.newBuilder()
                      .setAppName(ref.appName())
                      .setContextCacheConfig(ContextCacheConfig.newBuilder().setTtlSeconds(3600)))
              .build());
      RenderingsTest.append(
          ce,
          ref,
          SessionRef.said("user", "i1", "Weather in Oslo?"),
          RenderingsTest.call(
              "toolu_1", "lookup", "{\"city\":\"Oslo\",\"days\":-0.0,\"when\":[1,2.5]}"),
          RenderingsTest.result("toolu_1", "lookup", "{\"weather\":\"sunny <&> 晴れ\"}"),
          SessionRef.said("planner", "i1", "Sunny."),
          SessionRef.said("user", "i2", "Tomorrow?"));
      BuildContextRequest request =
          ref.buildContext("planner").toBuilder()
              .setSystemInstruction(SessionRef.text("user", "You plan trips."))
              .build();
      int[] messages = {6, 5, 5}; // Chat: the system message first; the others hold it apart
      RenderFormat[] formats = {
        RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
        RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES,
        RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES
      };
      for (int i = 0; i < formats.length; i++) {
        JsonObject part = ce.renderContext(request, formats[i]);
        if (formats[i] == RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES) {
          assertTrue(
              part.toString().contains("\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}"),
              part.toString());
        }
        assertSeen(messages[i], "Tomorrow?", send(formats[i], part));
      }

      // A view's reassembled rendering (held items, then the new ones) is as good as a whole one.
      RenderedView view = ce.renderedView(RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
      send(
          RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
          RequestPart.of(view.build(request).getRendered()));
      RenderingsTest.append(
          ce,
          ref,
          SessionRef.said("planner", "i2", "Cloudy."),
          SessionRef.said("user", "i3", "And Friday?"));
      assertEquals(
          "Seen 8 messages; the last said: And Friday?.",
          send(
              RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
              RequestPart.of(view.build(request).getRendered())));
    }
  }
}
