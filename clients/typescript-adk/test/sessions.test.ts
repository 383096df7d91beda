/**
 * ContextEngineSessionService against a real sidecar: ADK TypeScript's own session-service
 * expectations (each also run on ADK's InMemorySessionService where the two agree), the
 * differences the module documents, and the failure modes (already exists, stale session,
 * conflicting writers, deleted sessions, sidecar down).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { ContextEngineError } from "@contextengine/client";
import {
  type BaseSessionService,
  createEvent,
  type Event,
  InMemorySessionService,
} from "@google/adk";
import { closedPort, serverTarget, stopServer, uniqueApp } from "../../typescript/test/helpers.js";
import {
  ContextEngineSessionService,
  lastSequenceOf,
  SessionAlreadyExistsError,
  SessionNotFoundError,
  StaleSessionError,
} from "../src/index.js";

const service = new ContextEngineSessionService({ target: await serverTarget() });

after(() => {
  service.close();
  stopServer();
});

let clock = Date.now();
function event(init: Parameters<typeof createEvent>[0] = {}): Event {
  clock += 1000;
  return createEvent({
    invocationId: "inv-1",
    author: "user",
    content: { role: "user", parts: [{ text: "hi" }] },
    timestamp: clock,
    ...init,
  });
}

/** Both services, for the expectations ADK's in-memory service also meets. */
function both(): [string, BaseSessionService][] {
  return [
    ["engine", service],
    ["in-memory", new InMemorySessionService()],
  ];
}

describe("createSession / getSession", () => {
  for (const [name, svc] of both()) {
    it(`${name}: create with an id, get it back`, async () => {
      const app = uniqueApp();
      const created = await svc.createSession({
        appName: app,
        userId: "u",
        sessionId: "s1",
        state: { k: 1, nested: { a: [1, 2.5, "x"] } },
      });
      assert.equal(created.id, "s1");
      assert.deepEqual(created.events, []);
      assert.equal(created.state.k, 1);
      const got = await svc.getSession({ appName: app, userId: "u", sessionId: "s1" });
      assert.ok(got);
      assert.equal(got.id, "s1");
      assert.equal(got.appName, app);
      assert.equal(got.userId, "u");
      assert.deepEqual({ ...got.state }, { k: 1, nested: { a: [1, 2.5, "x"] } });
      assert.ok(Math.abs(got.lastUpdateTime - Date.now()) < 60_000, "lastUpdateTime in ms");
    });

    it(`${name}: create without an id makes one; a missing session is undefined`, async () => {
      const app = uniqueApp();
      const created = await svc.createSession({ appName: app, userId: "u" });
      assert.match(created.id, /^[0-9a-f-]{36}$/);
      const missing = await svc.getSession({ appName: app, userId: "u", sessionId: "nope" });
      assert.equal(missing, undefined);
      const otherUser = await svc.getSession({ appName: app, userId: "v", sessionId: created.id });
      assert.equal(otherUser, undefined);
    });
  }

  it("an id in use throws SessionAlreadyExistsError (ADK's in-memory service replaces)", async () => {
    const app = uniqueApp();
    await service.createSession({ appName: app, userId: "u", sessionId: "dup" });
    await assert.rejects(
      service.createSession({ appName: app, userId: "u", sessionId: "dup" }),
      (err: unknown) =>
        err instanceof SessionAlreadyExistsError &&
        err.cause instanceof ContextEngineError &&
        err.cause.code === "ALREADY_EXISTS",
    );
  });

  it("state scopes: app: and user: keys are shared, temp: keys dropped", async () => {
    const app = uniqueApp();
    await service.createSession({
      appName: app,
      userId: "u",
      sessionId: "a",
      state: { "app:model": "m", "user:name": "Ada", "temp:scratch": 1, own: true },
    });
    const other = await service.createSession({ appName: app, userId: "u", sessionId: "b" });
    assert.deepEqual({ ...other.state }, { "app:model": "m", "user:name": "Ada" });
    const stranger = await service.createSession({ appName: app, userId: "w", sessionId: "c" });
    assert.deepEqual({ ...stranger.state }, { "app:model": "m" });
    const a = await service.getSession({ appName: app, userId: "u", sessionId: "a" });
    assert.deepEqual({ ...a?.state }, { "app:model": "m", "user:name": "Ada", own: true });
    assert.deepEqual(await service.getUserState({ appName: app, userId: "u" }), { name: "Ada" });
  });
});

describe("appendEvent", () => {
  for (const [name, svc] of both()) {
    it(`${name}: the delta is applied, temp: keys trimmed, lastUpdateTime set`, async () => {
      const app = uniqueApp();
      const session = await svc.createSession({ appName: app, userId: "u", sessionId: "s" });
      const e = event({ actions: { stateDelta: { k: 2, "temp:t": "x", "user:u": "y" } } });
      const appended = await svc.appendEvent({ session, event: e });
      assert.equal(appended.id, e.id);
      assert.deepEqual({ ...appended.actions.stateDelta }, { k: 2, "user:u": "y" });
      assert.equal(session.events.length, 1);
      assert.equal(session.state.k, 2);
      assert.equal(session.state["temp:t"], undefined);
      assert.equal(session.lastUpdateTime, e.timestamp);
      const got = await svc.getSession({ appName: app, userId: "u", sessionId: "s" });
      assert.equal(got?.state.k, 2);
      assert.equal(got?.state["user:u"], "y");
      assert.equal(got?.events.length, 1);
      assert.equal(got?.events[0]?.id, e.id);
      assert.equal(got?.events[0]?.timestamp, e.timestamp);
      assert.deepEqual({ ...got?.events[0]?.actions.stateDelta }, { k: 2, "user:u": "y" });
    });

    it(`${name}: a partial event is returned untouched and not stored`, async () => {
      const app = uniqueApp();
      const session = await svc.createSession({ appName: app, userId: "u", sessionId: "s" });
      const e = event({ partial: true, actions: { stateDelta: { k: 1 } } });
      assert.equal(await svc.appendEvent({ session, event: e }), e);
      assert.equal(session.events.length, 0);
      const got = await svc.getSession({ appName: app, userId: "u", sessionId: "s" });
      assert.equal(got?.events.length, 0);
    });

    it(`${name}: the same event again replaces it by id (no second copy)`, async () => {
      const app = uniqueApp();
      const session = await svc.createSession({ appName: app, userId: "u", sessionId: "s" });
      const e = event();
      await svc.appendEvent({ session, event: e });
      await svc.appendEvent({ session, event: e });
      assert.equal(session.events.length, 1);
      const got = await svc.getSession({ appName: app, userId: "u", sessionId: "s" });
      assert.equal(got?.events.length, 1);
    });
  }

  it("a missing or deleted session throws SessionNotFoundError", async () => {
    const app = uniqueApp();
    const session = await service.createSession({ appName: app, userId: "u", sessionId: "s" });
    await service.deleteSession({ appName: app, userId: "u", sessionId: "s" });
    await assert.rejects(service.appendEvent({ session, event: event() }), SessionNotFoundError);
    const ghost = { ...session, id: "never-made", events: [] };
    await assert.rejects(
      service.appendEvent({ session: ghost, event: event() }),
      SessionNotFoundError,
    );
  });

  it("conflicting writers: the stale session object throws StaleSessionError", async () => {
    const app = uniqueApp();
    await service.createSession({ appName: app, userId: "u", sessionId: "s" });
    const mine = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    const theirs = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    assert.ok(mine && theirs);
    await service.appendEvent({ session: theirs, event: event() });
    await assert.rejects(service.appendEvent({ session: mine, event: event() }), StaleSessionError);
    const fresh = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    assert.ok(fresh);
    assert.equal(lastSequenceOf(fresh), lastSequenceOf(theirs));
    await service.appendEvent({ session: fresh, event: event() });
    assert.equal(fresh.events.length, 2);
  });
});

describe("getSession config", () => {
  for (const [name, svc] of both()) {
    it(`${name}: numRecentEvents (0 is no limit) and afterTimestamp (ms, >=)`, async () => {
      const app = uniqueApp();
      const session = await svc.createSession({ appName: app, userId: "u", sessionId: "s" });
      const events = [event(), event(), event(), event()];
      for (const e of events) {
        await svc.appendEvent({ session, event: e });
      }
      const key = { appName: app, userId: "u", sessionId: "s" };
      const ids = async (config: { numRecentEvents?: number; afterTimestamp?: number }) =>
        (await svc.getSession({ ...key, config }))?.events.map((e) => e.id);
      const all = events.map((e) => e.id);
      assert.deepEqual(await ids({ numRecentEvents: 2 }), all.slice(2));
      assert.deepEqual(await ids({ numRecentEvents: 0 }), all);
      assert.deepEqual(await ids({ numRecentEvents: 10 }), all);
      const third = events[2]?.timestamp ?? 0;
      assert.deepEqual(await ids({ afterTimestamp: third }), all.slice(2));
      assert.deepEqual(await ids({ afterTimestamp: third + 1 }), all.slice(3));
      assert.deepEqual(await ids({ afterTimestamp: 0 }), all);
    });
  }
});

describe("listSessions / deleteSession", () => {
  for (const [name, svc] of both()) {
    it(`${name}: pages, order, totals`, async () => {
      const app = uniqueApp();
      const made: string[] = [];
      for (const id of ["c", "a", "e", "b", "d"]) {
        const session = await svc.createSession({ appName: app, userId: "u", sessionId: id });
        await svc.appendEvent({ session, event: event() });
        made.push(id);
      }
      const all = await svc.listSessions({ appName: app, userId: "u", order: "asc" });
      assert.deepEqual(
        all.sessions.map((s) => s.id),
        made,
      );
      assert.deepEqual(
        {
          page: all.page,
          limit: all.limit,
          totalItems: all.totalItems,
          totalPages: all.totalPages,
        },
        { page: 1, limit: 5, totalItems: 5, totalPages: 1 },
      );
      assert.ok(all.sessions.every((s) => s.events.length === 0));
      const desc = await svc.listSessions({ appName: app, userId: "u", order: "desc" });
      assert.deepEqual(
        desc.sessions.map((s) => s.id),
        [...made].reverse(),
      );
      const page2 = await svc.listSessions({
        appName: app,
        userId: "u",
        order: "asc",
        limit: 2,
        page: 2,
      });
      assert.deepEqual(
        page2.sessions.map((s) => s.id),
        made.slice(2, 4),
      );
      assert.deepEqual([page2.page, page2.limit, page2.totalItems, page2.totalPages], [2, 2, 5, 3]);
      const byOffset = await svc.listSessions({ appName: app, order: "asc", limit: 2, offset: 4 });
      assert.deepEqual(
        byOffset.sessions.map((s) => s.id),
        made.slice(4),
      );
      assert.equal(byOffset.page, 3);
      const none = await svc.listSessions({ appName: app, userId: "nobody" });
      assert.deepEqual(
        [none.sessions.length, none.page, none.limit, none.totalItems, none.totalPages],
        [0, 1, 0, 0, 0],
      );
    });

    it(`${name}: delete, and deleting a missing session is no error`, async () => {
      const app = uniqueApp();
      await svc.createSession({ appName: app, userId: "u", sessionId: "s" });
      await svc.deleteSession({ appName: app, userId: "u", sessionId: "s" });
      assert.equal(await svc.getSession({ appName: app, userId: "u", sessionId: "s" }), undefined);
      await svc.deleteSession({ appName: app, userId: "u", sessionId: "s" });
      const listed = await svc.listSessions({ appName: app });
      assert.equal(listed.totalItems, 0);
    });
  }

  it("every user's sessions without userId; merged state in the list", async () => {
    const app = uniqueApp();
    await service.createSession({
      appName: app,
      userId: "u",
      sessionId: "x",
      state: { "app:a": 1 },
    });
    await service.createSession({ appName: app, userId: "v", sessionId: "y", state: { own: 2 } });
    const listed = await service.listSessions({ appName: app });
    assert.deepEqual(listed.sessions.map((s) => [s.userId, s.id]).sort(), [
      ["u", "x"],
      ["v", "y"],
    ]);
    const y = listed.sessions.find((s) => s.id === "y");
    assert.deepEqual({ ...y?.state }, { "app:a": 1, own: 2 });
  });
});

describe("reading a session again (the event cache)", () => {
  it("after appends, a rewind, and a delete and re-create, a re-read equals a fresh read", async () => {
    const app = uniqueApp();
    const key = { appName: app, userId: "u", sessionId: "s" };
    const fresh = async () => {
      const other = new ContextEngineSessionService({ connection: service.connection });
      return JSON.parse(JSON.stringify(await other.getSession(key)));
    };
    const again = async () => JSON.parse(JSON.stringify(await service.getSession(key)));
    let session = await service.createSession(key);
    await service.appendEvent({ session, event: event({ invocationId: "inv-a" }) });
    assert.equal((await service.getSession(key))?.events.length, 1);
    session = (await service.getSession(key)) ?? session;
    await service.appendEvent({ session, event: event({ invocationId: "inv-b" }) });
    await service.appendEvent({ session, event: event({ invocationId: "inv-b" }) });
    assert.deepEqual(await again(), await fresh());
    await service.client.rewindSession({ ...key, rewindBeforeInvocationId: "inv-b" });
    assert.deepEqual(await again(), await fresh());
    const read = await service.getSession(key);
    assert.ok(read);
    read.events[0]?.content?.parts?.push({ text: "changed by the caller" });
    assert.deepEqual(await again(), await fresh(), "a caller's change leaks into the next read");
    await service.client.deleteSession(key);
    const remade = await service.createSession(key);
    await service.appendEvent({ session: remade, event: event({ invocationId: "inv-c" }) });
    const after = await again();
    assert.deepEqual(after, await fresh());
    assert.deepEqual(
      after.events.map((e: Event) => e.invocationId),
      ["inv-c"],
    );
  });
});

describe("the sidecar down", () => {
  it("every call fails with the client's UNAVAILABLE ContextEngineError", async () => {
    const down = new ContextEngineSessionService({
      target: `127.0.0.1:${await closedPort()}`,
      clientOptions: { timeoutMs: 2000, attempts: 2 },
    });
    try {
      const unavailable = (err: unknown) =>
        err instanceof ContextEngineError && err.code === "UNAVAILABLE";
      await assert.rejects(down.createSession({ appName: "a", userId: "u" }), unavailable);
      await assert.rejects(
        down.getSession({ appName: "a", userId: "u", sessionId: "s" }),
        unavailable,
      );
      await assert.rejects(down.listSessions({ appName: "a" }), unavailable);
      const session = {
        id: "s",
        appName: "a",
        userId: "u",
        state: {},
        events: [],
        lastUpdateTime: 0,
      };
      await assert.rejects(down.appendEvent({ session, event: event() }), unavailable);
    } finally {
      down.close();
    }
  });
});
