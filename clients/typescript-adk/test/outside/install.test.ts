/**
 * The drop-ins as an outside project gets them, from their guide alone
 * (clients/typescript-adk/README.md, "In your project"): the guide's commands run as written in
 * a fresh directory (tarballs packed into this test's directory instead of /tmp), the guide's
 * first block type-checked with its `tsc --strict` line and run, then a session made and read
 * through the installed drop-in against a real sidecar.
 *
 * As for the client's (clients/typescript/test/outside/): `--prefer-offline`, `typescript` and
 * `@types/node` at this package's locked versions, and `npm ci` skipped where `make` already ran it
 * on the same lock, so that nothing new is downloaded and no suite's node_modules/ is replaced.
 * Not in `npm test`; `make test-ts-outside` runs it.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import {
  guideBlocks,
  REPO_ROOT,
  serverTarget,
  stopServer,
} from "../../../typescript/test/helpers.js";
import { installSteps, runSteps, sh } from "../../../typescript/test/outside/helpers.js";

const GUIDE = "clients/typescript-adk/README.md";
const PACKAGE_DIR = join(REPO_ROOT, "clients/typescript-adk");
const work = mkdtempSync(join(tmpdir(), "ce-ts-adk-outside-"));
const packs = join(work, "packs");
const project = join(work, "my-agent");

after(() => {
  stopServer();
  rmSync(work, { recursive: true, force: true });
});

const STEPS = installSteps(GUIDE, project, packs);
const TSC = STEPS.find((s) => s.command.startsWith("npx tsc"));

before(async () => {
  mkdirSync(packs); // /tmp's stand-in
  mkdirSync(project);
  // tsc and node: the test below, once agent.ts is written
  await runSteps(STEPS, PACKAGE_DIR, (s) => s.command.includes("agent."));
  assert.deepEqual(readdirSync(packs).sort(), [
    "contextengine-adk-0.1.0.tgz",
    "contextengine-client-0.1.0.tgz",
  ]);
});

it("the drop-ins install from their tarball: a copy with dist/, the client beside it", () => {
  const modules = join(project, "node_modules");
  for (const name of ["adk", "client"]) {
    const installed = join(modules, "@contextengine", name);
    assert.ok(!statSync(installed).isSymbolicLink(), `@contextengine/${name} is a copy`);
    assert.ok(existsSync(join(installed, "dist", "index.js")), `@contextengine/${name} is built`);
    assert.ok(!existsSync(join(installed, "src")));
  }
  assert.ok(existsSync(join(modules, "@google", "adk", "package.json")));
});

it("the guide's first block type-checks strictly and runs; the drop-in reads a session", async () => {
  assert.ok(TSC, "the guide has a tsc line");
  assert.match(TSC.command, /^npx tsc --strict .*agent\.ts$/);
  const [first = ""] = guideBlocks(GUIDE, "ts");
  assert.match(first, /from "@contextengine\/adk"/);
  const target = await serverTarget();
  // The block as written, then a session through the drop-in it made (on the test's sidecar).
  const source = `${first.replace('"127.0.0.1:50151"', JSON.stringify(target))}
const made = await sessions.createSession({ appName: "trips", userId: "zoe", state: { city: "Lisbon" } });
const read = await sessions.getSession({ appName: "trips", userId: "zoe", sessionId: made.id });
console.log(runner.appName, read?.id === made.id, read?.state.city);
await sessions.close();
`;
  await writeFile(join(project, "agent.ts"), source);
  assert.ok(STEPS.some((s) => s.command === "node agent.js"));
  const { stdout } = await sh(`${TSC.command} && node agent.js`, project);
  assert.equal(stdout.trim().split("\n").at(-1), "trips true Lisbon"); // after ADK's log lines
});
