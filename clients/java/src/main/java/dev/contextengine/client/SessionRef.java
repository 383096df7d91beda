package dev.contextengine.client;

import dev.contextengine.v1.AppendEventRequest;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.CompactRequest;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.DeleteSessionRequest;
import dev.contextengine.v1.EndInvocationRequest;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.GetSessionRequest;
import dev.contextengine.v1.ListEventsRequest;
import dev.contextengine.v1.Part;
import dev.contextengine.v1.Session;
import dev.contextengine.v1.SubscribeEventsRequest;
import dev.contextengine.v1.WatchSessionStateRequest;

/**
 * The address of one session, and the requests about it an agent sends most, with only the fields
 * that matter filled in (the generated builders take the rest: {@code
 * ref.buildContext("agent").toBuilder().setSkipCompaction(true).build()}).
 *
 * @param appName the app
 * @param userId the user
 * @param sessionId the session
 */
public record SessionRef(String appName, String userId, String sessionId) {
  /** The address of a session message. */
  public static SessionRef of(Session session) {
    return new SessionRef(session.getAppName(), session.getUserId(), session.getId());
  }

  /** GetSession of this session. */
  public GetSessionRequest getSession() {
    return GetSessionRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .build();
  }

  /** DeleteSession of this session. */
  public DeleteSessionRequest deleteSession() {
    return DeleteSessionRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .build();
  }

  /** AppendEvent of one event to this session. */
  public AppendEventRequest appendEvent(Event event) {
    return AppendEventRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .setEvent(event)
        .build();
  }

  /** ListEvents after a sequence (0: from the start). */
  public ListEventsRequest listEvents(long afterSequence) {
    return ListEventsRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .setAfterSequence(afterSequence)
        .build();
  }

  /** BuildContext for an agent's next model call. */
  public BuildContextRequest buildContext(String agentName) {
    return BuildContextRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .setAgentName(agentName)
        .build();
  }

  /** EndInvocation of an invocation of this session. */
  public EndInvocationRequest endInvocation(String invocationId) {
    return EndInvocationRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .setInvocationId(invocationId)
        .build();
  }

  /** Compact this session now. */
  public CompactRequest compact() {
    return CompactRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .build();
  }

  /** SubscribeEvents of this session from the start (session scope). */
  public SubscribeEventsRequest subscribeEvents() {
    return SubscribeEventsRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .build();
  }

  /** WatchSessionState of this session. */
  public WatchSessionStateRequest watchSessionState() {
    return WatchSessionStateRequest.newBuilder()
        .setAppName(appName)
        .setUserId(userId)
        .setSessionId(sessionId)
        .build();
  }

  /** A content of one text part. */
  public static Content text(String role, String text) {
    return Content.newBuilder().setRole(role).addParts(Part.newBuilder().setText(text)).build();
  }

  /**
   * An event by {@code author} in an invocation, with one text part (role "user" for the user, else
   * "model").
   */
  public static Event said(String author, String invocationId, String text) {
    return Event.newBuilder()
        .setAuthor(author)
        .setInvocationId(invocationId)
        .setContent(text(author.equals("user") ? "user" : "model", text))
        .build();
  }
}
