/**
 * "Contents since" against a real sidecar: the raw answers to `buildContext` with `since` (a
 * digest, only the new contents, a full answer when the prefix changed) and `ContextView`, whose
 * reassembled answers must equal a fresh full build through appends, a rewind and a compaction.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { BuildContextResponseSchema } from "../src/gen/contextengine/v1/context_service_pb.js";
import {
  type BuildContextResponse,
  ContentSchema,
  ContextEngineClient,
  ContextEngineError,
  reassemble,
} from "../src/index.js";
import {
  recordBuildContext,
  said,
  serverTarget,
  stopServer,
  summarizeFirstEvent,
  uniqueApp,
} from "./helpers.js";

let ce: ContextEngineClient;
/** A client that records what each BuildContext answer carried on the wire. */
let spied: ContextEngineClient;
/** [base_contents_count, number of contents sent] of each BuildContext answer `spied` received. */
const sent: Array<[number, number]> = [];

const record = recordBuildContext(sent, (answer) => [
  answer.baseContentsCount,
  answer.contents.length,
]);

before(async () => {
  const target = await serverTarget();
  ce = new ContextEngineClient(target, { timeoutMs: 5_000 });
  spied = new ContextEngineClient(target, { timeoutMs: 5_000, interceptors: [record] });
});

after(() => {
  ce.close();
  spied.close();
  stopServer();
});

async function newSession() {
  const { session } = await ce.createSession({ appName: uniqueApp(), userId: "u" });
  assert.ok(session);
  const address = { appName: session.appName, userId: "u", sessionId: session.id };
  await ce.appendEvents({
    ...address,
    events: [said("user", "i1", "Which museums open on Monday?"), said("guide", "i1", "MAAT.")],
  });
  return address;
}

/** The contents as bytes, to compare two answers exactly. */
function wire(response: BuildContextResponse): string[] {
  return response.contents.map((c) => Buffer.from(toBinary(ContentSchema, c)).toString("hex"));
}

/** A view's answer equals a fresh full build: contents, digest and what describes them. */
async function assertSameAsFull(view: BuildContextResponse, address: object): Promise<void> {
  const full = await ce.buildContext({ ...address, agentName: "guide" });
  assert.equal(full.baseContentsCount, 0);
  assert.deepEqual(wire(view), wire(full));
  assert.equal(view.baseContentsCount, 0);
  assert.equal(view.contentsDigest, full.contentsDigest);
  assert.equal(view.lastSequence, full.lastSequence);
  assert.deepEqual(view.tokenEstimate, full.tokenEstimate);
}

describe("buildContext with since", () => {
  it("a full answer has a digest; the same contents again are sent as none", async () => {
    const address = await newSession();
    const full = await ce.buildContext({ ...address, agentName: "guide" });
    assert.equal(full.contents.length, 2);
    assert.equal(full.baseContentsCount, 0);
    assert.notEqual(full.contentsDigest, "");
    const since = { contentsCount: 2, contentsDigest: full.contentsDigest };
    const same = await ce.buildContext({ ...address, agentName: "guide", since });
    assert.equal(same.baseContentsCount, 2);
    assert.equal(same.contents.length, 0);
    assert.equal(same.contentsDigest, full.contentsDigest);
    assert.equal(same.lastSequence, full.lastSequence);
  });

  it("after an append only the new contents are sent", async () => {
    const address = await newSession();
    const first = await ce.buildContext({ ...address, agentName: "guide" });
    await ce.appendEvent({ ...address, event: said("user", "i2", "And on Tuesday?") });
    const since = { contentsCount: 2, contentsDigest: first.contentsDigest };
    const next = await ce.buildContext({ ...address, agentName: "guide", since });
    assert.equal(next.baseContentsCount, 2);
    assert.deepEqual(
      next.contents.map((c) => c.parts[0]?.text),
      ["And on Tuesday?"],
    );
    assert.notEqual(next.contentsDigest, first.contentsDigest);
    await assertSameAsFull(reassemble(first.contents, next), address);
  });

  it("a digest the sidecar does not know gets a full answer", async () => {
    const address = await newSession();
    const since = { contentsCount: 2, contentsDigest: "not-a-digest" };
    const answer = await ce.buildContext({ ...address, agentName: "guide", since });
    assert.equal(answer.baseContentsCount, 0);
    assert.equal(answer.contents.length, 2);
  });

  it("a negative count is the server's INVALID_ARGUMENT naming the field", async () => {
    const address = await newSession();
    const since = { contentsCount: -1, contentsDigest: "x" };
    await assert.rejects(ce.buildContext({ ...address, agentName: "guide", since }), (err) => {
      assert.ok(err instanceof ContextEngineError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.clientSide, false);
      assert.match(err.metadata.field ?? "", /since\.contents_count/);
      return true;
    });
  });
});

describe("ContextView", () => {
  it("keeps the last answer and reassembles through appends, a rewind and a compaction", async () => {
    const address = await newSession();
    const view = spied.contextView({ ...address, agentName: "guide" });
    assert.deepEqual(view.contents, []);
    sent.length = 0;

    const first = await view.build();
    assert.equal(first.contents.length, 2);
    assert.equal(view.digest, first.contentsDigest);
    await assertSameAsFull(first, address);

    const unchanged = await view.build();
    assert.equal(unchanged.contents.length, 2);
    await assertSameAsFull(unchanged, address);

    await ce.appendEvents({
      ...address,
      events: [said("user", "i2", "And on Tuesday?"), said("guide", "i2", "Both are open.")],
    });
    const grown = await view.build({ invocationId: "i2" });
    assert.equal(grown.contents.length, 4);
    await assertSameAsFull(grown, address);

    // A rewind drops the last turn: the held contents are no longer the prefix.
    await ce.rewindSession({ ...address, rewindBeforeInvocationId: "i2" });
    const rewound = await view.build();
    assert.equal(rewound.contents.length, 2);
    await assertSameAsFull(rewound, address);

    // A summary of the first turn replaces its contents.
    await summarizeFirstEvent(ce, address, "Asked about Monday.");
    const compacted = await view.build();
    await assertSameAsFull(compacted, address);
    assert.ok(compacted.contents.some((c) => c.parts[0]?.text === "Asked about Monday."));

    view.reset();
    assert.equal(view.digest, "");
    await assertSameAsFull(await view.build(), address);
    // What crossed the wire: everything, nothing, the new turn, then everything after the rewind,
    // the compaction and the reset.
    assert.deepEqual(sent, [
      [0, 2],
      [2, 0],
      [2, 2],
      [0, 2],
      [0, compacted.contents.length],
      [0, compacted.contents.length],
    ]);
  });

  it("a failed build keeps what the view held; the answer's array is the caller's", async () => {
    const address = await newSession();
    const view = ce.contextView({ ...address, agentName: "guide" });
    const first = await view.build();
    first.contents.push(create(ContentSchema, { role: "user" }));
    await assert.rejects(view.build({ sessionId: "" }), { code: "INVALID_ARGUMENT" });
    assert.equal(view.contents.length, 2);
    await ce.appendEvent({ ...address, event: said("user", "i2", "And on Tuesday?") });
    await assertSameAsFull(await view.build(), address);
  });

  it("reassemble refuses a base beyond the held contents", () => {
    const answer = create(BuildContextResponseSchema, { baseContentsCount: 3 });
    assert.throws(() => reassemble([create(ContentSchema, {})], answer), {
      code: "INTERNAL",
      clientSide: true,
    });
  });
});
