package dev.contextengine.adk;

import com.google.adk.memory.BaseMemoryService;
import com.google.adk.memory.MemoryEntry;
import com.google.adk.memory.SearchMemoryResponse;
import com.google.adk.sessions.Session;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.v1.AddSessionToMemoryRequest;
import dev.contextengine.v1.SearchMemoryRequest;
import io.reactivex.rxjava3.core.Completable;
import io.reactivex.rxjava3.core.Single;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * ADK Java's {@link BaseMemoryService} over the engine's memory RPCs: long-term memory lives in the
 * engine next to the sessions (use it with a {@link ContextEngineSessionService} on the same
 * sidecar), searched per app and user with the engine's keyword search (google-adk's tokenization,
 * BM25 ranking).
 *
 * <ul>
 *   <li>{@code addSessionToMemory} adds the session as the engine stores it (rewound turns left
 *       out), not the {@code Session} object's copy of its events; a session the engine does not
 *       have fails with the client's {@code ContextEngineException} (NOT_FOUND / {@code
 *       SESSION_NOT_FOUND}). Adding again is idempotent.
 *   <li>{@code searchMemory} returns at most the app's {@code MemoryConfig.max_results} (default
 *       10) memories, best first; a blank query finds nothing; only the first 10,000 characters of
 *       a query are searched. A {@code MemoryEntry}'s {@code timestamp} is the event's time in
 *       ISO-8601 UTC ({@code Instant.toString()}; ADK Java's in-memory service reads the
 *       milliseconds as seconds there).
 * </ul>
 */
public final class ContextEngineMemoryService implements BaseMemoryService {
  /** The longest query searched (longer ones are cut here, not refused). */
  public static final int MAX_QUERY_CHARS = 10_000;

  private final ContextEngineClient client;

  /** The service over {@code client} (shared, not closed). */
  public ContextEngineMemoryService(ContextEngineClient client) {
    this.client = Objects.requireNonNull(client, "client");
  }

  @Override
  public Completable addSessionToMemory(Session session) {
    return Completable.fromAction(
        () ->
            client.addSessionToMemory(
                AddSessionToMemoryRequest.newBuilder()
                    .setAppName(session.appName())
                    .setUserId(session.userId())
                    .setSessionId(session.id())
                    .build()));
  }

  @Override
  public Single<SearchMemoryResponse> searchMemory(String appName, String userId, String query) {
    return Single.fromCallable(
        () -> {
          List<MemoryEntry> memories = new ArrayList<>();
          if (!query.isBlank()) {
            String cut =
                query.length() > MAX_QUERY_CHARS ? query.substring(0, MAX_QUERY_CHARS) : query;
            dev.contextengine.v1.SearchMemoryResponse response =
                client.searchMemory(
                    SearchMemoryRequest.newBuilder()
                        .setAppName(appName)
                        .setUserId(userId)
                        .setQuery(cut)
                        .build());
            for (dev.contextengine.v1.MemoryEntry entry : response.getMemoriesList()) {
              memories.add(
                  MemoryEntry.builder()
                      .content(AdkConvert.contentFromProto(entry.getContent()))
                      .author(entry.getAuthor())
                      .timestamp(AdkConvert.instantOfSeconds(entry.getTimestamp()).toString())
                      .build());
            }
          }
          return SearchMemoryResponse.builder().memories(memories).build();
        });
  }
}
