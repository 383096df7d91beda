package dev.contextengine.client;

import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/** What the client's derived futures share: cancelling one cancels the call it came from. */
final class Futures {
  private Futures() {}

  /** A future of {@code next} applied to {@code call}'s result; cancelling it cancels the call. */
  static <A, B> CompletableFuture<B> then(
      CompletableFuture<A> call, Function<? super A, ? extends B> next) {
    CompletableFuture<B> derived = call.thenApply(next);
    derived.whenComplete(
        (value, error) -> {
          if (derived.isCancelled()) {
            call.cancel(true);
          }
        });
    return derived;
  }
}
