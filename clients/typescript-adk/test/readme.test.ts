/**
 * The README's "Using it from ADK TypeScript" block runs as written (against the test server):
 * its objects are made, and the Runner's session service is the drop-in.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, it } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_DIR, REPO_ROOT, serverTarget, stopServer } from "../../typescript/test/helpers.js";

after(() => stopServer());

function readmeBlock(): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.split("\n## Using it from ADK TypeScript\n")[1]?.split("\n## ")[0] ?? "";
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'README.md has a ```ts block under "## Using it from ADK TypeScript"');
  return block;
}

it("the README's ADK TypeScript block runs", async () => {
  const target = await serverTarget();
  const here = join(PACKAGE_DIR, "..", "typescript-adk");
  const code = readmeBlock()
    .replace('"@contextengine/adk"', '"../src/index.js"')
    .replace('"127.0.0.1:50151"', JSON.stringify(target));
  const file = join(here, "test", `.readme-${process.pid}.ts`);
  writeFileSync(
    file,
    `${code}
const made = await runner.sessionService.createSession({ appName: "trips", userId: "u" });
const read = await sessions.getSession({ appName: "trips", userId: "u", sessionId: made.id });
console.log(runner.sessionService === sessions, read?.id === made.id);
sessions.close();
`,
  );
  try {
    const { stdout } = await promisify(execFile)(
      join(here, "node_modules", ".bin", "tsx"),
      [file],
      {
        cwd: here,
      },
    );
    assert.equal(stdout.trim().split("\n").at(-1), "true true");
  } finally {
    rmSync(file, { force: true });
  }
});
