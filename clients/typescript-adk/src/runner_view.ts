/**
 * The session as ADK TypeScript's `Runner` must see it to act as google-adk 2.13 (Python) does.
 *
 * - **Rewinds.** `@google/adk` 2.0 has no rewinds: handed the whole log, its `Runner` routes the
 *   next message by the last agent of the log, rewound turns included (google-adk routes on the
 *   log with rewinds applied). So the events a rewind took away, and the rewind events
 *   themselves, are left out, by google-adk's rule: walking the log from its end, a rewind naming
 *   invocation X removes itself and everything back to the first event of X, and the walk resumes
 *   before it (rewinds in a removed stretch have no effect); a rewind whose X does not appear
 *   earlier removes only itself.
 * - **Answers to calls.** A message of function responses goes to the agent that made the call
 *   it answers, as in google-adk and ADK Java (ADK TypeScript does so only for resumable apps,
 *   and otherwise runs the agent that spoke last, which then fails: "No function call event
 *   found"). {@link callerOf} names that agent; `ContextEnginePlugin` routes the run to it.
 *
 * The engine's compaction summaries stay in the session: ADK TypeScript's own contents builder
 * does not act on them (it knows compaction as its own `CompactedEvent`s), and the model's
 * contents come from the engine.
 */
import type { Event } from "@google/adk";

/** The engine's rewind mark on an event (a field ADK TypeScript does not model). */
function rewindTarget(event: Event): string | undefined {
  const actions = event.actions as { rewindBeforeInvocationId?: string } | undefined;
  return actions?.rewindBeforeInvocationId || undefined;
}

/** The events of `events` still live once every rewind is applied, in log order. */
export function liveEvents(events: Event[]): Event[] {
  let firstOf: Map<string, number> | undefined;
  const kept: Event[] = [];
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i] as Event;
    const target = rewindTarget(event);
    if (target === undefined) {
      kept.push(event);
      continue;
    }
    if (firstOf === undefined) {
      firstOf = new Map();
      events.forEach((e, index) => {
        if (e.invocationId && !firstOf?.has(e.invocationId)) {
          firstOf?.set(e.invocationId, index);
        }
      });
    }
    const first = firstOf.get(target);
    if (first !== undefined && first < i) {
      i = first;
    }
  }
  return kept.reverse();
}

/** The ids of the function calls of an event. */
export function callIds(event: Event): string[] {
  return (event.content?.parts ?? []).flatMap((part) =>
    part.functionCall?.id ? [part.functionCall.id] : [],
  );
}

/** The ids of the function responses of an event (responses without an id left out). */
export function responseIds(event: Event): string[] {
  return (event.content?.parts ?? []).flatMap((part) =>
    part.functionResponse?.id ? [part.functionResponse.id] : [],
  );
}

/**
 * The author of the call that the last event of `events` answers (google-adk's rule: the first
 * function response of the last event, its call searched from the end of the events before it),
 * if the last event is such an answer.
 */
export function callerOf(events: Event[]): string | undefined {
  const last = events.at(-1);
  const first = last?.content?.parts?.find((part) => part.functionResponse !== undefined);
  const id = first?.functionResponse?.id;
  if (!id) {
    return undefined;
  }
  for (let i = events.length - 2; i >= 0; i--) {
    const event = events[i] as Event;
    if (callIds(event).includes(id)) {
      return event.author || undefined;
    }
  }
  return undefined;
}
