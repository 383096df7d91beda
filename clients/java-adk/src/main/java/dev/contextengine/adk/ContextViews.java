package dev.contextengine.adk;

import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextView;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * "Contents since" for the plugin: a {@link ContextView} per (session, agent, branch, isolation
 * scope, {@code includeContents}, model), so that a model call receives from the engine only the
 * contents added since that agent view's previous call (all of them after a rewind or a compaction,
 * which change the prefix); the request still gets the whole contents. At most {@code maxViews}
 * views are kept, the least recently used dropped first; 0 turns it off (every call gets all the
 * contents).
 *
 * <p>Sound whatever the key: the engine answers in full whenever the held contents are not the
 * first contents of its answer, so a view only decides what is saved, never what is built.
 */
final class ContextViews {
  private final ContextEngineClient client;
  private final Map<List<Object>, ContextView> views;
  private final boolean enabled;

  ContextViews(ContextEngineClient client, int maxViews) {
    if (maxViews < 0) {
      throw new IllegalArgumentException("context views must be >= 0, got " + maxViews);
    }
    this.client = client;
    this.enabled = maxViews > 0;
    this.views =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<List<Object>, ContextView> eldest) {
            return size() > maxViews;
          }
        };
  }

  /** BuildContext of {@code request}: through its view's "contents since", the whole answer. */
  BuildContextResponse build(BuildContextRequest request) {
    if (!enabled) {
      return client.buildContext(request);
    }
    return view(request).build(request);
  }

  private synchronized ContextView view(BuildContextRequest request) {
    List<Object> key =
        List.of(
            request.getAppName(),
            request.getUserId(),
            request.getSessionId(),
            request.getAgentName(),
            request.hasBranch() ? Optional.of(request.getBranch()) : Optional.empty(),
            request.hasIsolationScope()
                ? Optional.of(request.getIsolationScope())
                : Optional.empty(),
            request.getIncludeContentsValue(),
            request.getModel());
    return views.computeIfAbsent(key, k -> client.contextView());
  }

  /** How many views are kept (for tests). */
  synchronized int size() {
    return views.size();
  }
}
