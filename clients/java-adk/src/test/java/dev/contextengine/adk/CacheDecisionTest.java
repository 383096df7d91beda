package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.models.LlmRequest;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionDeclaration;
import com.google.genai.types.GenerateContentConfig;
import com.google.genai.types.Part;
import com.google.genai.types.Tool;
import dev.contextengine.v1.CacheAction;
import dev.contextengine.v1.CacheDecision;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How the plugin applies the engine's prompt-cache decision to an ADK Java request. */
class CacheDecisionTest {
  static final List<Content> CONTENTS =
      List.of(
          Content.fromParts(Part.fromText("a")),
          Content.fromParts(Part.fromText("b")),
          Content.fromParts(Part.fromText("c")));

  static LlmRequest request() {
    return LlmRequest.builder()
        .model("gemini-2.5-flash")
        .contents(CONTENTS)
        .config(
            GenerateContentConfig.builder()
                .systemInstruction(Content.fromParts(Part.fromText("You plan trips.")))
                .tools(
                    List.of(
                        Tool.builder()
                            .functionDeclarations(
                                List.of(FunctionDeclaration.builder().name("lookup").build()))
                            .build()))
                .temperature(0.5f)
                .build())
        .build();
  }

  @Test
  void aNamedCacheIsSentWithoutWhatItHolds() {
    LlmRequest current = request();
    LlmRequest.Builder builder = current.toBuilder();
    CacheDecision reuse =
        CacheDecision.newBuilder()
            .setAction(CacheAction.CACHE_ACTION_REUSE)
            .setCacheName("cachedContents/abc")
            .setSendFromIndex(2)
            .build();
    ContextEnginePlugin.applyCache(builder, current, CONTENTS, reuse);
    LlmRequest sent = builder.build();
    GenerateContentConfig config = sent.config().orElseThrow();
    assertEquals("cachedContents/abc", config.cachedContent().orElseThrow());
    assertTrue(config.systemInstruction().isEmpty());
    assertTrue(config.tools().isEmpty());
    assertTrue(config.toolConfig().isEmpty());
    assertEquals(0.5f, config.temperature().orElseThrow());
    assertEquals(CONTENTS.subList(2, 3), sent.contents());
  }

  @Test
  void noCacheNameSendsTheWholeRequest() {
    LlmRequest current = request();
    LlmRequest.Builder builder = current.toBuilder();
    CacheDecision create =
        CacheDecision.newBuilder()
            .setAction(CacheAction.CACHE_ACTION_CREATE)
            .setSendFromIndex(2)
            .build();
    ContextEnginePlugin.applyCache(builder, current, CONTENTS, create);
    LlmRequest sent = builder.build();
    assertEquals(CONTENTS, sent.contents());
    assertTrue(sent.config().orElseThrow().cachedContent().isEmpty());
    assertTrue(sent.config().orElseThrow().systemInstruction().isPresent());
  }
}
