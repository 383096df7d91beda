/**
 * Test helpers: the sidecar to test against (CONTEXTENGINE_TARGET, as `make test` sets it, or a
 * `contextengine serve` started here from the repository's .venv), the fake OpenAI and
 * Anthropic APIs (also from the .venv), unique names, a TCP proxy that can cut connections, and a
 * server that accepts connections but never answers; the code blocks of a guide.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Interceptor } from "@connectrpc/connect";
import type { BuildContextResponse, ContextEngineClient } from "../src/index.js";

export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO_ROOT = resolve(PACKAGE_DIR, "..", "..");

/**
 * The fenced code blocks in `language` (```ts, ...) of a guide, in order: `page` is the guide's
 * path from the repository's root (clients/typescript/README.md, ...).
 */
export function guideBlocks(page: string, language: string): string[] {
  const text = readFileSync(join(REPO_ROOT, page), "utf8");
  const fence = new RegExp(`^\`\`\`${language}\n([\\s\\S]*?)^\`\`\``, "gm");
  return [...text.matchAll(fence)].map((m) => m[1] ?? "");
}

let started: (Served & { target: string }) | undefined;

/** host:port of a running sidecar: $CONTEXTENGINE_TARGET, or one started for this test file. */
export async function serverTarget(): Promise<string> {
  const fromEnv = process.env.CONTEXTENGINE_TARGET;
  if (fromEnv) {
    return fromEnv;
  }
  if (started === undefined) {
    const served = await startServer();
    started = { ...served, target: `127.0.0.1:${served.port}` };
  }
  return started.target;
}

/** Stops the server this file started (if any). */
export function stopServer(): void {
  if (started !== undefined) {
    stop(started);
    started = undefined;
  }
}

/** A child process of the repository's .venv Python that writes its port to a file. */
interface Served {
  port: string;
  child: ChildProcess;
  /** A temporary directory of its own (the port file is in it), removed by `stop`. */
  dir: string;
}

/**
 * Runs `.venv/bin/python args...` (`args` given the port file and the process's directory) from
 * the repository root and waits until it has written its port (`orElse`: what else the error
 * suggests when there is no .venv).
 */
async function startPython(
  what: string,
  args: (portFile: string, dir: string) => string[],
  orElse = "",
): Promise<Served> {
  const python = join(REPO_ROOT, ".venv", "bin", "python");
  if (!existsSync(python)) {
    throw new Error(`create ${python} for the ${what} (make install-dev)${orElse}`);
  }
  const dir = mkdtempSync(join(tmpdir(), "ce-ts-test-"));
  const portFile = join(dir, "port");
  const child = spawn(python, args(portFile, dir), {
    cwd: REPO_ROOT,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`the ${what} exited with ${child.exitCode}`);
    }
    const port = existsSync(portFile) ? readFileSync(portFile, "utf8").trim() : "";
    if (/^\d+$/.test(port)) {
      return { port, child, dir };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`the ${what} did not start within 30 s`);
}

function stop(served: Served): void {
  served.child.kill("SIGTERM");
  rmSync(served.dir, { recursive: true, force: true });
}

async function startServer(): Promise<Served> {
  const args = (portFile: string) => [
    "-m",
    "contextengine",
    "serve",
    "--db",
    ":memory:",
    "--listen",
    "127.0.0.1:0",
    "--port-file",
    portFile,
    "--log-level",
    "WARNING",
  ];
  return startPython("server", args, ", or set CONTEXTENGINE_TARGET");
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
  const served = await startPython("fake providers", (portFile, dir) => {
    record = join(dir, "requests.jsonl");
    return ["-m", "tests.fakes.provider_server", "--port-file", portFile, "--record", record];
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
    stop: () => stop(served),
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
