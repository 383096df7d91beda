package dev.contextengine.adk;

import dev.contextengine.v1.Event;
import dev.contextengine.v1.Session;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The session as ADK Java's {@code Runner} must see it to act as google-adk 2.13 (Python) does: the
 * engine's log with rewinds applied and without the engine's compaction summaries.
 *
 * <ul>
 *   <li><b>Rewinds.</b> ADK Java 1.8 has no rewinds: handed the whole log, its {@code Runner}
 *       routes the next message by the last agent of the log, rewound turns included (google-adk
 *       routes on the log with rewinds applied), and its contents processor sees events a rewind
 *       took away. So the events a rewind took away, and the rewind events themselves, are left
 *       out, by google-adk's rule: walking the log from its end, a rewind naming invocation X
 *       removes itself and everything back to the first event of X, and the walk resumes before it
 *       (rewinds in a removed stretch have no effect); a rewind whose X does not appear earlier
 *       removes only itself.
 *   <li><b>Summaries.</b> ADK Java's own contents processor runs before {@link ContextEnginePlugin}
 *       replaces the contents. Handed a summary, it applies the summary's range itself, hides the
 *       calls the range covers, and fails the run ({@code IllegalStateException: No function call
 *       event found for function response IDs}) when a long-running call's answer arrives after a
 *       summary covered the call. The contents the model gets come from the engine, summaries
 *       applied there; so the summaries are left out of the session ADK Java runs on ({@code
 *       listEvents} still returns them).
 * </ul>
 *
 * <p>Both rules look at the engine's messages only, so that the runner's session is the same
 * whichever client read it.
 */
final class RunnerView {
  private RunnerView() {}

  /** {@code message} with the events the runner must not see left out (see the class docs). */
  static Session of(Session message) {
    List<Event> events = message.getEventsList();
    List<Event> kept = live(events);
    kept.removeIf(event -> event.getActions().hasCompaction());
    if (kept.size() == events.size()) {
      return message;
    }
    return message.toBuilder().clearEvents().addAllEvents(kept).build();
  }

  /** The events of {@code events} still live once every rewind is applied, in log order. */
  static List<Event> live(List<Event> events) {
    Map<String, Integer> firstOf = null;
    List<Event> kept = new ArrayList<>(events.size());
    for (int i = events.size() - 1; i >= 0; i--) {
      Event event = events.get(i);
      String target = event.getActions().getRewindBeforeInvocationId();
      if (target.isEmpty()) {
        kept.add(event);
        continue;
      }
      if (firstOf == null) {
        firstOf = new HashMap<>();
        for (int j = 0; j < events.size(); j++) {
          firstOf.putIfAbsent(events.get(j).getInvocationId(), j);
        }
        firstOf.remove("");
      }
      Integer first = firstOf.get(target);
      if (first != null && first < i) {
        i = first;
      }
    }
    Collections.reverse(kept);
    return kept;
  }
}
