/**
 * The errors the drop-ins throw where ADK TypeScript's services have no error class of their own
 * (its database service throws a plain `Error` for an existing id; its in-memory service only
 * logs an append to a missing session). Each keeps the sidecar's `ContextEngineError` as `cause`.
 */

/** `createSession` with an id that is in use. */
export class SessionAlreadyExistsError extends Error {
  override readonly name = "SessionAlreadyExistsError";
}

/** `appendEvent` to a session the engine does not have (never created, or deleted). */
export class SessionNotFoundError extends Error {
  override readonly name = "SessionNotFoundError";
}

/**
 * `appendEvent` with a session object another writer appended to since it was read: get the
 * session again (`getSession`) and append to the fresh object.
 */
export class StaleSessionError extends Error {
  override readonly name = "StaleSessionError";
}
