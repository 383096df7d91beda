package dev.contextengine.adk.examples;

import com.google.adk.agents.LlmAgent;
import com.google.adk.artifacts.InMemoryArtifactService;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import dev.contextengine.adk.ContextEngineMemoryService;
import dev.contextengine.adk.ContextEnginePlugin;
import dev.contextengine.adk.ContextEngineSessionService;
import dev.contextengine.client.ContextEngineClient;
import java.util.Map;

/**
 * The ADK Java guide's first block, verbatim between the markers (ReadmeTest checks both agree).
 */
public final class ReadmeExample {
  private ReadmeExample() {}

  /** Runs one turn of {@code root} on the sidecar at {@code target}; returns the session id. */
  public static String run(String target, LlmAgent root) {
    // README begin
    // target: the sidecar's address, e.g. "127.0.0.1:50151"
    try (ContextEngineClient client = ContextEngineClient.connect(target)) {
      ContextEngineSessionService sessions = new ContextEngineSessionService(client);
      Runner runner =
          Runner.builder()
              .agent(root)
              .appName("travel")
              .sessionService(sessions) // BaseSessionService
              .memoryService(new ContextEngineMemoryService(client)) // BaseMemoryService
              .artifactService(new InMemoryArtifactService())
              .plugins(new ContextEnginePlugin(client)) // BasePlugin
              .build();
      Session session =
          sessions.createSession("travel", "zoe", Map.of("user:home", "Porto"), null).blockingGet();
      runner
          .runAsync("zoe", session.id(), Content.fromParts(Part.fromText("Weather in Lisbon?")))
          .blockingForEach(event -> System.out.println(event.stringifyContent()));
      // README end
      return session.id();
    }
  }
}
