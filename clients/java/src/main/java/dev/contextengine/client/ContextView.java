package dev.contextengine.client;

import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.ContextSince;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * "Contents since" for one agent's view of a session: the view keeps the whole contents of its
 * last {@code BuildContext} answer and sends them back as {@code since} (their count and the
 * answer's {@code contents_digest}), so the sidecar sends only the contents after the ones it
 * still recognises as the first contents of the new answer (all of them after a rewind, a
 * compaction or any other change of the prefix). Every answer is reassembled: {@link #build}
 * returns the whole contents, as a full {@code BuildContext} would, with {@code
 * base_contents_count} 0.
 *
 * <pre>{@code
 * ContextView view = client.contextView();
 * BuildContextResponse context = view.build(ref.buildContext("greeter")); // all the contents
 * ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-2", "And then?")));
 * context = view.build(ref.buildContext("greeter")); // all of them, only the new one sent
 * }</pre>
 *
 * <p>Make one view per (session, agent and view options): any request may be sent through any
 * view (the sidecar answers in full when the held contents are not the prefix of its answer), but
 * only a view that follows one agent's view saves anything. A view holds one answer's contents
 * (the last one received); a failed call leaves them as they were. Thread-safe: concurrent builds
 * each reassemble against what was held when they were sent, and the view keeps the answer that
 * arrived last. The contents are the engine's immutable messages, shared with the answers.
 */
public final class ContextView {
  /** What a view holds of its last answer: the whole contents and their digest. */
  private record Held(List<Content> contents, String digest) {}

  private static final Held NOTHING = new Held(List.of(), "");
  private static final String METHOD = "ContextService/BuildContext";

  private final ContextEngineClient client;
  private final AtomicReference<Held> held = new AtomicReference<>(NOTHING);

  /** A view whose builds go through {@code client}. */
  public ContextView(ContextEngineClient client) {
    this.client = Objects.requireNonNull(client, "client");
  }

  /**
   * {@code BuildContext} of {@code request} with {@code since} set to what the view holds (any
   * {@code since} of the request is replaced); returns the answer with the whole contents. Blocks;
   * throws {@link ContextEngineException}.
   */
  public BuildContextResponse build(BuildContextRequest request) {
    Held before = held.get();
    return keep(before, client.buildContext(withSince(request, before)));
  }

  /**
   * {@link #build} without blocking: completes with the whole answer or the client's error
   * (cancelling the future cancels the call).
   */
  public CompletableFuture<BuildContextResponse> buildAsync(BuildContextRequest request) {
    return buildAsync(client, request);
  }

  /** {@link #buildAsync(BuildContextRequest)} under another deadline (retries included). */
  public CompletableFuture<BuildContextResponse> buildAsync(BuildContextRequest request, Duration timeout) {
    return buildAsync(client.withTimeout(timeout), request);
  }

  private CompletableFuture<BuildContextResponse> buildAsync(ContextEngineClient via, BuildContextRequest request) {
    Held before = held.get();
    CompletableFuture<BuildContextResponse> call = via.buildContextAsync(withSince(request, before));
    CompletableFuture<BuildContextResponse> whole = call.thenApply(answer -> keep(before, answer));
    // Cancelling the future cancels the call, as the client's own futures do.
    whole.whenComplete(
        (answer, error) -> {
          if (whole.isCancelled()) {
            call.cancel(true);
          }
        });
    return whole;
  }

  /** The whole contents of the last answer (empty before the first build, or after {@link #reset}). */
  public List<Content> contents() {
    return held.get().contents();
  }

  /** The last answer's {@code contents_digest} ({@code ""} before the first build, or after {@link #reset}). */
  public String digest() {
    return held.get().digest();
  }

  /** Forgets the last answer: the next build asks for all the contents. */
  public void reset() {
    held.set(NOTHING);
  }

  private static BuildContextRequest withSince(BuildContextRequest request, Held held) {
    if (held.digest().isEmpty()) {
      return request.hasSince() ? request.toBuilder().clearSince().build() : request;
    }
    return request.toBuilder()
        .setSince(
            ContextSince.newBuilder()
                .setContentsCount(held.contents().size())
                .setContentsDigest(held.digest()))
        .build();
  }

  private BuildContextResponse keep(Held before, BuildContextResponse answer) {
    BuildContextResponse whole = reassemble(before.contents(), answer);
    // A sidecar without "contents since" sends no digest: nothing to send back next time.
    held.set(
        whole.getContentsDigest().isEmpty()
            ? NOTHING
            : new Held(whole.getContentsList(), whole.getContentsDigest()));
    return whole;
  }

  /**
   * The whole answer to a request whose {@code since} held {@code held}: the first {@code
   * base_contents_count} of them followed by the answer's contents, with {@code
   * base_contents_count} 0 (what a full answer carries; everything else is the answer's). An
   * answer with base 0 is returned as it is. A base beyond what was held breaks the protocol:
   * {@code INTERNAL}, client side.
   */
  public static BuildContextResponse reassemble(List<Content> held, BuildContextResponse answer) {
    int base = answer.getBaseContentsCount();
    if (base == 0) {
      return answer;
    }
    if (base < 0 || base > held.size()) {
      throw new ContextEngineException(
          Status.Code.INTERNAL,
          "the sidecar answered base_contents_count " + base + " for " + held.size() + " held contents",
          "",
          "",
          Map.of(),
          METHOD,
          true,
          null);
    }
    return answer.toBuilder()
        .clearContents()
        .addAllContents(held.subList(0, base))
        .addAllContents(answer.getContentsList())
        .setBaseContentsCount(0)
        .build();
  }
}
