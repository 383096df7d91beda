package dev.contextengine.adk;

import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.GetSessionConfig;
import com.google.adk.sessions.ListEventsResponse;
import com.google.adk.sessions.ListSessionsResponse;
import com.google.adk.sessions.Session;
import com.google.adk.sessions.SessionNotFoundException;
import com.google.adk.sessions.State;
import com.google.common.collect.MapMaker;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.v1.AppendEventRequest;
import dev.contextengine.v1.AppendEventResponse;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.DeleteSessionRequest;
import dev.contextengine.v1.GetSessionRequest;
import dev.contextengine.v1.ListEventsRequest;
import dev.contextengine.v1.ListSessionsRequest;
import dev.contextengine.v1.SessionOrder;
import io.reactivex.rxjava3.core.Completable;
import io.reactivex.rxjava3.core.Maybe;
import io.reactivex.rxjava3.core.Single;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentMap;
import org.jspecify.annotations.Nullable;

/**
 * ADK Java's {@link BaseSessionService} over a contextengine sidecar: sessions, state and the event
 * log live in the engine, with google-adk 2.13's (Python's) semantics.
 *
 * <ul>
 *   <li>{@code createSession}: the state is split by scope by the engine ({@code app:} / {@code
 *       user:} keys go to the app and user state, {@code temp:} keys are dropped); the id is
 *       trimmed, and a UUID when none is given; an id in use fails with {@link
 *       SessionAlreadyExistsException}.
 *   <li>{@code getSession}: empty for a missing (or deleted) session. Without a config, the engine
 *       events of the last {@value #MAX_KEPT_SESSIONS} sessions read are kept, and reading one
 *       again fetches only the events appended since (a session deleted and re-created under the
 *       same id is read whole); every read converts them into new ADK events. {@link
 *       GetSessionConfig#numRecentEvents()} (0: no events) and {@link
 *       GetSessionConfig#afterTimestamp()} ({@code timestamp >= afterTimestamp}) filter the events,
 *       combined, as ADK's services do. The state is merged ({@code app:} / {@code user:} keys
 *       included, overriding same-named session keys). The events are the session as ADK Java's
 *       {@code Runner} must see it to act as google-adk 2.13 does ({@link RunnerView}): rewinds
 *       applied (the events a rewind took away and the rewind events are left out), and without the
 *       engine's compaction summaries (ADK Java would apply them itself; the plugin's contents have
 *       them). {@code listEvents} returns the log as stored.
 *   <li>{@code listSessions}: merged states, no events, ordered by {@code (lastUpdateTime, userId,
 *       id)} oldest first (ADK Python's order; ADK Java's in-memory service has none); a null user
 *       lists every user of the app.
 *   <li>{@code deleteSession}: no error for a missing session.
 *   <li>{@code listEvents}: every event of the session, fetched page by page ({@link
 *       #listEvents(String, String, String, String, int)} returns one page and its {@code
 *       nextPageToken}); a missing session has none, as in ADK Java's in-memory service.
 *   <li>{@code appendEvent}: persist first, then ADK's default (state delta into {@code
 *       session.state()}, the event onto {@code session.events()}). A partial event is returned
 *       untouched and not stored; {@code temp:} keys of the delta are applied to the caller's
 *       session (as ADK Python and ADK Kotlin do) and removed from the event, which is what is
 *       stored; {@link State#REMOVED} is stored as {@code null} (see {@link AdkConvert}); the event
 *       keeps its id and timestamp; {@code session.lastUpdateTime()} becomes the event's timestamp.
 *       A missing or deleted session fails with ADK's {@link SessionNotFoundException}. A stale
 *       {@code Session} object (another writer appended since it was read) fails with {@link
 *       StaleSessionException}: the service remembers the engine's last sequence for each {@code
 *       Session} object it returned (weakly, by identity) and the append is conditional on it.
 *       Summaries the engine's own compaction appended meanwhile do not make the object stale.
 *       Appending the same event (same id) again is an idempotent replay. A message answering
 *       long-running calls resumes the calls' invocation, as google-adk's {@code Runner} does: its
 *       run's events are stored (and yielded) with that invocation id ({@link InvocationAliases}).
 * </ul>
 *
 * <p>Errors arrive through the Rx types' error channel. Besides the ones above, a sidecar that is
 * down or answers too late is the client's {@link ContextEngineException} (code {@code UNAVAILABLE}
 * / {@code DEADLINE_EXCEEDED}, the message naming the target); an event the engine cannot hold is
 * an {@link IllegalArgumentException}; a negative {@code numRecentEvents} is the engine's {@code
 * INVALID_ARGUMENT} as a {@link ContextEngineException}.
 *
 * <p>Calls block the subscribing thread (as ADK's in-memory service computes on it). The client is
 * shared, not owned: close it yourself.
 */
public final class ContextEngineSessionService implements BaseSessionService {
  private static final int PAGE = 1000;

  /** Sessions whose events {@code getSession} keeps (each with all its engine events). */
  public static final int MAX_KEPT_SESSIONS = 16;

  private final ContextEngineClient client;

  /** The engine's last sequence each returned Session object has seen (identity, weak keys). */
  private final ConcurrentMap<Session, Long> seen = new MapMaker().weakKeys().makeMap();

  /** The engine events of the sessions read last (whole reads fetch only what is new). */
  private final SessionLogCache logs = new SessionLogCache(MAX_KEPT_SESSIONS);

  /** Runs that continue a long-running call's invocation (shared with the client's plugin). */
  private final InvocationAliases aliases;

  /** The service over {@code client} (share it with the memory service and the plugin). */
  public ContextEngineSessionService(ContextEngineClient client) {
    this.client = Objects.requireNonNull(client, "client");
    this.aliases = InvocationAliases.of(client);
  }

  /** The client the service calls. */
  public ContextEngineClient client() {
    return client;
  }

  /** The engine's last sequence as {@code session} last saw it (empty: not read through here). */
  public Optional<Long> lastSequence(Session session) {
    return Optional.ofNullable(seen.get(session));
  }

  /** ADK's abstract (deprecated) form: the {@code Map} overload. */
  @Deprecated
  @Override
  public Single<Session> createSession(
      String appName,
      String userId,
      @Nullable ConcurrentMap<String, Object> state,
      @Nullable String sessionId) {
    return createSession(appName, userId, (Map<String, Object>) state, sessionId);
  }

  @Override
  public Single<Session> createSession(
      String appName,
      String userId,
      @Nullable Map<String, Object> state,
      @Nullable String sessionId) {
    return Single.fromCallable(
        () -> {
          String id = sessionId == null ? "" : sessionId.trim();
          if (id.isEmpty()) {
            id = UUID.randomUUID().toString();
          }
          CreateSessionRequest.Builder request =
              CreateSessionRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setSessionId(id);
          if (state != null) {
            request.setState(AdkConvert.stateToStruct(state));
          }
          try {
            return remember(client.createSession(request.build()).getSession());
          } catch (ContextEngineException e) {
            if ("SESSION_ALREADY_EXISTS".equals(e.reason())) {
              throw new SessionAlreadyExistsException(id, e);
            }
            throw e;
          }
        });
  }

  @Override
  public Maybe<Session> getSession(
      String appName, String userId, String sessionId, Optional<GetSessionConfig> config) {
    return Maybe.fromCallable(
        () -> {
          GetSessionRequest.Builder request =
              GetSessionRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setSessionId(sessionId.trim());
          if (config != null && config.isPresent()) {
            config.get().numRecentEvents().ifPresent(request::setNumRecentEvents);
            config
                .get()
                .afterTimestamp()
                .ifPresent(t -> request.setAfterTimestamp(AdkConvert.secondsOf(t)));
          }
          try {
            if (request.hasNumRecentEvents() || request.hasAfterTimestamp()) {
              return remember(client.getSession(request.build()).getSession());
            }
            return remember(whole(request));
          } catch (ContextEngineException e) {
            if ("SESSION_NOT_FOUND".equals(e.reason()) || noSuchId(e)) {
              logs.forget(appName, userId, request.getSessionId());
              return null;
            }
            throw e;
          }
        });
  }

  /** The whole session: the events kept from an earlier read and those appended since. */
  private dev.contextengine.v1.Session whole(GetSessionRequest.Builder request) {
    String app = request.getAppName();
    String user = request.getUserId();
    String id = request.getSessionId();
    SessionLogCache.Entry kept = logs.get(app, user, id);
    if (kept != null) {
      request.setAfterSequence(kept.lastSequence());
    }
    dev.contextengine.v1.Session message = client.getSession(request.build()).getSession();
    if (kept != null
        && (message.getCreateTime() != kept.createTime()
            || message.getLastSequence() < kept.lastSequence())) {
      // deleted and made again under the same id: read it whole
      kept = null;
      message = client.getSession(request.clearAfterSequence().build()).getSession();
    }
    return logs.update(app, user, id, message, kept);
  }

  @Override
  public Single<ListSessionsResponse> listSessions(String appName, @Nullable String userId) {
    return Single.fromCallable(
        () -> {
          List<Session> sessions = new ArrayList<>();
          ListSessionsRequest request =
              ListSessionsRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId == null ? "" : userId)
                  .setPageSize(PAGE)
                  .setOrder(SessionOrder.SESSION_ORDER_LAST_UPDATE_ASC)
                  .build();
          for (dev.contextengine.v1.Session session : client.iterateSessions(request)) {
            sessions.add(remember(session));
          }
          return ListSessionsResponse.builder().sessions(sessions).build();
        });
  }

  @Override
  public Completable deleteSession(String appName, String userId, String sessionId) {
    return Completable.fromAction(
        () -> {
          logs.forget(appName, userId, sessionId.trim());
          try {
            client.deleteSession(
                DeleteSessionRequest.newBuilder()
                    .setAppName(appName)
                    .setUserId(userId)
                    .setSessionId(sessionId.trim())
                    .setAllowMissing(true)
                    .build());
          } catch (ContextEngineException e) {
            if (!noSuchId(e)) {
              throw e;
            }
          }
        });
  }

  @Override
  public Single<ListEventsResponse> listEvents(String appName, String userId, String sessionId) {
    return Single.fromCallable(
        () -> {
          List<Event> events = new ArrayList<>();
          String token = "";
          do {
            ListEventsResponse page = page(appName, userId, sessionId, token, PAGE);
            events.addAll(page.events());
            token = page.nextPageToken().orElse("");
          } while (!token.isEmpty());
          return ListEventsResponse.builder().events(events).build();
        });
  }

  /**
   * One page of a session's events ({@code pageToken} "" for the first; {@code pageSize} 0 for the
   * engine's default) with the token of the next page, if there is one.
   */
  public Single<ListEventsResponse> listEvents(
      String appName, String userId, String sessionId, String pageToken, int pageSize) {
    return Single.fromCallable(() -> page(appName, userId, sessionId, pageToken, pageSize));
  }

  private ListEventsResponse page(
      String appName, String userId, String sessionId, String token, int size) {
    dev.contextengine.v1.ListEventsResponse response;
    try {
      response =
          client.listEvents(
              ListEventsRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setSessionId(sessionId)
                  .setPageToken(token)
                  .setPageSize(size)
                  .build());
    } catch (ContextEngineException e) {
      if ("SESSION_NOT_FOUND".equals(e.reason()) || noSuchId(e)) {
        return ListEventsResponse.builder().events(List.of()).build();
      }
      throw e;
    }
    List<Event> events = new ArrayList<>();
    for (dev.contextengine.v1.Event event : response.getEventsList()) {
      events.add(AdkConvert.eventFromProto(event));
    }
    ListEventsResponse.Builder out = ListEventsResponse.builder().events(events);
    if (!response.getNextPageToken().isEmpty()) {
      out.nextPageToken(response.getNextPageToken());
    }
    return out.build();
  }

  @Override
  public Single<Event> appendEvent(Session session, Event event) {
    Objects.requireNonNull(session, "session cannot be null");
    Objects.requireNonNull(event, "event cannot be null");
    if (event.partial().orElse(false)) {
      return Single.just(event);
    }
    return Single.defer(
        () -> {
          persist(session, event);
          return BaseSessionService.super.appendEvent(session, event);
        });
  }

  /**
   * Applies and trims temp: keys, gives the answer to a long-running call the call's invocation
   * ({@link InvocationAliases}), appends the event to the engine, updates the session's marks.
   */
  private void persist(Session session, Event event) {
    applyTemp(session, event);
    aliases.apply(session, event);
    AppendEventRequest.Builder request =
        AppendEventRequest.newBuilder()
            .setAppName(session.appName())
            .setUserId(session.userId())
            .setSessionId(session.id())
            .setEvent(AdkConvert.eventToProto(event));
    Long expected = seen.get(session);
    AppendEventResponse response;
    while (true) {
      if (expected != null) {
        request.setExpectedLastSequence(expected);
      }
      try {
        response = client.appendEvent(request.build());
        break;
      } catch (ContextEngineException e) {
        if ("SESSION_NOT_FOUND".equals(e.reason())) {
          throw new SessionNotFoundException("Session " + session.id() + " not found.", e);
        }
        if (!"SEQUENCE_MISMATCH".equals(e.reason()) || expected == null) {
          throw e;
        }
        Long summarized = afterEngineSummaries(session, expected);
        if (summarized == null) {
          throw new StaleSessionException(session.id(), expected, e);
        }
        expected = summarized;
      }
    }
    if (response.getDuplicate()) {
      return;
    }
    session.lastUpdateTime(Instant.ofEpochMilli(event.timestamp()));
    seen.put(session, response.getLastSequence());
  }

  /** temp: keys into the caller's session state, then out of the event's delta. */
  private static void applyTemp(Session session, Event event) {
    EventActions actions = event.actions();
    if (actions == null || actions.stateDelta() == null) {
      return;
    }
    Map<String, Object> delta = actions.stateDelta();
    Map<String, Object> temp = new HashMap<>();
    delta.forEach(
        (key, value) -> {
          if (key.startsWith(State.TEMP_PREFIX)) {
            temp.put(key, value);
          }
        });
    temp.forEach(
        (key, value) -> {
          if (value == State.REMOVED) {
            session.state().remove(key);
          } else {
            session.state().put(key, value);
          }
          delta.remove(key);
        });
  }

  /**
   * The session's last sequence if every event appended after {@code after} is one of the engine's
   * own compaction summaries (which the runner's session leaves out, see {@link RunnerView}); null
   * otherwise (another writer appended).
   */
  private @Nullable Long afterEngineSummaries(Session session, long after) {
    dev.contextengine.v1.ListEventsResponse page =
        client.listEvents(
            ListEventsRequest.newBuilder()
                .setAppName(session.appName())
                .setUserId(session.userId())
                .setSessionId(session.id())
                .setAfterSequence(after)
                .setPageSize(PAGE)
                .build());
    if (!page.getNextPageToken().isEmpty() || page.getEventsCount() == 0) {
      return null;
    }
    for (dev.contextengine.v1.Event event : page.getEventsList()) {
      if (!event.getActions().hasCompaction()) {
        return null;
      }
    }
    return page.getEvents(page.getEventsCount() - 1).getSequence();
  }

  private Session remember(dev.contextengine.v1.Session message) {
    Session session = AdkConvert.sessionFromProto(RunnerView.of(message));
    seen.put(session, message.getLastSequence());
    return session;
  }

  /** A session id the engine refuses (empty, too long, control characters) names no session. */
  private static boolean noSuchId(ContextEngineException e) {
    return e.isInvalidId("session_id");
  }
}
