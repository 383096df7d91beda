package dev.contextengine.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How safe calls are retried: after {@code UNAVAILABLE} only, at most {@code maxAttempts} attempts
 * (the first included), with a randomized exponential backoff, and never past the call's deadline
 * (the deadline covers the whole call, retries and backoff included).
 *
 * @param maxAttempts attempts of a retryable call, the first included (1 disables retries)
 * @param initialBackoff the first backoff; it doubles per attempt (times a factor in [0.5, 1.5))
 * @param maxBackoff the cap of one backoff
 */
public record RetryPolicy(int maxAttempts, Duration initialBackoff, Duration maxBackoff) {
  /** Four attempts, 50 ms doubling up to 2 s: what the Python and TypeScript clients do. */
  public static final RetryPolicy DEFAULT =
      new RetryPolicy(4, Duration.ofMillis(50), Duration.ofSeconds(2));

  /** No retries at all. */
  public static final RetryPolicy NONE = new RetryPolicy(1, Duration.ZERO, Duration.ZERO);

  /** Checks the values. */
  public RetryPolicy {
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be at least 1");
    }
    if (initialBackoff == null || initialBackoff.isNegative()) {
      throw new IllegalArgumentException("initialBackoff must be zero or positive");
    }
    if (maxBackoff == null || maxBackoff.compareTo(initialBackoff) < 0) {
      throw new IllegalArgumentException("maxBackoff must be at least initialBackoff");
    }
  }

  /**
   * The randomized backoff before attempt {@code failures + 1}, in nanoseconds (public: the Kotlin
   * client waits it out with a coroutine's delay).
   */
  public long backoffNanos(int failures) {
    double base = initialBackoff.toNanos() * Math.pow(2, Math.max(0, failures - 1));
    base = Math.min(base, maxBackoff.toNanos());
    return (long) (base * (0.5 + ThreadLocalRandom.current().nextDouble()));
  }
}
