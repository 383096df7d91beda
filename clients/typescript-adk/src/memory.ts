/**
 * `ContextEngineMemoryService`: `@google/adk`'s `BaseMemoryService` over the engine's memory RPCs.
 *
 * Long-term memory lives in the engine, next to the sessions (use it with a
 * `ContextEngineSessionService` on the same connection):
 *
 * - `addSessionToMemory` adds the session *as the engine stores it* (the events the session
 *   service appended, rewound turns left out), not the object's copy of its events; a session the
 *   engine does not have throws the client's `ContextEngineError` (`NOT_FOUND`,
 *   `SESSION_NOT_FOUND`).
 * - `searchMemory` runs the engine's keyword search per (app, user): google-adk's tokenization,
 *   BM25 ranking, at most the app's `MemoryConfig.maxResults` (default 10) memories, best first. A
 *   blank query finds nothing; only the first 10,000 characters of a query are searched.
 *
 * A `MemoryEntry` has the event's `content` and `author`, and `timestamp` as ISO 8601 in UTC
 * (ADK TypeScript's preferred format).
 */
import type { MemoryEntry as EngineMemory } from "@contextengine/client";
import type { BaseMemoryService, MemoryEntry, SearchMemoryResponse, Session } from "@google/adk";
import { Connection, type ConnectionInit } from "./connection.js";
import { contentFromProto } from "./convert.js";

/** Longest query the engine searches (longer ones are cut here, not refused). */
export const MAX_QUERY_CHARS = 10_000;

/** An engine memory as ADK TypeScript's `MemoryEntry`. */
export function entryToAdk(entry: EngineMemory): MemoryEntry {
  const out: MemoryEntry = {
    content: entry.content ? contentFromProto(entry.content) : { parts: [] },
    timestamp: new Date(entry.timestamp * 1000).toISOString(),
  };
  if (entry.author) {
    out.author = entry.author;
  }
  return out;
}

/** ADK TypeScript's memory service backed by the engine; see the module documentation. */
export class ContextEngineMemoryService implements BaseMemoryService {
  readonly connection: Connection;

  /** `{target: "host:port"}` or `{connection: sessions.connection}` (shared). */
  constructor(init: ConnectionInit) {
    this.connection = Connection.of(init);
  }

  /** Closes the client if this service made it. */
  close(): void {
    this.connection.release();
  }

  async addSessionToMemory(session: Session): Promise<void> {
    await this.connection.client.addSessionToMemory({
      appName: session.appName,
      userId: session.userId,
      sessionId: session.id,
    });
  }

  async searchMemory(request: {
    appName: string;
    userId: string;
    query: string;
  }): Promise<SearchMemoryResponse> {
    if (!request.query.trim()) {
      return { memories: [] };
    }
    const response = await this.connection.client.searchMemory({
      appName: request.appName,
      userId: request.userId,
      query: request.query.slice(0, MAX_QUERY_CHARS),
    });
    return { memories: response.memories.map(entryToAdk) };
  }
}
