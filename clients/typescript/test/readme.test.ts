/** The README's TypeScript section runs as written (against the test server) and prints what its
 * comments say. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_DIR, REPO_ROOT, serverTarget, stopServer } from "./helpers.js";

after(() => stopServer());

function readmeBlock(): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.split("\n## TypeScript\n")[1]?.split("\n## ")[0] ?? "";
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, "README.md has a ```ts block under ## TypeScript");
  return block;
}

it("the README's TypeScript example runs and prints what it says", async () => {
  const target = await serverTarget();
  const source = readmeBlock()
    .replace('"@contextengine/client"', JSON.stringify(join(PACKAGE_DIR, "src", "index.ts")))
    .replace('"127.0.0.1:50151"', JSON.stringify(target));
  const dir = mkdtempSync(join(tmpdir(), "ce-readme-"));
  try {
    const file = join(dir, "readme.mts");
    writeFileSync(file, source);
    const tsx = join(PACKAGE_DIR, "node_modules", ".bin", "tsx");
    const { stdout } = await promisify(execFile)(tsx, [file], { timeout: 60_000 });
    assert.deepEqual(stdout.trim().split("\n"), ["1 1n", "NOT_FOUND SESSION_NOT_FOUND"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
