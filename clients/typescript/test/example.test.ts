/** The TypeScript examples run against the server and print what they say. */
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

it("examples/context_tools.ts hides a report through the engine's context tools", async () => {
  const target = await serverTarget();
  const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
  const { stdout } = await promisify(execFile)(
    tsx,
    [join(PACKAGE_DIR, "examples", "context_tools.ts"), "--target", target],
    { timeout: 60_000 },
  );
  const lines = stdout.trim().split("\n");
  const stub = lines.splice(10, 1)[0] ?? "";
  assert.match(
    stub,
    /^ {2}user {2}\| \[Hidden .*events 2 to 3\. The tides report \(40 rows; code TIDE-7\)\./,
  );
  assert.deepEqual(lines, [
    "declared to the model: fetch_report, context_status, context_pin, context_unpin, " +
      "context_hide, context_summarize, context_expand, context_search",
    "model call: 1 contents, report: no",
    "model call: 3 contents, report: yes",
    "model call: 5 contents, report: yes",
    "  context_status: the current turn starts at 5",
    "model call: 7 contents, report: yes",
    "  event 9 records: hide 2..3",
    "model call: 8 contents, report: no",
    "the next model call gets 9 contents:",
    "  user  | Fetch the tides report.",
    "  model | High tide at 06:12; the code is TIDE-7.",
    "  user  | Tidy up your context.",
    "  model | call context_status({})",
    "  user  | context_status -> ok true",
    '  model | call context_hide({"first":2,"last":3,"stub":"The tides report (40 rows; code TIDE-7)."})',
    "  user  | context_hide -> ok true",
    "  model | Done: the report is out of my context.",
  ]);
});
