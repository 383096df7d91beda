package dev.contextengine.adk;

import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.FunctionResponse;
import dev.contextengine.client.ContextEngineClient;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import org.jspecify.annotations.Nullable;

/**
 * The answer to a long-running call resumes the call's invocation, as google-adk 2.13 (Python)
 * records it.
 *
 * <p>google-adk's {@code Runner}, given a message of function responses, looks for the calls they
 * answer in the session (rewinds applied); when every response has its call and all the calls are
 * of one invocation, the run continues that invocation: its events carry the call's invocation id.
 * ADK Java's {@code Runner} starts a new invocation for every message. The difference is not only a
 * name: the engine's sliding-window compaction counts invocations, and a rewind to the answering
 * turn removes the call's turn too in google-adk. So {@link ContextEngineSessionService} records
 * such a run's events under the call's invocation id (the ADK {@code Event}s themselves are
 * changed, so what the runner yields carries the id that is stored), and {@link
 * ContextEnginePlugin} names that invocation to the engine ({@code BuildContext}, {@code
 * EndInvocation}).
 *
 * <p>One registry per client: the session service and the plugin of an app share their client. At
 * most {@value #MAX_ALIASES} runs are remembered (the oldest forgotten first).
 */
final class InvocationAliases {
  static final int MAX_ALIASES = 4096;

  private static final Map<ContextEngineClient, InvocationAliases> BY_CLIENT = new WeakHashMap<>();

  /** (app, user, session, the runner's invocation id) -> the invocation it continues. */
  private final Map<List<String>, String> aliases =
      new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<List<String>, String> eldest) {
          return size() > MAX_ALIASES;
        }
      };

  private InvocationAliases() {}

  /** The registry of {@code client}'s session service and plugin. */
  static InvocationAliases of(ContextEngineClient client) {
    synchronized (BY_CLIENT) {
      return BY_CLIENT.computeIfAbsent(client, c -> new InvocationAliases());
    }
  }

  private static List<String> key(String app, String user, String session, String invocation) {
    return List.of(app, user, session, invocation);
  }

  /** The invocation the engine knows the runner's {@code invocationId} as. */
  synchronized String stored(String app, String user, String session, String invocationId) {
    return aliases.getOrDefault(key(app, user, session, invocationId), invocationId);
  }

  /**
   * Before {@code event} is stored for {@code session}: a user message of function responses that
   * resumes an invocation (see the class documentation) makes its run's invocation an alias of that
   * one; an event of an aliased run gets the invocation it continues.
   */
  void apply(Session session, Event event) {
    String runner = event.invocationId();
    if (runner == null || runner.isEmpty()) {
      return;
    }
    List<String> key = key(session.appName(), session.userId(), session.id(), runner);
    String resumed;
    synchronized (this) {
      resumed = aliases.get(key);
    }
    if (resumed == null && "user".equals(event.author())) {
      resumed = resumedInvocation(session.events(), event);
      if (resumed != null && !resumed.equals(runner)) {
        synchronized (this) {
          aliases.put(key, resumed);
        }
      }
    }
    if (resumed != null) {
      event.setInvocationId(resumed);
    }
  }

  /**
   * The invocation google-adk would resume for the message {@code event}: the one invocation of the
   * calls its function responses answer, searched from the end of {@code events} (the runner's
   * session: rewinds applied); null without responses, with a response whose call is not there, or
   * with calls of several invocations.
   */
  static @Nullable String resumedInvocation(List<Event> events, Event event) {
    Set<String> ids = new HashSet<>();
    for (FunctionResponse response : event.functionResponses()) {
      response.id().filter(id -> !id.isEmpty()).ifPresent(ids::add);
    }
    if (ids.isEmpty()) {
      return null;
    }
    Set<String> invocations = new HashSet<>();
    for (int i = events.size() - 1; i >= 0 && !ids.isEmpty(); i--) {
      Event candidate = events.get(i);
      for (FunctionCall call : candidate.functionCalls()) {
        if (call.id().isPresent() && ids.remove(call.id().get())) {
          invocations.add(candidate.invocationId());
        }
      }
    }
    if (!ids.isEmpty() || invocations.size() != 1) {
      return null;
    }
    return invocations.iterator().next();
  }
}
