/**
 * The client against a real `contextengine serve` started here with mTLS and a token file (the
 * certificates made by the repository's tests/auth/certs.py): `token` and `tls` options, and the
 * UNAUTHENTICATED / PERMISSION_DENIED errors with their ErrorInfo reasons.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ContextEngineClient, ContextEngineError } from "../src/index.js";
import { PYTHON, REPO_ROOT, type Sidecar, startSidecar } from "./sidecar.js";

const WRITER = "ts-writer-token-0123";

let dir: string;
let sidecar: Sidecar;
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
  const pem = (name: string) => join(dir, "pki", name);
  sidecar = await startSidecar({
    args: ["--auth-tokens-file", tokens, "--tls-cert-file", pem("server.pem")].concat([
      "--tls-key-file",
      pem("server.key"),
      "--tls-client-ca-file",
      pem("ca.pem"),
    ]),
    host: "localhost",
  });
  target = sidecar.target;
});

after(() => {
  sidecar?.stop();
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
