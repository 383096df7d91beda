/**
 * The ADK TypeScript guide's blocks (clients/typescript-adk/README.md) run as written (against
 * the test server): its objects are made, and the Runner's session service is the drop-in.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, it } from "node:test";
import { promisify } from "node:util";
import {
  guideBlocks,
  PACKAGE_DIR,
  serverTarget,
  stopServer,
} from "../../typescript/test/helpers.js";

after(() => stopServer());

/** The ```ts blocks of the ADK TypeScript guide. */
function readmeBlocks(): string[] {
  const blocks = guideBlocks("clients/typescript-adk/README.md", "ts");
  assert.equal(blocks.length, 2, "clients/typescript-adk/README.md has two ```ts blocks");
  return blocks;
}

/** Runs `code` (the guide's imports pointed at the sources) with tsx; its last output line. */
async function lastLine(code: string): Promise<string | undefined> {
  const target = await serverTarget();
  const here = join(PACKAGE_DIR, "..", "typescript-adk");
  const file = join(here, "test", `.readme-${process.pid}.ts`);
  writeFileSync(
    file,
    code
      .replaceAll('"@contextengine/adk"', '"../src/index.js"')
      .replace('"127.0.0.1:50151"', JSON.stringify(target)),
  );
  try {
    const { stdout } = await promisify(execFile)(
      join(here, "node_modules", ".bin", "tsx"),
      [file],
      {
        cwd: here,
      },
    );
    return stdout.trim().split("\n").at(-1);
  } finally {
    rmSync(file, { force: true });
  }
}

it("the guide's ADK TypeScript block runs", async () => {
  const [block = ""] = readmeBlocks();
  const last = await lastLine(`${block}
const made = await runner.sessionService.createSession({ appName: "trips", userId: "u" });
const read = await sessions.getSession({ appName: "trips", userId: "u", sessionId: made.id });
console.log(runner.sessionService === sessions, read?.id === made.id);
sessions.close();
`);
  assert.equal(last, "true true");
});

it("the guide's context tools block runs after the first one", async () => {
  const [first = "", tools = ""] = readmeBlocks();
  assert.match(tools, /ContextEngineContextTools/);
  // the second block's import goes to the top of the module
  const imports = tools.split("\n").filter((line) => line.startsWith("import "));
  const body = tools.split("\n").filter((line) => !line.startsWith("import "));
  const last = await lastLine(`${imports.join("\n")}
${first}
${body.join("\n")}
const config = await sessions.client.getAppConfig({ appName: "trips" });
const names = (await reader.canonicalTools()).map((tool) => tool.name);
console.log(config.config?.contextTools?.enabled, names.length, names.includes("context_hide"));
sessions.close();
`);
  assert.equal(last, "true 7 true");
});
