/**
 * The converted events of the sessions a session service read last, so that reading a session
 * again (ADK's Runner reads the whole session at every invocation) fetches and converts only the
 * events appended since (`GetSession` with `afterSequence`).
 *
 * Sound because a session's log is append-only: an event keeps its sequence and content forever
 * (rewinds and compaction summaries are new events). A session deleted and made again under the
 * same id is told apart by its `createTime` and read whole. Every read returns fresh copies (ADK
 * may change the events it is given), and at most {@link MAX_SESSIONS} sessions are kept, the
 * least recently read dropped first.
 */
import type { Session as SessionMessage } from "@contextengine/client";
import type { Event } from "@google/adk";
import { eventFromProto, plain } from "./convert.js";

/** Sessions kept (each with all its events). */
export const MAX_SESSIONS = 16;

interface Entry {
  createTime: number;
  lastSequence: bigint;
  events: Event[];
}

interface Key {
  appName: string;
  userId: string;
  sessionId: string;
}

function id(key: Key): string {
  return JSON.stringify([key.appName, key.userId, key.sessionId]);
}

/**
 * A copy of an event that shares nothing with it. The cached events came from JSON (the proto's
 * JSON form), so a plain-JSON copy is exact (negative zeros kept); ADK's brand symbol is carried
 * over.
 */
function copy(event: Event): Event {
  const out = plain(event) as unknown as Event;
  for (const symbol of Object.getOwnPropertySymbols(event)) {
    Object.defineProperty(out, symbol, {
      value: (event as unknown as Record<symbol, unknown>)[symbol],
      enumerable: true,
    });
  }
  return out;
}

/** See the module documentation. */
export class EventCache {
  private readonly entries = new Map<string, Entry>();

  /** What is kept of a session, if anything. */
  get(key: Key): { createTime: number; lastSequence: bigint } | undefined {
    return this.entries.get(id(key));
  }

  /**
   * Adds the events of `message` (all of them, or those after `cached.lastSequence` when it
   * was read with that `afterSequence`) and returns copies of every event of the session.
   */
  update(key: Key, message: SessionMessage, cached: { lastSequence: bigint } | undefined): Event[] {
    const k = id(key);
    const entry = cached !== undefined ? this.entries.get(k) : undefined;
    const fresh = message.events.map(eventFromProto);
    const events = entry !== undefined ? entry.events.concat(fresh) : fresh;
    this.entries.delete(k);
    this.entries.set(k, {
      createTime: message.createTime,
      lastSequence: message.events.at(-1)?.sequence ?? cached?.lastSequence ?? 0n,
      events,
    });
    while (this.entries.size > MAX_SESSIONS) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) {
        break;
      }
      this.entries.delete(oldest);
    }
    return events.map(copy);
  }

  /** Forgets a session. */
  delete(key: Key): void {
    this.entries.delete(id(key));
  }
}
