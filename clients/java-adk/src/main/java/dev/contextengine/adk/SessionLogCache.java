package dev.contextengine.adk;

import dev.contextengine.v1.Event;
import dev.contextengine.v1.Session;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The engine events of the sessions a session service read last, so that reading a session again
 * (ADK's Runner reads the whole session at every invocation) fetches only the events appended since
 * ({@code GetSession} with {@code after_sequence}): the sidecar neither reads nor sends the rest of
 * the log again.
 *
 * <p>Sound because a session's log is append-only: an event keeps its sequence and content forever
 * (rewinds and compaction summaries are new events). A session deleted and made again under the
 * same id is told apart by its {@code create_time} (and a last sequence below the kept one) and
 * read whole. What is kept is the engine's immutable messages; each read converts them into new ADK
 * {@code Event}s (ADK Java's events are mutable, so none is shared between reads). At most {@code
 * maxSessions} sessions are kept, the least recently read dropped first.
 */
final class SessionLogCache {
  /** What is kept of one session. */
  record Entry(double createTime, long lastSequence, List<Event> events) {}

  private final Map<List<String>, Entry> entries;

  SessionLogCache(int maxSessions) {
    this.entries =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<List<String>, Entry> eldest) {
            return size() > maxSessions;
          }
        };
  }

  private static List<String> key(String app, String user, String session) {
    return List.of(app, user, session);
  }

  /** What is kept of a session, if anything. */
  synchronized @Nullable Entry get(String app, String user, String session) {
    return entries.get(key(app, user, session));
  }

  /**
   * The whole session: {@code message} read with {@code after_sequence = kept.lastSequence()} (or
   * whole when {@code kept} is null) with the kept events in front; what is kept updated.
   */
  synchronized Session update(
      String app, String user, String session, Session message, @Nullable Entry kept) {
    List<Event> events = message.getEventsList();
    if (kept != null) {
      List<Event> all = new ArrayList<>(kept.events().size() + events.size());
      all.addAll(kept.events());
      all.addAll(events);
      events = all;
      message = message.toBuilder().clearEvents().addAllEvents(events).build();
    }
    entries.put(
        key(app, user, session),
        new Entry(message.getCreateTime(), message.getLastSequence(), List.copyOf(events)));
    return message;
  }

  /** Forgets a session (deleted, or not found). */
  synchronized void forget(String app, String user, String session) {
    entries.remove(key(app, user, session));
  }

  /** How many sessions are kept (for tests). */
  synchronized int size() {
    return entries.size();
  }
}
