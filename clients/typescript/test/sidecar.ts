/**
 * The one way the TypeScript tests and benchmarks (the client's, the ADK drop-ins', their bench)
 * start `contextengine serve`, following the readiness protocol of the Python
 * `contextengine.testing.sidecar.SidecarProcess`: `python -m contextengine serve --listen
 * 127.0.0.1:0 --port-file FILE` from the repository's .venv, ready once the server has written
 * its port to FILE (it does so once it serves); its output in a log file, shown when it exits or
 * does not start in time; stopped with SIGTERM by `stop()`, or when this process exits. Beside it,
 * the server shared by a test file: $CONTEXTENGINE_TARGET (as `make test` sets it) or one
 * started here.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const PYTHON = join(REPO_ROOT, ".venv", "bin", "python");

/** Seconds a process may take to write its port. */
const START_SECONDS = 60;

/** A process of the repository's .venv Python that wrote its port to a file. */
export interface PythonProcess {
  /** The port it wrote. */
  port: string;
  child: ChildProcess;
  /** A temporary directory of its own (the port file and the log are in it), removed by `stop`. */
  dir: string;
  /** Where its stdout and stderr go. */
  logFile: string;
  /** What it has written to stdout and stderr so far. */
  log(): string;
  /** SIGTERM, without waiting for it to exit; its directory removed. */
  stop(): void;
}

/**
 * Runs `.venv/bin/python -m args... --port-file FILE` (`args` given the process's directory) from
 * the repository root and waits until it has written its port: the sidecar, or a fake of the
 * repository's tests (`tests.fakes.provider_server`). `what` names it in errors; `orElse`: what
 * else the error suggests when there is no .venv.
 */
export async function startModule(
  what: string,
  args: (dir: string) => string[],
  orElse = "",
): Promise<PythonProcess> {
  if (!existsSync(PYTHON)) {
    throw new Error(`create ${PYTHON} for the ${what} (make install-dev)${orElse}`);
  }
  const dir = mkdtempSync(join(tmpdir(), "ce-ts-test-"));
  const portFile = join(dir, "port");
  const logFile = join(dir, "server.log");
  const out = openSync(logFile, "w");
  const child = spawn(PYTHON, ["-m", ...args(dir), "--port-file", portFile], {
    cwd: REPO_ROOT,
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  const log = () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  const stopOnExit = () => child.kill("SIGTERM");
  process.on("exit", stopOnExit);
  const stop = () => {
    process.off("exit", stopOnExit);
    // A sidecar's span exporter may retry for a while at shutdown: do not wait for it.
    child.kill("SIGTERM");
    child.unref();
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_SECONDS * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const status = child.exitCode ?? child.signalCode;
      const text = log();
      stop();
      throw new Error(`the ${what} exited with ${status}:\n${text}`);
    }
    const port = existsSync(portFile) ? readFileSync(portFile, "utf8").trim() : "";
    if (/^\d+$/.test(port)) {
      return { port, child, dir, logFile, log, stop };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const text = log();
  child.kill("SIGKILL");
  stop();
  throw new Error(`the ${what} did not start within ${START_SECONDS} s:\n${text}`);
}

/** How to start a sidecar. */
export interface SidecarOptions {
  /** More flags of `serve` (TLS, tokens, tracing, log format...). */
  args?: string[];
  /** `--log-level` (default WARNING: no line per RPC). */
  logLevel?: "DEBUG" | "INFO" | "WARNING" | "ERROR";
  /** The database (default `:memory:`). */
  db?: string;
  /** The host its target names (default 127.0.0.1; `localhost` for a TLS certificate's name). */
  host?: string;
}

/** A sidecar started here. */
export interface Sidecar extends PythonProcess {
  /** host:port to connect to. */
  target: string;
}

/** `contextengine serve` on a free loopback port, once it serves. */
export async function startSidecar(options: SidecarOptions = {}): Promise<Sidecar> {
  const { args = [], logLevel = "WARNING", db = ":memory:", host = "127.0.0.1" } = options;
  const serve = ["contextengine", "serve", "--db", db, "--listen", "127.0.0.1:0"];
  const started = await startModule(
    "sidecar",
    () => [...serve, "--log-level", logLevel, ...args],
    ", or set CONTEXTENGINE_TARGET",
  );
  return { ...started, target: `${host}:${started.port}` };
}

let shared: Sidecar | undefined;

/** host:port of a running sidecar: $CONTEXTENGINE_TARGET, or one started for this test file. */
export async function serverTarget(): Promise<string> {
  const fromEnv = process.env.CONTEXTENGINE_TARGET;
  if (fromEnv) {
    return fromEnv;
  }
  shared ??= await startSidecar();
  return shared.target;
}

/** Stops the server this file started (if any). */
export function stopServer(): void {
  shared?.stop();
  shared = undefined;
}
