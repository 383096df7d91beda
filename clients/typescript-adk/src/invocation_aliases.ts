/**
 * The answer to a long-running call resumes the call's invocation, as google-adk 2.13 (Python)
 * records it.
 *
 * google-adk's `Runner`, given a message of function responses, looks for the calls they answer
 * in the session (rewinds applied); when every response has its call and all the calls are of
 * one invocation, the run continues that invocation: its events carry the call's invocation id.
 * ADK TypeScript's `Runner` starts a new invocation for every message. The difference is not
 * only a name: the engine's sliding-window compaction counts invocations, and a rewind to the
 * answering turn removes the call's turn too in google-adk. So `ContextEngineSessionService`
 * records such a run's events under the call's invocation id (the ADK events themselves are
 * changed, so what the runner yields carries the id that is stored), and `ContextEnginePlugin`
 * names that invocation to the engine (`BuildContext`, `EndInvocation`).
 *
 * One registry per client: the session service and the plugin of an app share their client. At
 * most {@link MAX_ALIASES} runs are remembered (the oldest forgotten first).
 */
import type { ContextEngineClient } from "@contextengine/client";
import type { Event, Session } from "@google/adk";
import { callIds, responseIds } from "./runner_view.js";

export const MAX_ALIASES = 4096;

interface Key {
  appName: string;
  userId: string;
  id: string;
}

const byClient = new WeakMap<ContextEngineClient, InvocationAliases>();

/** See the module documentation. */
export class InvocationAliases {
  /** (app, user, session, the runner's invocation id) -> the invocation it continues. */
  private readonly aliases = new Map<string, string>();

  /** The registry of `client`'s session service and plugin. */
  static of(client: ContextEngineClient): InvocationAliases {
    let aliases = byClient.get(client);
    if (aliases === undefined) {
      aliases = new InvocationAliases();
      byClient.set(client, aliases);
    }
    return aliases;
  }

  /** The invocation the engine knows the runner's `invocationId` as. */
  stored(session: Key, invocationId: string): string {
    return this.aliases.get(aliasKey(session, invocationId)) ?? invocationId;
  }

  /**
   * Before `event` is stored for `session`: a user message of function responses that resumes
   * an invocation makes its run's invocation an alias of that one; an event of an aliased run
   * gets the invocation it continues.
   */
  apply(session: Session, event: Event): void {
    const runner = event.invocationId;
    if (!runner) {
      return;
    }
    const k = aliasKey(session, runner);
    let resumed = this.aliases.get(k);
    if (resumed === undefined && event.author === "user") {
      resumed = resumedInvocation(session.events, event);
      if (resumed !== undefined && resumed !== runner) {
        this.aliases.set(k, resumed);
        for (const oldest of this.aliases.keys()) {
          if (this.aliases.size <= MAX_ALIASES) {
            break;
          }
          this.aliases.delete(oldest);
        }
      }
    }
    if (resumed !== undefined) {
      event.invocationId = resumed;
    }
  }
}

function aliasKey(session: Key, invocationId: string): string {
  return JSON.stringify([session.appName, session.userId, session.id, invocationId]);
}

/**
 * The invocation google-adk would resume for the message `event`: the one invocation of the
 * calls its function responses answer, searched from the end of `events` (the runner's session,
 * rewinds applied); undefined without responses, with a response whose call is not there, or
 * with calls of several invocations.
 */
export function resumedInvocation(events: Event[], event: Event): string | undefined {
  const ids = new Set(responseIds(event));
  if (ids.size === 0) {
    return undefined;
  }
  const invocations = new Set<string>();
  for (let i = events.length - 1; i >= 0 && ids.size > 0; i--) {
    const candidate = events[i] as Event;
    for (const id of callIds(candidate)) {
      if (ids.delete(id)) {
        invocations.add(candidate.invocationId);
      }
    }
  }
  if (ids.size > 0 || invocations.size !== 1) {
    return undefined;
  }
  return [...invocations][0];
}
