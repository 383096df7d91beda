package dev.contextengine.adk;

import com.google.adk.agents.BaseAgent;
import com.google.adk.agents.CallbackContext;
import com.google.adk.agents.InvocationContext;
import com.google.adk.agents.LlmAgent;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.Claude;
import com.google.adk.models.Gemini;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.models.Model;
import com.google.adk.plugins.BasePlugin;
import com.google.adk.sessions.Session;
import com.google.adk.tools.BaseTool;
import com.google.adk.tools.ToolContext;
import com.google.genai.types.Content;
import com.google.genai.types.GenerateContentConfig;
import com.google.genai.types.Tool;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.CacheDecision;
import dev.contextengine.v1.EndInvocationRequest;
import dev.contextengine.v1.IncludeContents;
import dev.contextengine.v1.ModelIdentity;
import dev.contextengine.v1.ModelProvider;
import io.reactivex.rxjava3.core.Completable;
import io.reactivex.rxjava3.core.Maybe;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The engine builds the model contents of every model call of an ADK Java app: install it on the
 * {@code Runner} ({@code plugins(new ContextEnginePlugin(client))}) next to a {@link
 * ContextEngineSessionService} on the same sidecar, which holds the log the contents are built
 * from.
 *
 * <ul>
 *   <li><b>Before each model call</b> ({@code beforeModelCallback}) the request's contents are
 *       replaced by the engine's {@code BuildContext} for the calling agent: its name, the
 *       invocation's branch, {@code includeContents}, the model identity (Gemini, Claude or other,
 *       and the model name, so that {@code adk-} function-call ids are stripped or kept as ADK
 *       Python does for that model), the invocation id and its user content, the system
 *       instruction, tools and tool config (for the prompt-cache fingerprint). The engine applies
 *       rewinds, other agents' turns, compaction summaries and, with a token threshold configured,
 *       compacts first: google-adk 2.13's (Python's) history, not ADK Java's own. The contents'
 *       genai form is kept (a bounded cache keyed by the engine's content, see {@link
 *       #ContextEnginePlugin(ContextEngineClient, String, long)}): a call converts only the
 *       contents no earlier call had, not its whole history again; and the engine sends only the
 *       contents added since the agent's previous call ("contents since": a {@code ContextView} per
 *       session and agent view, see {@link #ContextEnginePlugin(ContextEngineClient, String, long,
 *       int)}), all of them after a rewind or a compaction.
 *   <li><b>Prompt caching</b>, when the engine's app configuration has a {@code
 *       context_cache_config}: a cache the decision names (reused, or created by the engine with
 *       {@code managed_gemini_caches}) is sent as {@code config.cachedContent}, without the system
 *       instruction, tools and tool config it holds, and with only the contents after the cached
 *       ones. ADK Java 1.8's {@code LlmResponse} and {@code Event} have no {@code cacheMetadata},
 *       so the decision's metadata cannot be recorded on the model's event as ADK Python does.
 *   <li><b>After a run</b> ({@code afterRunCallback}) {@code EndInvocation} tells the engine, which
 *       then compacts in the background as the app's compaction configuration says.
 * </ul>
 *
 * <p>Configure compaction and caching in the engine, not in ADK: an {@code App} with ADK's own
 * {@code eventsCompactionConfig} or {@code contextCacheConfig} would summarise or cache a second
 * time; the plugin fails such a run with an {@link IllegalStateException} naming the setting. A
 * session the engine does not have fails the model call with an {@link IllegalStateException} (the
 * session service is on another sidecar); a sidecar that is down, with the client's {@link
 * ContextEngineException} ({@code UNAVAILABLE}).
 */
public final class ContextEnginePlugin extends BasePlugin {
  /** The default bound of the converted-contents cache, in contents. */
  public static final long DEFAULT_CONTENTS_CACHE_SIZE = 50_000;

  /** ADK's own tool that hands the conversation to another agent. */
  static final String TRANSFER_TOOL = "transfer_to_agent";

  /** The default number of agent views of sessions kept for "contents since". */
  public static final int DEFAULT_CONTEXT_VIEWS = 16;

  private final ContextEngineClient client;
  private final ContentCache converted;
  private final ContextViews views;
  private final InvocationAliases aliases;

  /** The plugin over {@code client} (the session service's; shared, not closed). */
  public ContextEnginePlugin(ContextEngineClient client) {
    this(client, "contextengine");
  }

  /** The plugin with another name (ADK's plugin manager keys plugins by name). */
  public ContextEnginePlugin(ContextEngineClient client, String name) {
    this(client, name, DEFAULT_CONTENTS_CACHE_SIZE);
  }

  /**
   * The plugin keeping the genai form of at most {@code contentsCacheSize} contents it converted
   * (least recently used evicted; 0: convert every content on every call), so that a model call
   * converts only the contents its history did not have on an earlier call.
   */
  public ContextEnginePlugin(ContextEngineClient client, String name, long contentsCacheSize) {
    this(client, name, contentsCacheSize, DEFAULT_CONTEXT_VIEWS);
  }

  /**
   * The plugin keeping, besides the converted contents, the last contents of at most {@code
   * contextViews} agent views of sessions (session, agent, branch, {@code includeContents}, model;
   * least recently used evicted), so that the engine sends a model call only the contents added
   * since that view's previous call ("contents since"; all of them after a rewind or a compaction).
   * 0: every call gets all the contents from the engine.
   */
  public ContextEnginePlugin(
      ContextEngineClient client, String name, long contentsCacheSize, int contextViews) {
    super(name);
    this.client = Objects.requireNonNull(client, "client");
    this.converted = new ContentCache(contentsCacheSize);
    this.views = new ContextViews(client, contextViews);
    this.aliases = InvocationAliases.of(client);
  }

  @Override
  public Maybe<Content> beforeRunCallback(InvocationContext context) {
    return Maybe.fromAction(() -> checkApp(context));
  }

  @Override
  public Maybe<LlmResponse> beforeModelCallback(
      CallbackContext callbackContext, LlmRequest.Builder request) {
    return Maybe.fromAction(
        () -> {
          InvocationContext context = callbackContext.invocationContext();
          checkApp(context);
          BaseAgent agent = context.agent();
          if (!(agent instanceof LlmAgent llmAgent)) {
            return;
          }
          LlmRequest current = request.build();
          BuildContextRequest build =
              buildRequest(context, llmAgent, current, storedInvocation(context));
          BuildContextResponse response;
          try {
            response = views.build(build);
          } catch (ContextEngineException e) {
            if ("SESSION_NOT_FOUND".equals(e.reason())) {
              throw new IllegalStateException(
                  "session "
                      + build.getSessionId()
                      + " is not on the plugin's sidecar ("
                      + client.target()
                      + "): give the plugin the session service's client",
                  e);
            }
            throw e;
          }
          List<Content> contents = converted.convert(response.getContentsList());
          request.contents(contents);
          if (response.hasCacheDecision()) {
            applyCache(request, current, contents, response.getCacheDecision());
          }
        });
  }

  /**
   * ADK's {@code transfer_to_agent} answers with bookkeeping that differs by port: google-adk
   * records {@code {"result": null}}, ADK Java {@code {}}. The engine's log, and with it the sizes
   * its compaction weighs, must be google-adk's: the answer is recorded as google-adk's (the
   * transfer itself, {@code actions.transferToAgent}, is unchanged).
   */
  @Override
  public Maybe<Map<String, Object>> afterToolCallback(
      BaseTool tool,
      Map<String, Object> toolArgs,
      ToolContext toolContext,
      Map<String, Object> result) {
    if (!TRANSFER_TOOL.equals(tool.name())) {
      return Maybe.empty();
    }
    Map<String, Object> answer = new HashMap<>();
    answer.put("result", null);
    return Maybe.just(answer);
  }

  @Override
  public Completable afterRunCallback(InvocationContext context) {
    return Completable.fromAction(
        () ->
            client.endInvocation(
                EndInvocationRequest.newBuilder()
                    .setAppName(context.session().appName())
                    .setUserId(context.session().userId())
                    .setSessionId(context.session().id())
                    .setInvocationId(storedInvocation(context))
                    .build()));
  }

  /**
   * The invocation the engine knows the run as: the run's own, or the invocation of the
   * long-running calls its message answers ({@link InvocationAliases}).
   */
  private String storedInvocation(InvocationContext context) {
    Session session = context.session();
    return aliases.stored(
        session.appName(), session.userId(), session.id(), context.invocationId());
  }

  /**
   * The engine's model identity of an agent's model (its own, or the nearest ancestor's, as ADK
   * resolves it; {@code OTHER} for model classes the engine does not know). A model given by name
   * is not instantiated: a {@code gemini-} name is Gemini, as ADK's registry would make it.
   */
  public static ModelIdentity modelIdentity(LlmAgent agent, String requestModel) {
    Optional<Model> model = Optional.empty();
    for (BaseAgent a = agent; a != null && model.isEmpty(); a = a.parentAgent()) {
      if (a instanceof LlmAgent llm) {
        model = llm.model();
      }
    }
    Optional<BaseLlm> llm = model.flatMap(Model::model);
    String name = requestModel;
    if (name.isEmpty()) {
      name = llm.map(BaseLlm::model).orElse(model.flatMap(Model::modelName).orElse(""));
    }
    ModelProvider provider = ModelProvider.MODEL_PROVIDER_OTHER;
    if (llm.isPresent() ? llm.get() instanceof Gemini : name.startsWith("gemini-")) {
      provider = ModelProvider.MODEL_PROVIDER_GEMINI;
    } else if (llm.isPresent() && llm.get() instanceof Claude) {
      provider = ModelProvider.MODEL_PROVIDER_ANTHROPIC;
    }
    return ModelIdentity.newBuilder().setProvider(provider).setModel(name).build();
  }

  private static void checkApp(InvocationContext context) {
    List<String> found = new ArrayList<>();
    if (context.eventsCompactionConfig().isPresent()) {
      found.add("eventsCompactionConfig");
    }
    if (context.contextCacheConfig().isPresent()) {
      found.add("contextCacheConfig");
    }
    if (!found.isEmpty()) {
      String names = String.join(" and ", found);
      throw new IllegalStateException(
          "the app configures ADK's own "
              + names
              + " and the ContextEnginePlugin: remove "
              + names
              + " from the App and configure compaction and prompt caching in the "
              + "engine's app configuration (UpdateAppConfig), which the plugin applies");
    }
  }

  private static BuildContextRequest buildRequest(
      InvocationContext context, LlmAgent agent, LlmRequest current, String invocationId) {
    boolean currentTurn = agent.includeContents() == LlmAgent.IncludeContents.NONE;
    BuildContextRequest.Builder out =
        BuildContextRequest.newBuilder()
            .setAppName(context.session().appName())
            .setUserId(context.session().userId())
            .setSessionId(context.session().id())
            .setAgentName(agent.name())
            .setIncludeContents(
                currentTurn
                    ? IncludeContents.INCLUDE_CONTENTS_NONE
                    : IncludeContents.INCLUDE_CONTENTS_DEFAULT)
            .setModel(modelIdentity(agent, current.model().orElse("")))
            .setInvocationId(invocationId);
    context.branch().ifPresent(out::setBranch);
    context.userContent().ifPresent(c -> out.setUserContent(AdkConvert.contentToProto(c)));
    Optional<GenerateContentConfig> config = current.config();
    if (config.isPresent()) {
      config
          .get()
          .systemInstruction()
          .ifPresent(s -> out.setSystemInstruction(AdkConvert.contentToProto(s)));
      for (Tool tool : config.get().tools().orElse(List.of())) {
        out.addTools(AdkConvert.structOf(tool));
      }
      config.get().toolConfig().ifPresent(t -> out.setToolConfig(AdkConvert.structOf(t)));
    }
    return out.build();
  }

  /** Applies a cache decision to the request (package-private for its test). */
  static void applyCache(
      LlmRequest.Builder request,
      LlmRequest current,
      List<Content> contents,
      CacheDecision decision) {
    if (decision.getCacheName().isEmpty()) {
      return; // fingerprint only, or a cache the agent would create: the whole request goes out
    }
    GenerateContentConfig.Builder config =
        current
            .config()
            .map(GenerateContentConfig::toBuilder)
            .orElseGet(GenerateContentConfig::builder);
    request.config(
        config
            .cachedContent(decision.getCacheName())
            .clearSystemInstruction()
            .clearTools()
            .clearToolConfig()
            .build());
    int from = Math.min(decision.getSendFromIndex(), contents.size());
    request.contents(new ArrayList<>(contents.subList(from, contents.size())));
  }
}
