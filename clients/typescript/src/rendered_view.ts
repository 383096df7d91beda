/**
 * `RenderedView`: "rendered items since" for one agent's view of a session in one provider's
 * format, as {@link ContextView} is for contents. It keeps the whole items of its last rendering
 * and sends them back as `render.since` (their count and the answer's `itemsDigest`), so the
 * sidecar sends only the items after the ones it still recognises as the first items of the new
 * rendering (all of them after a rewind, a compaction or any other change of the prefix). Every
 * build resolves to the whole request part, as a full rendering would give.
 */
import type { CallOptions, ContextEngineClient } from "./client.js";
import type { ContextViewInit } from "./context_view.js";
import type { BuildContextResponse } from "./gen/contextengine/v1/context_service_pb.js";
import {
  answerPart,
  partItems,
  type RenderableFormat,
  type RenderedItemOf,
  type RequestPartOf,
} from "./rendered.js";

/** A view's request: the session, the agent and the view options (`render` is the view's). */
export type RenderedViewInit = Omit<ContextViewInit, "render" | "since">;

/** What one build of a {@link RenderedView} resolves to. */
export interface Rendering<F extends RenderableFormat> {
  /**
   * The provider's request part, whole (the held items included): spread it into the SDK's
   * call. Its arrays are this rendering's own; its items are shared with the view and the next
   * renderings: treat them as read-only.
   */
  readonly part: RequestPartOf<F>;
  /**
   * The answer as sent: `rendered.items` are only the items after the first
   * `rendered.baseItemsCount` held ones; its other fields (`rendered.prefixFingerprint`,
   * `rendered.tokenEstimate`, `lastSequence`, ...) describe the whole context.
   */
  readonly answer: BuildContextResponse;
}

/** What a view holds of its last rendering: the whole items and their digest. */
interface Held<F extends RenderableFormat> {
  readonly items: readonly RenderedItemOf<F>[];
  readonly digest: string;
}

/**
 * One agent's view of one session rendered as `format`: see the module documentation. Make one
 * per (session, agent and view options, format), e.g. with
 * `client.renderedView({ ...address, agentName }, RenderFormat.ANTHROPIC_MESSAGES)`. It holds one
 * rendering at a time (the last one received). A request that fails leaves what is held as it
 * was; concurrent builds each build on what was held when they were sent, and the view keeps the
 * rendering that arrived last.
 */
export class RenderedView<F extends RenderableFormat> {
  private held: Held<F> = { items: [], digest: "" };

  /** `request`: the session, the agent and the view options every build sends. */
  constructor(
    private readonly client: ContextEngineClient,
    readonly format: F,
    readonly request: RenderedViewInit = {},
  ) {}

  /**
   * `BuildContext` of this view rendered as its format (the view's request with `overrides` on
   * top: e.g. the invocation's `invocationId`, `systemInstruction`), with `render.since` set to
   * what the view holds; resolves to the whole request part and the answer as sent.
   */
  async build(overrides: RenderedViewInit = {}, options?: CallOptions): Promise<Rendering<F>> {
    const held = this.held;
    const since = held.digest
      ? { itemsCount: held.items.length, itemsDigest: held.digest }
      : undefined;
    const render = since === undefined ? { format: this.format } : { format: this.format, since };
    const answer = await this.client.buildContext(
      { ...this.request, ...overrides, render },
      options,
    );
    const part = answerPart(answer, this.format, held.items);
    const digest = answer.rendered?.itemsDigest ?? "";
    // A sidecar that sends no digest: nothing to send back next time.
    this.held = { items: digest ? partItems<F>(part).slice() : [], digest };
    return { part, answer };
  }

  /** The whole items of the last rendering (empty before the first build, or after `reset`). */
  get items(): readonly RenderedItemOf<F>[] {
    return this.held.items;
  }

  /** The last rendering's `itemsDigest` (`""` before the first build, or after `reset`). */
  get digest(): string {
    return this.held.digest;
  }

  /** Forgets the last rendering: the next build asks for all the items. */
  reset(): void {
    this.held = { items: [], digest: "" };
  }
}
