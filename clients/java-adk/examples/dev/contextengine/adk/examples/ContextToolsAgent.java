package dev.contextengine.adk.examples;

import com.google.adk.agents.LlmAgent;
import com.google.adk.models.BaseLlm;
import dev.contextengine.adk.ContextEngineContextTools;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.ContextToolsConfig;
import dev.contextengine.v1.GetAppConfigRequest;
import dev.contextengine.v1.UpdateAppConfigRequest;

/**
 * The ADK Java guide's "context tools" block, verbatim between the markers (ReadmeTest checks both
 * agree, and runs the agent in ADK Java's Runner).
 */
public final class ContextToolsAgent {
  private ContextToolsAgent() {}

  /** An agent of {@code app} with the engine's context tools, which this enables for the app. */
  public static LlmAgent agent(ContextEngineClient client, String app, BaseLlm model) {
    // README begin
    // The engine's configuration of the app enables the tools (UpdateAppConfig replaces it whole).
    AppConfig config =
        client.getAppConfig(GetAppConfigRequest.newBuilder().setAppName(app).build()).getConfig();
    client.updateAppConfig(
        UpdateAppConfigRequest.newBuilder()
            .setConfig(
                config.toBuilder()
                    .setAppName(app)
                    .setContextTools(ContextToolsConfig.newBuilder().setEnabled(true)))
            .build());
    LlmAgent root =
        LlmAgent.builder()
            .name("root")
            .instruction("You plan trips.")
            .model(model)
            .tools(new ContextEngineContextTools(client)) // BaseToolset: the seven context tools
            .build();
    // README end
    return root;
  }
}
