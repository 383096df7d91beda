package dev.contextengine.client;

import dev.contextengine.v1.Event;

/**
 * Client-side checks of obvious mistakes, raised before anything is sent. They mirror the server's
 * first checks exactly (same code, reason, {@code field} metadata and order), so a request the
 * client rejects fails as it would have failed on the server, only sooner.
 */
final class Validate {
  private Validate() {}

  static void require(String method, String value, String field) {
    if (value == null || value.isEmpty()) {
      throw ContextEngineException.missingField(method, field);
    }
  }

  static void app(String method, String appName) {
    require(method, appName, "app_name");
  }

  static void appUser(String method, String appName, String userId) {
    app(method, appName);
    require(method, userId, "user_id");
  }

  static void session(String method, String appName, String userId, String sessionId) {
    appUser(method, appName, userId);
    require(method, sessionId, "session_id");
  }

  /** An event to append: present, with an author ({@code field} is "event" or "events[i]"). */
  static void event(String method, Event event, String field) {
    if (event == null) {
      throw ContextEngineException.missingField(method, field);
    }
    require(method, event.getAuthor(), field + ".author");
  }
}
