package dev.contextengine.examples;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.contextengine.client.*;
import dev.contextengine.v1.*;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;

/**
 * The Java guide's "Renderings" example: one session's context rendered for OpenAI Chat
 * Completions, the OpenAI Responses API and Anthropic Messages, each sent with plain {@link
 * HttpClient} to the provider (verbatim between the markers; ReadmeTest checks both agree,
 * RenderingsExampleTest runs it against a local fake of both APIs).
 *
 * <p>With a sidecar running ({@code make run}): set {@code OPENAI_BASE_URL} / {@code
 * ANTHROPIC_BASE_URL} and the API keys ({@code OPENAI_API_KEY}, {@code ANTHROPIC_API_KEY}), or
 * point the URLs at any compatible server.
 */
public final class Renderings {
  private static final Map<String, String> ENV = System.getenv();
  static final String OPENAI = ENV.getOrDefault("OPENAI_BASE_URL", "https://api.openai.com/v1");
  static final String ANTHROPIC =
      ENV.getOrDefault("ANTHROPIC_BASE_URL", "https://api.anthropic.com");
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  private Renderings() {}

  /**
   * POSTs {@code body} as JSON to {@code url} with the headers given as name, value pairs; the
   * answer's JSON, or an IllegalStateException naming the status and the answer.
   */
  public static JsonObject post(String url, JsonObject body, String... headers)
      throws IOException, InterruptedException {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(url))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body.toString()));
    if (headers.length > 0) {
      request.headers(headers);
    }
    HttpResponse<String> answer = HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
    if (answer.statusCode() != 200) {
      throw new IllegalStateException(
          "HTTP " + answer.statusCode() + " from " + url + ": " + answer.body());
    }
    return JsonParser.parseString(answer.body()).getAsJsonObject();
  }

  /** POSTs an OpenAI request (Chat Completions or Responses: {@code path}). */
  public static JsonObject openAi(String path, JsonObject body)
      throws IOException, InterruptedException {
    return post(
        OPENAI + path, body, "authorization", "Bearer " + ENV.getOrDefault("OPENAI_API_KEY", "-"));
  }

  /** POSTs an Anthropic Messages request. */
  public static JsonObject anthropic(JsonObject body) throws IOException, InterruptedException {
    return post(
        ANTHROPIC + "/v1/messages",
        body,
        "x-api-key",
        ENV.getOrDefault("ANTHROPIC_API_KEY", "-"),
        "anthropic-version",
        "2023-06-01");
  }

  public static void main(String[] args) throws Exception {
    try (ContextEngineClient ce =
        ContextEngineClient.connect(ENV.getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151"))) {
      SessionRef ref =
          SessionRef.of(
              ce.createSession(
                      CreateSessionRequest.newBuilder()
                          .setAppName("renderings-demo")
                          .setUserId("ann")
                          .build())
                  .getSession());
      ce.appendEvent(
          ref.appendEvent(SessionRef.said("user", "i1", "A weekend in Lisbon, please.")));
      ce.appendEvent(
          ref.appendEvent(SessionRef.said("planner", "i1", "Friday to Sunday, by train.")));
      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "i2", "And where do we stay?")));
      // README begin
      BuildContextRequest request =
          ref.buildContext("planner").toBuilder()
              .setSystemInstruction(
                  Content.newBuilder().addParts(Part.newBuilder().setText("You plan trips.")))
              .build();

      // The same context as each provider's request part (a Gson JsonObject): add the model, send
      // it.
      JsonObject chat = ce.renderContext(request, RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
      chat.addProperty("model", "gpt-4o");
      JsonObject completion = openAi("/chat/completions", chat);
      System.out.println(
          "OpenAI chat: "
              + completion
                  .getAsJsonArray("choices")
                  .get(0)
                  .getAsJsonObject()
                  .getAsJsonObject("message")
                  .get("content")
                  .getAsString());

      JsonObject input = ce.renderContext(request, RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES);
      input.addProperty("model", "gpt-4o");
      JsonObject response = openAi("/responses", input);
      System.out.println(
          "OpenAI responses: "
              + response
                  .getAsJsonArray("output")
                  .get(0)
                  .getAsJsonObject()
                  .getAsJsonArray("content")
                  .get(0)
                  .getAsJsonObject()
                  .get("text")
                  .getAsString());

      // A view follows the session: every build after the first sends only the new items.
      RenderedView claude = ce.renderedView(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES);
      for (String question : List.of("Near the river?", "For two nights?")) {
        JsonObject messages = RequestPart.of(claude.build(request).getRendered());
        messages.addProperty("model", "claude-sonnet-4-5");
        messages.addProperty("max_tokens", 1024);
        String answer =
            anthropic(messages)
                .getAsJsonArray("content")
                .get(0)
                .getAsJsonObject()
                .get("text")
                .getAsString();
        System.out.println("Anthropic: " + answer);
        ce.appendEvent(ref.appendEvent(SessionRef.said("planner", "i2", answer)));
        ce.appendEvent(ref.appendEvent(SessionRef.said("user", "i3", question))); // the next turn
      }
      System.out.println("Anthropic, held: " + claude.items().size() + " items");
      // README end
    }
  }
}
