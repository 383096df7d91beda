package dev.contextengine.client;

import java.time.Duration;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Options of a followed stream ({@link ContextEngineClient#subscribeEvents} and {@link
 * ContextEngineClient#watchSessionState}).
 *
 * @param maxFailures failures in a row, without a frame in between, before giving up (default 5)
 * @param idleTimeout a stream silent this long is reopened; {@code null} picks three heartbeat
 *     intervals plus 5 s (the request's {@code heartbeat_seconds}, or the server's 15 s)
 * @param headers extra request headers (gRPC metadata, ASCII values)
 * @param onReconnect called before each reopening with the error and the failures in a row
 */
public record StreamOptions(
    int maxFailures,
    Duration idleTimeout,
    Map<String, String> headers,
    BiConsumer<ContextEngineException, Integer> onReconnect) {
  /** Five failures in a row, the idle timeout from the heartbeat interval, no headers. */
  public static final StreamOptions DEFAULT = new StreamOptions(5, null, Map.of(), null);

  /** Checks the values. */
  public StreamOptions {
    if (maxFailures < 1) {
      throw new IllegalArgumentException("maxFailures must be at least 1");
    }
    headers = headers == null ? Map.of() : Map.copyOf(headers);
  }

  /** These options with another {@code maxFailures}. */
  public StreamOptions withMaxFailures(int value) {
    return new StreamOptions(value, idleTimeout, headers, onReconnect);
  }

  /** These options with another idle timeout. */
  public StreamOptions withIdleTimeout(Duration value) {
    return new StreamOptions(maxFailures, value, headers, onReconnect);
  }

  /** These options with a reconnect hook. */
  public StreamOptions withOnReconnect(BiConsumer<ContextEngineException, Integer> value) {
    return new StreamOptions(maxFailures, idleTimeout, headers, value);
  }

  StreamOptions resolved(int heartbeatSeconds) {
    if (idleTimeout != null) {
      return this;
    }
    int heartbeat = heartbeatSeconds > 0 ? heartbeatSeconds : 15;
    return new StreamOptions(
        maxFailures, Duration.ofSeconds(3L * heartbeat + 5), headers, onReconnect);
  }
}
