/**
 * Test helpers: the sidecar to test against (`serverTarget`, from ./sidecar.ts, the one starter
 * of `contextengine serve`), the fake OpenAI and Anthropic APIs (from the repository's .venv),
 * unique names, a TCP proxy that can cut connections, and a server that accepts connections but
 * never answers; the code blocks of a guide.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { join, resolve } from "node:path";
import type { Interceptor } from "@connectrpc/connect";
import type { BuildContextResponse, ContextEngineClient } from "../src/index.js";
import { REPO_ROOT, startModule } from "./sidecar.js";

export { REPO_ROOT, serverTarget, stopServer } from "./sidecar.js";
export const PACKAGE_DIR = resolve(REPO_ROOT, "clients", "typescript");

/**
 * The fenced code blocks in `language` (```ts, ...) of a guide, in order: `page` is the guide's
 * path from the repository's root (clients/typescript/README.md, ...).
 */
export function guideBlocks(page: string, language: string): string[] {
  const text = readFileSync(join(REPO_ROOT, page), "utf8");
  const fence = new RegExp(`^\`\`\`${language}\n([\\s\\S]*?)^\`\`\``, "gm");
  return [...text.matchAll(fence)].map((m) => m[1] ?? "");
}

/** A request the fake providers received, and the status they answered. */
export interface ProviderRequest {
  path: string;
  status: number;
  body: Record<string, unknown>;
}

/** The fake OpenAI and Anthropic APIs (tests/fakes/provider_server.py) as a process. */
export interface FakeProviders {
  /** OpenAI's base URL (`.../v1`), for `new OpenAI({ baseURL })`. */
  openaiBaseUrl: string;
  /** Anthropic's base URL, for `new Anthropic({ baseURL })`. */
  anthropicBaseUrl: string;
  /** Every request received so far, in order (each body checked against the SDKs' types). */
  requests(): ProviderRequest[];
  stop(): void;
}

/** Starts the fake providers with the repository's .venv Python (which has the SDKs' types). */
export async function startFakeProviders(): Promise<FakeProviders> {
  let record = "";
  const served = await startModule("fake providers", (dir) => {
    record = join(dir, "requests.jsonl");
    return ["tests.fakes.provider_server", "--record", record];
  });
  const base = `http://127.0.0.1:${served.port}`;
  return {
    openaiBaseUrl: `${base}/v1`,
    anthropicBaseUrl: base,
    requests: () =>
      existsSync(record)
        ? readFileSync(record, "utf8")
            .split("\n")
            .filter((line) => line !== "")
            .map((line) => JSON.parse(line) as ProviderRequest)
        : [],
    stop: served.stop,
  };
}

/** An event saying `text` (a user's, or an agent's as the model). */
export function said(author: string, invocationId: string, text: string) {
  const role = author === "user" ? "user" : "model";
  return { author, invocationId, content: { role, parts: [{ text }] } };
}

/** An interceptor that records `measure` of each BuildContext answer received, into `sent`. */
export function recordBuildContext<T>(
  sent: T[],
  measure: (answer: BuildContextResponse) => T,
): Interceptor {
  return (next) => async (request) => {
    const response = await next(request);
    if (!response.stream && response.method.name === "BuildContext") {
      sent.push(measure(response.message as unknown as BuildContextResponse));
    }
    return response;
  };
}

/** Appends a summary (`text`, as the model's) of the session's first event. */
export async function summarizeFirstEvent(
  ce: ContextEngineClient,
  address: { appName: string; userId: string; sessionId: string },
  text: string,
): Promise<void> {
  const [first] = (await ce.listEvents({ ...address })).events;
  if (first === undefined) {
    throw new Error("the session has no event to summarize");
  }
  const range = { startTimestamp: first.timestamp, endTimestamp: first.timestamp };
  const compactedContent = { role: "model", parts: [{ text }] };
  await ce.appendEvent({
    ...address,
    event: { author: "user", actions: { compaction: { ...range, compactedContent } } },
  });
}

/** A unique app name, so tests never see each other's sessions. */
export function uniqueApp(prefix = "ts-test"): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** A free loopback port nothing listens on (it was bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A TCP server that accepts connections and never says anything (a hung sidecar). */
export async function blackHole(): Promise<{ target: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return {
    target: `127.0.0.1:${port}`,
    close: () => closeServer(server, sockets),
  };
}

/** A TCP proxy to `target` whose connections can be cut (a network failure, a restart). */
export interface Proxy {
  target: string;
  /** Destroys every open connection (both sides). */
  cut(): void;
  /** Number of connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

export async function tcpProxy(upstream: string): Promise<Proxy> {
  const [host, portText] = upstream.split(":");
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((client) => {
    accepted += 1;
    const remote = tcpConnect(Number(portText), host ?? "127.0.0.1");
    for (const socket of [client, remote]) {
      sockets.add(socket);
      socket.on("error", () => undefined);
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        remote.destroy();
      });
    }
    client.pipe(remote);
    remote.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return {
    target: `127.0.0.1:${port}`,
    cut: () => {
      for (const socket of sockets) {
        socket.destroy();
      }
    },
    connections: () => accepted,
    close: () => closeServer(server, sockets),
  };
}

function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) {
    socket.destroy();
  }
  return new Promise((r) => server.close(() => r()));
}
