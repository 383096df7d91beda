package dev.contextengine.client;

import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What {@link ContextView} ("contents since") and {@link RenderedView} ("items since") share: the
 * view holds the whole items of its last answer (contents, or rendered items) and their digest,
 * sends them back with every request as its "since", and reassembles every answer against what it
 * held when the request was sent, so that {@link #build} returns the whole answer while only the
 * items after the held ones cross the wire.
 *
 * <p>A failed call leaves what is held as it was. Thread-safe: concurrent builds each reassemble
 * against what was held when they were sent, and the view keeps the answer that arrived last.
 *
 * @param <T> an item: a {@code Content}, or a rendered item's JSON text
 */
public abstract class SinceView<T> {
  private record Held<T>(List<T> items, String digest) {}

  private final ContextEngineClient client;
  private final Held<T> nothing = new Held<>(List.of(), "");
  private final AtomicReference<Held<T>> held = new AtomicReference<>(nothing);

  SinceView(ContextEngineClient client) {
    this.client = Objects.requireNonNull(client, "client");
  }

  /** {@code request} asking for what follows {@code held} (none held: {@code digest} is ""). */
  abstract BuildContextRequest withSince(BuildContextRequest request, List<T> held, String digest);

  /** The whole answer to a request sent with {@code held}. */
  abstract BuildContextResponse reassembled(List<T> held, BuildContextResponse answer);

  /** A whole answer's items. */
  abstract List<T> itemsOf(BuildContextResponse whole);

  /** A whole answer's digest ({@code ""}: a sidecar that sends none, so nothing to hold). */
  abstract String digestOf(BuildContextResponse whole);

  /**
   * {@code BuildContext} of {@code request} with its "since" set to what the view holds (any of the
   * request's own is replaced); returns the whole answer. Blocks; throws {@link
   * ContextEngineException}.
   */
  public final BuildContextResponse build(BuildContextRequest request) {
    Held<T> before = held.get();
    return keep(before, client.buildContext(withSince(request, before.items(), before.digest())));
  }

  /**
   * {@link #build} without blocking: completes with the whole answer or the client's error
   * (cancelling the future cancels the call).
   */
  public final CompletableFuture<BuildContextResponse> buildAsync(BuildContextRequest request) {
    return buildAsync(client, request);
  }

  /** {@link #buildAsync(BuildContextRequest)} under another deadline (retries included). */
  public final CompletableFuture<BuildContextResponse> buildAsync(
      BuildContextRequest request, Duration timeout) {
    return buildAsync(client.withTimeout(timeout), request);
  }

  private CompletableFuture<BuildContextResponse> buildAsync(
      ContextEngineClient via, BuildContextRequest request) {
    Held<T> before = held.get();
    return Futures.then(
        via.buildContextAsync(withSince(request, before.items(), before.digest())),
        answer -> keep(before, answer));
  }

  /** The last answer's digest ({@code ""} before the first build, or after {@link #reset}). */
  public final String digest() {
    return held.get().digest();
  }

  /** Forgets the last answer: the next build asks for all of it. */
  public final void reset() {
    held.set(nothing);
  }

  /** The whole items of the last answer (empty before the first build, or after {@link #reset}). */
  final List<T> held() {
    return held.get().items();
  }

  private BuildContextResponse keep(Held<T> before, BuildContextResponse answer) {
    BuildContextResponse whole = reassembled(before.items(), answer);
    String digest = digestOf(whole);
    held.set(digest.isEmpty() ? nothing : new Held<>(itemsOf(whole), digest));
    return whole;
  }
}
