/** The README's TypeScript example runs against the server and prints the expected context. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, it } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_DIR, serverTarget, stopServer } from "./helpers.js";

after(() => stopServer());

it("examples/agent_loop.ts runs an agent loop and prints the context", async () => {
  const target = await serverTarget();
  const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
  const { stdout } = await promisify(execFile)(
    tsx,
    [join(PACKAGE_DIR, "examples", "agent_loop.ts"), "--target", target],
    { timeout: 60_000 },
  );
  const lines = stdout.trim().split("\n");
  assert.match(lines[0] ?? "", /^context for calculator in session \S+: 4 contents, \d+ tokens/);
  assert.deepEqual(lines.slice(1), [
    "  user  | What is 17 * 23?",
    '  model | call multiply({"a":17,"b":23})',
    '  user  | multiply -> {"result":391}',
    "  model | 17 * 23 = 391",
  ]);
});

it("the example fails with a clear message when the server is down", async () => {
  const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
  await assert.rejects(
    promisify(execFile)(
      tsx,
      [join(PACKAGE_DIR, "examples", "agent_loop.ts"), "--target", "127.0.0.1:1"],
      {
        timeout: 60_000,
      },
    ),
    (err: { code?: number; stderr?: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr ?? "", /cannot reach the contextengine sidecar/);
      return true;
    },
  );
});
