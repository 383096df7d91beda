package dev.contextengine.client;

import com.google.gson.JsonObject;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.RenderFormat;
import dev.contextengine.v1.RenderRequest;
import dev.contextengine.v1.RenderedContext;
import dev.contextengine.v1.RenderedSince;
import io.grpc.Status;
import java.util.List;
import java.util.Objects;

/**
 * "Items since" for one agent's view of a session rendered for a provider (the {@link ContextView}
 * of renderings): the view keeps the whole items of its last rendering and sends them back as
 * {@code render.since} (their count and the answer's {@code items_digest}), so the sidecar sends
 * only the items after the ones it still recognises as the first items of the new rendering (all of
 * them after a rewind, a compaction, or a change of the rendering's tail such as its continuation
 * turn). Every answer is reassembled: {@link #build} returns the whole rendering, as a full {@code
 * BuildContext} would, with {@code base_items_count} 0.
 *
 * <pre>{@code
 * RenderedView view = client.renderedView(RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES);
 * JsonObject part = RequestPart.of(view.build(ref.buildContext("planner")).getRendered());
 * }</pre>
 *
 * <p>Make one view per (session, agent and view options); its format is fixed (the request's own
 * {@code render} is replaced). A view holds one answer's items (the last one received, as the
 * immutable JSON texts the sidecar sent); a failed call leaves them as they were. Thread-safe:
 * concurrent builds each reassemble against what was held when they were sent, and the view keeps
 * the answer that arrived last.
 */
public final class RenderedView extends SinceView<String> {
  private static final String METHOD = "ContextService/BuildContext";

  private final RenderFormat format;

  /** A view of renderings of {@code format} whose builds go through {@code client}. */
  public RenderedView(ContextEngineClient client, RenderFormat format) {
    super(client);
    this.format = requireFormat(format);
  }

  /** {@code format}, when it is a rendering's (IllegalArgumentException for none). */
  static RenderFormat requireFormat(RenderFormat format) {
    Objects.requireNonNull(format, "format");
    if (format == RenderFormat.RENDER_FORMAT_UNSPECIFIED || format == RenderFormat.UNRECOGNIZED) {
      throw new IllegalArgumentException("a rendering needs a format, not " + format);
    }
    return format;
  }

  /** The format every build asks for (the request's own {@code render} is replaced). */
  public RenderFormat format() {
    return format;
  }

  /**
   * The whole items of the last rendering, as JSON texts (empty before the first build, or after
   * {@link #reset}).
   */
  public List<String> items() {
    return held();
  }

  @Override
  BuildContextRequest withSince(BuildContextRequest request, List<String> held, String digest) {
    RenderRequest.Builder render = RenderRequest.newBuilder().setFormat(format);
    if (!digest.isEmpty()) {
      render.setSince(RenderedSince.newBuilder().setItemsCount(held.size()).setItemsDigest(digest));
    }
    return request.toBuilder().setRender(render).build();
  }

  /** The whole answer; UNIMPLEMENTED, client side, for an answer without this view's rendering. */
  @Override
  BuildContextResponse reassembled(List<String> held, BuildContextResponse answer) {
    rendering(answer, format);
    return reassemble(held, answer);
  }

  @Override
  List<String> itemsOf(BuildContextResponse whole) {
    return List.copyOf(whole.getRendered().getItemsList());
  }

  @Override
  String digestOf(BuildContextResponse whole) {
    return whole.getRendered().getItemsDigest();
  }

  /**
   * The whole answer to a request whose {@code render.since} held {@code held}: the first {@code
   * base_items_count} of them followed by the rendering's items, with {@code base_items_count} 0
   * (what a full answer carries; everything else is the answer's). An answer with base 0 is
   * returned as it is. A base beyond what was held breaks the protocol: {@code INTERNAL}, client
   * side.
   */
  public static BuildContextResponse reassemble(List<String> held, BuildContextResponse answer) {
    RenderedContext rendered = answer.getRendered();
    int base = rendered.getBaseItemsCount();
    if (base == 0) {
      return answer;
    }
    if (base < 0 || base > held.size()) {
      throw broken(
          "the sidecar answered base_items_count " + base + " for " + held.size() + " held items",
          null);
    }
    return answer.toBuilder()
        .setRendered(
            rendered.toBuilder()
                .clearItems()
                .addAllItems(held.subList(0, base))
                .addAllItems(rendered.getItemsList())
                .setBaseItemsCount(0))
        .build();
  }

  /** The request part of a whole answer to a request for a {@code format} rendering. */
  static JsonObject requestPart(BuildContextResponse answer, RenderFormat format) {
    RenderedContext rendered = rendering(answer, format);
    try {
      return RequestPart.of(rendered);
    } catch (IllegalArgumentException e) {
      throw broken(e.getMessage(), e);
    }
  }

  /** The answer's rendering, which must be of {@code format}: UNIMPLEMENTED otherwise. */
  private static RenderedContext rendering(BuildContextResponse answer, RenderFormat format) {
    RenderedContext rendered = answer.getRendered();
    if (rendered.getFormat() != format) {
      throw ContextEngineException.clientSide(
          Status.Code.UNIMPLEMENTED,
          "asked for a "
              + format
              + " rendering, the sidecar answered "
              + (answer.hasRendered()
                  ? rendered.getFormat()
                  : "none (a sidecar older than renderings?)"),
          METHOD,
          null);
    }
    return rendered;
  }

  private static ContextEngineException broken(String detail, Throwable cause) {
    return ContextEngineException.clientSide(Status.Code.INTERNAL, detail, METHOD, cause);
  }
}
