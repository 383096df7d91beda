package dev.contextengine.adk;

import com.google.adk.agents.InvocationContext;
import com.google.adk.agents.ReadonlyContext;
import com.google.adk.tools.BaseTool;
import com.google.adk.tools.BaseToolset;
import com.google.adk.tools.ToolContext;
import com.google.genai.types.FunctionDeclaration;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Struct;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.v1.CallContextToolRequest;
import dev.contextengine.v1.CallContextToolResponse;
import dev.contextengine.v1.FunctionCall;
import dev.contextengine.v1.ListContextToolsResponse;
import io.reactivex.rxjava3.core.Flowable;
import io.reactivex.rxjava3.core.Single;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * The engine's context tools as an ADK Java toolset: one line gives an agent the seven tools with
 * which the model pins, hides, summarizes, expands and searches its own context.
 *
 * <pre>{@code
 * LlmAgent agent = LlmAgent.builder().name("root").model(model)
 *     .tools(lookupTool, new ContextEngineContextTools(client))  // the session service's client
 *     .build();
 * }</pre>
 *
 * <p>The engine declares the tools ({@code ListContextTools}, once, as google-genai {@code
 * FunctionDeclaration}s) and runs every call ({@code CallContextTool}) for the agent, branch and
 * invocation of the call's {@link ToolContext}, with the function call's id; ADK's {@code Runner}
 * appends the call and its answer as for any tool, and the engine records the answer's edit when
 * the {@link ContextEngineSessionService} appends it, so that every later {@code BuildContext} (the
 * {@link ContextEnginePlugin}'s) shows it and a rewind before the call undoes it. Use it with the
 * session service and the plugin on the same client (a run that resumes long-running calls is known
 * to the engine by the calls' invocation, {@link InvocationAliases}). ADK Java 1.8 has no isolation
 * scope: none is sent.
 *
 * <p>The app's (or the session's) {@code ContextToolsConfig.enabled} must be set in the engine:
 * otherwise a call fails with the client's {@code ContextEngineException} ({@code
 * FAILED_PRECONDITION} / {@code CONTEXT_TOOLS_DISABLED}). What the model gets wrong (a range that
 * splits a call from its answer, arguments of the wrong shape) is answered to it ({@code ok} false,
 * {@code reason}, {@code rule}, {@code message}).
 */
public final class ContextEngineContextTools implements BaseToolset {
  private final ContextEngineClient client;
  private final @Nullable List<String> toolFilter;
  private final InvocationAliases aliases;
  private final AtomicReference<List<BaseTool>> tools = new AtomicReference<>();

  /** All seven tools, over {@code client} (the session service's; shared, not closed). */
  public ContextEngineContextTools(ContextEngineClient client) {
    this(client, null);
  }

  /** Only the tools named in {@code toolFilter} (null: all of them), over {@code client}. */
  public ContextEngineContextTools(ContextEngineClient client, @Nullable List<String> toolFilter) {
    this.client = Objects.requireNonNull(client, "client");
    this.toolFilter = toolFilter == null ? null : List.copyOf(toolFilter);
    this.aliases = InvocationAliases.of(client);
  }

  @Override
  public Flowable<BaseTool> getTools(@Nullable ReadonlyContext readonlyContext) {
    return Flowable.defer(
        () -> {
          List<BaseTool> selected = new ArrayList<>();
          for (BaseTool tool : tools(readonlyContext)) {
            if (isToolSelected(tool, toolFilter, readonlyContext)) {
              selected.add(tool);
            }
          }
          return Flowable.fromIterable(selected);
        });
  }

  /** The tools, declared by the engine once (the declarations are the same for every app). */
  private List<BaseTool> tools(@Nullable ReadonlyContext readonlyContext) {
    List<BaseTool> known = tools.get();
    if (known != null) {
      return known;
    }
    String app = "contextengine";
    String user = "";
    if (readonlyContext != null) {
      InvocationContext context = readonlyContext.invocationContext();
      app = context.session().appName();
      user = context.session().userId();
    }
    ListContextToolsResponse listed = client.listContextTools(app, user);
    List<BaseTool> made = new ArrayList<>();
    for (Struct declaration : listed.getFunctionDeclarationsList()) {
      made.add(new ContextTool(declarationOf(declaration)));
    }
    tools.compareAndSet(null, List.copyOf(made));
    return tools.get();
  }

  /**
   * A google-genai {@code FunctionDeclaration} JSON object as ADK Java's {@link
   * FunctionDeclaration}.
   */
  static FunctionDeclaration declarationOf(Struct declaration) {
    try {
      return FunctionDeclaration.fromJson(JsonFormat.printer().print(declaration));
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException("a context tool's declaration: " + e.getMessage(), e);
    }
  }

  @Override
  public void close() {
    // The client is the caller's (shared with the session service): nothing of ours to close.
  }

  /** One context tool: its declaration is the engine's, its run one {@code CallContextTool}. */
  private final class ContextTool extends BaseTool {
    private final FunctionDeclaration declaration;

    ContextTool(FunctionDeclaration declaration) {
      super(declaration.name().orElse(""), declaration.description().orElse(""));
      this.declaration = declaration;
    }

    @Override
    public Optional<FunctionDeclaration> declaration() {
      return Optional.of(declaration);
    }

    @Override
    public Single<Map<String, Object>> runAsync(Map<String, Object> args, ToolContext toolContext) {
      return Single.fromCallable(
          () -> {
            CallContextToolResponse answer = client.callContextTool(request(args, toolContext));
            Map<String, Object> result = new LinkedHashMap<>();
            answer
                .getResponse()
                .getResponse()
                .getFieldsMap()
                .forEach((key, value) -> result.put(key, AdkConvert.plain(value)));
            return result;
          });
    }

    private CallContextToolRequest request(Map<String, Object> args, ToolContext toolContext) {
      InvocationContext context = toolContext.invocationContext();
      FunctionCall.Builder call =
          FunctionCall.newBuilder().setName(name()).setArgs(AdkConvert.structOf(args));
      toolContext.functionCallId().filter(id -> !id.isEmpty()).ifPresent(call::setId);
      String app = context.session().appName();
      String user = context.session().userId();
      String session = context.session().id();
      CallContextToolRequest.Builder out =
          CallContextToolRequest.newBuilder()
              .setAppName(app)
              .setUserId(user)
              .setSessionId(session)
              .setAgentName(toolContext.agentName())
              .setCall(call)
              .setInvocationId(aliases.stored(app, user, session, toolContext.invocationId()));
      toolContext.branch().ifPresent(out::setBranch);
      return out.build();
    }
  }
}
