package dev.contextengine.client;

import java.util.List;
import java.util.Map;

/**
 * The repository's fake of OpenAI's and Anthropic's HTTP APIs ({@code
 * tests/fakes/provider_server.py}) as a process: it checks every request body against the provider
 * SDKs' own types and answers 400 for one they refuse, 200 with {@code Seen <n> messages; the last
 * said: <text>.} otherwise.
 */
public final class FakeProviders implements AutoCloseable {
  private final Sidecar server;

  private FakeProviders(Sidecar server) {
    this.server = server;
  }

  /** The fake, serving on a free loopback port. */
  public static FakeProviders start() {
    return new FakeProviders(Sidecar.startModule(List.of("tests.fakes.provider_server")));
  }

  /** OpenAI's base URL on the fake ({@code .../v1}, as OPENAI_BASE_URL takes it). */
  public String openAiBaseUrl() {
    return "http://" + server.target + "/v1";
  }

  /** Anthropic's base URL on the fake (as ANTHROPIC_BASE_URL takes it). */
  public String anthropicBaseUrl() {
    return "http://" + server.target;
  }

  /** The environment that points an example at the fake. */
  public Map<String, String> environment() {
    return Map.of("OPENAI_BASE_URL", openAiBaseUrl(), "ANTHROPIC_BASE_URL", anthropicBaseUrl());
  }

  @Override
  public void close() {
    server.close();
  }
}
