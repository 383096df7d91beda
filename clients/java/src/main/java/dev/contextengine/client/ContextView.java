package dev.contextengine.client;

import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.ContextSince;
import io.grpc.Status;
import java.util.List;

/**
 * "Contents since" for one agent's view of a session: the view keeps the whole contents of its last
 * {@code BuildContext} answer and sends them back as {@code since} (their count and the answer's
 * {@code contents_digest}), so the sidecar sends only the contents after the ones it still
 * recognises as the first contents of the new answer (all of them after a rewind, a compaction or
 * any other change of the prefix). Every answer is reassembled: {@link #build} returns the whole
 * contents, as a full {@code BuildContext} would, with {@code base_contents_count} 0.
 *
 * <pre>{@code
 * ContextView view = client.contextView();
 * BuildContextResponse context = view.build(ref.buildContext("greeter")); // all the contents
 * ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-2", "And then?")));
 * context = view.build(ref.buildContext("greeter")); // all of them, only the new one sent
 * }</pre>
 *
 * <p>Make one view per (session, agent and view options): any request may be sent through any view
 * (the sidecar answers in full when the held contents are not the prefix of its answer), but only a
 * view that follows one agent's view saves anything. A view holds one answer's contents (the last
 * one received); a failed call leaves them as they were. Thread-safe: concurrent builds each
 * reassemble against what was held when they were sent, and the view keeps the answer that arrived
 * last. The contents are the engine's immutable messages, shared with the answers.
 */
public final class ContextView extends SinceView<Content> {
  private static final String METHOD = "ContextService/BuildContext";

  /** A view whose builds go through {@code client}. */
  public ContextView(ContextEngineClient client) {
    super(client);
  }

  /**
   * The whole contents of the last answer (empty before the first build, or after {@link #reset}).
   */
  public List<Content> contents() {
    return held();
  }

  @Override
  BuildContextRequest withSince(BuildContextRequest request, List<Content> held, String digest) {
    if (digest.isEmpty()) {
      return request.hasSince() ? request.toBuilder().clearSince().build() : request;
    }
    return request.toBuilder()
        .setSince(ContextSince.newBuilder().setContentsCount(held.size()).setContentsDigest(digest))
        .build();
  }

  @Override
  BuildContextResponse reassembled(List<Content> held, BuildContextResponse answer) {
    return reassemble(held, answer);
  }

  @Override
  List<Content> itemsOf(BuildContextResponse whole) {
    return whole.getContentsList();
  }

  @Override
  String digestOf(BuildContextResponse whole) {
    return whole.getContentsDigest();
  }

  /**
   * The whole answer to a request whose {@code since} held {@code held}: the first {@code
   * base_contents_count} of them followed by the answer's contents, with {@code
   * base_contents_count} 0 (what a full answer carries; everything else is the answer's). An answer
   * with base 0 is returned as it is. A base beyond what was held breaks the protocol: {@code
   * INTERNAL}, client side.
   */
  public static BuildContextResponse reassemble(List<Content> held, BuildContextResponse answer) {
    int base = answer.getBaseContentsCount();
    if (base == 0) {
      return answer;
    }
    if (base < 0 || base > held.size()) {
      throw ContextEngineException.clientSide(
          Status.Code.INTERNAL,
          "the sidecar answered base_contents_count "
              + base
              + " for "
              + held.size()
              + " held contents",
          METHOD,
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
