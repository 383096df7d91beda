/**
 * `ContextEngineSessionService`: `@google/adk`'s `BaseSessionService` over a contextengine
 * sidecar. Behaviour is ADK TypeScript's (its `DatabaseSessionService` where its services differ),
 * with the engine's google-adk 2.13 semantics underneath:
 *
 * - `createSession`: the state is split by scope by the engine (`app:` / `user:` keys update the
 *   app and user state, `temp:` keys are dropped); an id is made with `crypto.randomUUID()` when
 *   none is given; an id in use throws {@link SessionAlreadyExistsError} (ADK's in-memory service
 *   silently replaces the session; its database service throws as here).
 * - `getSession`: `undefined` for a missing (or deleted) session. The events are the session as
 *   ADK TypeScript's `Runner` must see it to act as google-adk 2.13 does: rewinds applied (the
 *   events a rewind took away and the rewind events are left out, see `runner_view.ts`);
 *   `client.listEvents` returns the log as stored. `config.numRecentEvents` keeps
 *   the last N events, and **`0` (like `undefined`) means no limit**, as ADK TypeScript's
 *   services treat it (a falsy check; ADK Python returns no events for 0).
 *   `config.afterTimestamp` (milliseconds) keeps events with `timestamp >= afterTimestamp`; `0`
 *   is no filter. Both combine.
 * - `listSessions`: merged states (as ADK's database service), no events, with ADK TypeScript's
 *   pagination: `limit` / `offset` / 1-based `page` (which wins over `offset`), and the response's
 *   `page`, `limit`, `totalItems`, `totalPages`; `order` `'asc'` / `'desc'` sorts by
 *   `lastUpdateTime` then id; without `order` the engine's order (oldest update first).
 * - `deleteSession`: no error for a missing session.
 * - `appendEvent`: a partial event is returned untouched and not stored; `temp:` keys are trimmed
 *   from the delta (ADK TypeScript does not apply them to the session); the event is stored
 *   first, then the base class updates the caller's session (state delta, and **replace-by-id**:
 *   an event whose id is already in `session.events` replaces it instead of being appended);
 *   `session.lastUpdateTime` becomes the event's timestamp. Errors: {@link SessionNotFoundError}
 *   for a missing or deleted session, {@link StaleSessionError} when another writer appended
 *   since this session object was read (the append is conditional on the engine's last sequence
 *   the object has seen). Summaries the engine's own compaction appended meanwhile do not make
 *   the object stale: they are added to `session.events` and the append retried. Appending the
 *   same event again (same id) is an idempotent replay. A message answering long-running calls
 *   resumes the calls' invocation, as google-adk's `Runner` does: its run's events are stored
 *   (and yielded) with that invocation id (`invocation_aliases.ts`).
 * - `getUserState`: the user's state without the `user:` prefix (ADK Python's `get_user_state`).
 *
 * A sidecar that cannot be reached fails the call with the client's `ContextEngineError`
 * (`code` `UNAVAILABLE` or `DEADLINE_EXCEEDED`, after the client's retries of safe calls).
 */
import {
  type ContextEngineClient,
  type ContextEngineClientOptions,
  ContextEngineError,
  hasReason,
  type Session as SessionMessage,
} from "@contextengine/client";
import {
  BaseSessionService,
  type CreateSessionRequest,
  type DeleteSessionRequest,
  type Event,
  type GetSessionRequest,
  type ListSessionsRequest,
  type ListSessionsResponse,
  type Session,
} from "@google/adk";
import { Connection, type ConnectionInit } from "./connection.js";
import {
  eventFromProto,
  eventToProto,
  msToSeconds,
  sessionFromProto,
  stateToStruct,
} from "./convert.js";
import { SessionAlreadyExistsError, SessionNotFoundError, StaleSessionError } from "./errors.js";
import { EventCache } from "./event_cache.js";
import { InvocationAliases } from "./invocation_aliases.js";
import { liveEvents } from "./runner_view.js";

const LIST_PAGE = 1000;
const ORDER_LAST_UPDATE_ASC = 1;

/** The engine's last sequence each session object has seen (the stale-session marker). */
const lastSequences = new WeakMap<Session, bigint>();

/** The engine's last sequence this session object has seen, if it came from the engine. */
export function lastSequenceOf(session: Session): bigint | undefined {
  return lastSequences.get(session);
}

function fromEngine(message: SessionMessage): Session {
  const session = sessionFromProto(message);
  lastSequences.set(session, message.lastSequence);
  return session;
}

/** A session id the engine refuses (empty, too long, control characters) names no session. */
function noSuchId(err: unknown): boolean {
  return err instanceof ContextEngineError && err.isInvalidId("session_id");
}

/** ADK TypeScript's session service over the engine; see the module documentation. */
export class ContextEngineSessionService extends BaseSessionService {
  /** The connection (share it with the memory service and the plugin). */
  readonly connection: Connection;
  /** The converted events of recently read sessions (see {@link EventCache}). */
  private readonly events = new EventCache();
  /** Runs that continue a long-running call's invocation (shared with the client's plugin). */
  private readonly aliases: InvocationAliases;

  /** `{target: "host:port"}` (a client made and closed here) or `{connection}` (shared). */
  constructor(init: ConnectionInit) {
    super();
    this.connection = Connection.of(init);
    this.aliases = InvocationAliases.of(this.connection.client);
  }

  /** The client calls go through. */
  get client(): ContextEngineClient {
    return this.connection.client;
  }

  /** Closes the client if this service made it. */
  close(): void {
    this.connection.release();
  }

  override async createSession(request: CreateSessionRequest): Promise<Session> {
    const sessionId = request.sessionId?.trim() || crypto.randomUUID();
    try {
      const response = await this.client.createSession({
        appName: request.appName,
        userId: request.userId,
        sessionId,
        state: stateToStruct(request.state),
      });
      return fromEngine(required(response.session));
    } catch (err) {
      if (hasReason(err, "SESSION_ALREADY_EXISTS")) {
        throw new SessionAlreadyExistsError(`Session with id ${sessionId} already exists.`, {
          cause: err,
        });
      }
      throw err;
    }
  }

  override async getSession(request: GetSessionRequest): Promise<Session | undefined> {
    const config = request.config;
    const key = { appName: request.appName, userId: request.userId, sessionId: request.sessionId };
    // ADK TypeScript: 0 (falsy) is no limit, as undefined
    const filtered = Boolean(config?.numRecentEvents || config?.afterTimestamp);
    const cached = filtered ? undefined : this.events.get(key);
    try {
      const response = await this.client.getSession({
        ...key,
        ...(config?.numRecentEvents ? { numRecentEvents: config.numRecentEvents } : {}),
        ...(config?.afterTimestamp ? { afterTimestamp: msToSeconds(config.afterTimestamp) } : {}),
        ...(cached !== undefined ? { afterSequence: cached.lastSequence } : {}),
      });
      const message = required(response.session);
      if (filtered) {
        const session = fromEngine(message);
        session.events = liveEvents(session.events);
        return session;
      }
      if (cached !== undefined && cached.createTime !== message.createTime) {
        this.events.delete(key); // deleted and made again meanwhile: read it whole
        return await this.getSession(request);
      }
      const events = this.events.update(key, message, cached);
      const session = fromEngine({ ...message, events: [] });
      session.events = liveEvents(events);
      return session;
    } catch (err) {
      if (hasReason(err, "SESSION_NOT_FOUND") || noSuchId(err)) {
        this.events.delete(key);
        return undefined;
      }
      throw err;
    }
  }

  override async listSessions(request: ListSessionsRequest): Promise<ListSessionsResponse> {
    const all: Session[] = [];
    for await (const message of this.client.iterateSessions({
      appName: request.appName,
      userId: request.userId ?? "",
      pageSize: LIST_PAGE,
      order: ORDER_LAST_UPDATE_ASC,
    })) {
      const session = fromEngine(message);
      session.events = [];
      all.push(session);
    }
    if (request.order === "asc") {
      all.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || a.id.localeCompare(b.id));
    } else if (request.order === "desc") {
      all.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime || a.id.localeCompare(b.id));
    }
    return paginate(all, request);
  }

  override async deleteSession(request: DeleteSessionRequest): Promise<void> {
    this.events.delete(request);
    try {
      await this.client.deleteSession({ ...request, allowMissing: true });
    } catch (err) {
      if (!noSuchId(err)) {
        throw err;
      }
    }
  }

  /** The user's state, keys without the `user:` prefix (empty for an unknown user). */
  async getUserState(request: {
    appName: string;
    userId: string;
  }): Promise<Record<string, unknown>> {
    const response = await this.client.raw.sessions.getUserState(request);
    return { ...(response.state ?? {}) };
  }

  override async appendEvent({
    session,
    event,
  }: {
    session: Session;
    event: Event;
  }): Promise<Event> {
    if (event.partial) {
      return event;
    }
    for (const key of Object.keys(event.actions?.stateDelta ?? {})) {
      if (key.startsWith("temp:")) {
        delete event.actions.stateDelta[key];
      }
    }
    this.aliases.apply(session, event);
    const message = eventToProto(event);
    let expected = lastSequences.get(session);
    const summaries: Event[] = [];
    for (;;) {
      try {
        const response = await this.client.appendEvent({
          appName: session.appName,
          userId: session.userId,
          sessionId: session.id,
          event: message,
          ...(expected !== undefined ? { expectedLastSequence: expected } : {}),
        });
        if (response.duplicate) {
          return event; // the same event again: already recorded and applied
        }
        session.events.push(...summaries);
        lastSequences.set(session, response.lastSequence);
        break;
      } catch (err) {
        if (hasReason(err, "SESSION_NOT_FOUND")) {
          throw new SessionNotFoundError(`Session ${session.id} not found.`, { cause: err });
        }
        if (!hasReason(err, "SEQUENCE_MISMATCH") || expected === undefined) {
          throw err;
        }
        const more = await this.engineSummaries(session, expected);
        if (more === undefined) {
          throw new StaleSessionError(
            `Session ${session.id} changed since this session object was read (another writer ` +
              `appended after sequence ${expected}); get the session again before appending.`,
            { cause: err },
          );
        }
        summaries.push(...more.events);
        expected = more.last;
      }
    }
    const appended = await super.appendEvent({ session, event });
    session.lastUpdateTime = event.timestamp;
    return appended;
  }

  /**
   * The events appended after sequence `after` when they are all the engine's own compaction
   * summaries (then the session object is not stale), with the new last sequence.
   */
  private async engineSummaries(
    session: Session,
    after: bigint,
  ): Promise<{ events: Event[]; last: bigint } | undefined> {
    const page = await this.client.listEvents({
      appName: session.appName,
      userId: session.userId,
      sessionId: session.id,
      afterSequence: after,
      pageSize: LIST_PAGE,
    });
    const last = page.events[page.events.length - 1];
    if (page.nextPageToken || last === undefined) {
      return undefined;
    }
    if (!page.events.every((e) => e.actions?.compaction !== undefined)) {
      return undefined;
    }
    return { events: page.events.map(eventFromProto), last: last.sequence };
  }
}

function required<T>(value: T | undefined): T {
  if (value === undefined) {
    throw new Error("the sidecar answered without a session");
  }
  return value;
}

/** ADK TypeScript's pagination of a session list (its services' rules). */
export function paginate(all: Session[], request: ListSessionsRequest): ListSessionsResponse {
  const totalItems = all.length;
  const { limit, offset, page } = request;
  if (limit === undefined) {
    return {
      sessions: offset ? all.slice(offset) : all,
      page: 1,
      limit: totalItems,
      totalItems,
      totalPages: totalItems === 0 ? 0 : 1,
    };
  }
  const start = page !== undefined ? (page - 1) * limit : (offset ?? 0);
  const current = page !== undefined ? page : limit === 0 ? 1 : Math.floor(start / limit) + 1;
  return {
    sessions: all.slice(start, start + limit),
    page: current,
    limit,
    totalItems,
    totalPages: limit === 0 ? 0 : Math.ceil(totalItems / limit),
  };
}

export type { ContextEngineClientOptions };
