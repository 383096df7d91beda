package dev.contextengine.adk;

import com.google.adk.sessions.SessionException;

/**
 * {@code appendEvent} on a {@code Session} object another writer has appended to since it was read
 * (the engine's {@code SEQUENCE_MISMATCH}; ADK Python raises {@code StaleSessionError}). Get the
 * session again and append to the fresh copy. The cause is the client's {@code
 * ContextEngineException}.
 */
public final class StaleSessionException extends SessionException {
  private static final long serialVersionUID = 1L;

  /** The exception for session {@code sessionId}, read at sequence {@code expected}. */
  public StaleSessionException(String sessionId, long expected, Throwable cause) {
    super(
        "Session "
            + sessionId
            + " changed since this session object was read (another writer "
            + "appended after sequence "
            + expected
            + "); get the session again before appending "
            + "to it.",
        cause);
  }
}
