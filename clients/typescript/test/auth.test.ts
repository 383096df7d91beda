/**
 * The client against a real `contextengine serve` started here with mTLS and a token file (the
 * certificates made by the repository's tests/auth/certs.py): `token` and `tls` options, and the
 * UNAUTHENTICATED / PERMISSION_DENIED errors with their ErrorInfo reasons.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ContextEngineClient, ContextEngineError } from "../src/index.js";
import { REPO_ROOT } from "./helpers.js";

const WRITER = "ts-writer-token-0123";
const PYTHON = join(REPO_ROOT, ".venv", "bin", "python");

let dir: string;
let child: ChildProcess;
let target: string;
let tls: { rootCertificates: Buffer; certificateChain: Buffer; privateKey: Buffer };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "ce-ts-auth-"));
  execFileSync(PYTHON, ["-m", "tests.auth.certs", join(dir, "pki")], { cwd: REPO_ROOT });
  const pki = (name: string) => readFileSync(join(dir, "pki", name));
  tls = {
    rootCertificates: pki("ca.pem"),
    certificateChain: pki("client.pem"),
    privateKey: pki("client.key"),
  };
  const sha256 = createHash("sha256").update(WRITER).digest("hex");
  const tokens = join(dir, "tokens.json");
  writeFileSync(
    tokens,
    JSON.stringify({ tokens: [{ name: "ts", sha256, role: "write", apps: ["ts-app"] }] }),
  );
  const portFile = join(dir, "port");
  child = spawn(
    PYTHON,
    ["-m", "contextengine", "serve", "--db", ":memory:", "--listen", "127.0.0.1:0"].concat(
      ["--port-file", portFile, "--log-level", "WARNING", "--auth-tokens-file", tokens],
      ["--tls-cert-file", join(dir, "pki", "server.pem")],
      ["--tls-key-file", join(dir, "pki", "server.key")],
      ["--tls-client-ca-file", join(dir, "pki", "ca.pem")],
    ),
    { stdio: ["ignore", "ignore", openSync(join(dir, "server.log"), "w")] },
  );
  const deadline = Date.now() + 30_000;
  while (!target) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = readFileSync(join(dir, "server.log"), "utf8");
      throw new Error(`the secure server did not start (exit ${child.exitCode}):\n${log}`);
    }
    const port = existsSync(portFile) ? readFileSync(portFile, "utf8").trim() : "";
    if (/^\d+$/.test(port)) {
      target = `localhost:${port}`;
    } else {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
});

after(() => {
  child.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

async function refusal(client: ContextEngineClient, appName: string): Promise<ContextEngineError> {
  try {
    await client.createSession({ appName, userId: "u" });
  } catch (error) {
    assert.ok(error instanceof ContextEngineError, String(error));
    return error;
  } finally {
    client.close();
  }
  assert.fail("the call succeeded");
}

describe("auth and TLS", () => {
  it("calls with a token over mTLS, and is refused without or beyond it", async () => {
    const ce = new ContextEngineClient(target, { token: WRITER, tls, attempts: 1 });
    try {
      const { session } = await ce.createSession({ appName: "ts-app", userId: "u" });
      assert.ok(session?.id);
      const got = await ce.getSession({ appName: "ts-app", userId: "u", sessionId: session.id });
      assert.equal(got.session?.id, session.id);
    } finally {
      ce.close();
    }
    const denied = await refusal(
      new ContextEngineClient(target, { token: WRITER, tls, attempts: 1 }),
      "other-app",
    );
    assert.equal(denied.code, "PERMISSION_DENIED");
    assert.equal(denied.reason, "PERMISSION_DENIED");
    assert.equal(denied.metadata.app_name, "other-app");
    const anonymous = await refusal(
      new ContextEngineClient(target, { tls, attempts: 1 }),
      "ts-app",
    );
    assert.equal(anonymous.code, "UNAUTHENTICATED");
    assert.equal(anonymous.reason, "UNAUTHENTICATED");
    const unknown = await refusal(
      new ContextEngineClient(target, { token: "nope", tls, attempts: 1 }),
      "ts-app",
    );
    assert.equal(unknown.reason, "TOKEN_INVALID");
    const noClientCert = await refusal(
      new ContextEngineClient(target, {
        token: WRITER,
        tls: { rootCertificates: tls.rootCertificates },
        attempts: 1,
        timeoutMs: 5_000,
      }),
      "ts-app",
    );
    // The server ends the TLS 1.3 connection after the handshake: node reports the reset stream.
    assert.ok(["UNAVAILABLE", "CANCELLED"].includes(noClientCert.code), noClientCert.code);
  });

  it("refuses bad token and TLS options up front", () => {
    assert.throws(() => new ContextEngineClient(target, { token: "has space" }), RangeError);
    assert.throws(
      () => new ContextEngineClient(target, { tls: { privateKey: tls.privateKey } }),
      RangeError,
    );
    assert.throws(() => new ContextEngineClient("http://localhost:1", { tls: true }), RangeError);
  });
});
