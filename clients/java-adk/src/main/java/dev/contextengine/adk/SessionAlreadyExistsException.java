package dev.contextengine.adk;

import com.google.adk.sessions.SessionException;

/**
 * {@code createSession} with an id the engine already holds for the app and user (the engine's
 * {@code ALREADY_EXISTS} / {@code SESSION_ALREADY_EXISTS}; ADK Python raises {@code
 * AlreadyExistsError}). The cause is the client's {@code ContextEngineException}.
 */
public final class SessionAlreadyExistsException extends SessionException {
  private static final long serialVersionUID = 1L;

  /** The exception for session {@code sessionId}. */
  public SessionAlreadyExistsException(String sessionId, Throwable cause) {
    super("Session with id " + sessionId + " already exists.", cause);
  }
}
