/**
 * `ContextView`: "contents since" for one agent's view of a session. It keeps the whole contents
 * of its last `BuildContext` answer and sends them back as `since` (their count and the answer's
 * `contentsDigest`), so the sidecar sends only the contents after the ones it still recognises
 * as the first contents of the new answer (all of them after a rewind, a compaction or any other
 * change of the prefix). The view reassembles every answer: what `build` resolves to always
 * holds the whole contents, as a full `BuildContext` would.
 */
import type { BuildContextInit, CallOptions, ContextEngineClient } from "./client.js";
import { ContextEngineError } from "./errors.js";
import type { Content } from "./gen/contextengine/v1/content_pb.js";
import type {
  BuildContextRequest,
  BuildContextResponse,
} from "./gen/contextengine/v1/context_service_pb.js";

/** A BuildContext request as a plain object (not a message): what a view spreads together. */
export type ContextViewInit = Exclude<BuildContextInit, BuildContextRequest>;

/** What a view holds of its last answer: the whole contents and their digest. */
interface Held {
  readonly contents: readonly Content[];
  readonly digest: string;
}

const NOTHING: Held = { contents: [], digest: "" };

/**
 * The whole contents of an answer to a request with `since`: the first `baseContentsCount` of
 * `held` followed by the answer's `contents`. Resolves `answer` in place: its `contents` become
 * the whole contents and its `baseContentsCount` 0 (what a full answer carries). A base beyond
 * what was held breaks the protocol: INTERNAL, client side.
 */
export function reassemble(
  held: readonly Content[],
  answer: BuildContextResponse,
): BuildContextResponse {
  const base = answer.baseContentsCount;
  if (base === 0) {
    return answer;
  }
  if (base < 0 || base > held.length) {
    throw new ContextEngineError({
      code: "INTERNAL",
      message: `the sidecar answered base_contents_count ${base} for ${held.length} held contents`,
      method: "ContextService/BuildContext",
      clientSide: true,
    });
  }
  answer.contents = held.slice(0, base).concat(answer.contents);
  answer.baseContentsCount = 0;
  return answer;
}

/**
 * One agent's view of one session, built with "contents since": see the module documentation.
 * Make one per (session, agent and view options), e.g. with
 * `client.contextView({ ...address, agentName })`; `build()` then resolves to a whole
 * `BuildContextResponse` whose `baseContentsCount` is 0, while only the new contents crossed the
 * wire. It holds one answer's contents at a time (the last one received).
 *
 * The contents of an answer are shared with the view (and the next answers): treat them as
 * read-only (`clone(ContentSchema, c)` before changing one). A request that fails leaves what is
 * held as it was. Concurrent builds are fine: each reassembles against what was held when it was
 * sent, and the view keeps the answer that arrived last.
 */
export class ContextView {
  private held: Held = NOTHING;

  /** `request`: the session, the agent and the view options every build sends. */
  constructor(
    private readonly client: ContextEngineClient,
    readonly request: ContextViewInit = {},
  ) {}

  /**
   * `BuildContext` of this view (the view's request, with `overrides` on top: e.g. the
   * invocation's `invocationId` and `userContent`, the prompt-caching fields), with `since` set
   * to what the view holds; resolves to the answer with the whole contents.
   */
  async build(
    overrides: ContextViewInit = {},
    options?: CallOptions,
  ): Promise<BuildContextResponse> {
    const held = this.held;
    const request: ContextViewInit = { ...this.request, ...overrides };
    if (held.digest) {
      request.since = { contentsCount: held.contents.length, contentsDigest: held.digest };
    } else {
      delete request.since;
    }
    const answer = reassemble(held.contents, await this.client.buildContext(request, options));
    // A sidecar without "contents since" sends no digest: nothing to send back next time.
    this.held = answer.contentsDigest
      ? { contents: answer.contents.slice(), digest: answer.contentsDigest }
      : NOTHING;
    return answer;
  }

  /** The whole contents of the last answer (empty before the first build, or after `reset`). */
  get contents(): readonly Content[] {
    return this.held.contents;
  }

  /** The last answer's `contentsDigest` (`""` before the first build, or after `reset`). */
  get digest(): string {
    return this.held.digest;
  }

  /** Forgets the last answer: the next build asks for all the contents. */
  reset(): void {
    this.held = NOTHING;
  }
}
