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
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import {
  guideBlocks,
  REPO_ROOT,
  serverTarget,
  stopServer,
} from "../../../typescript/test/helpers.js";

const GUIDE = "clients/typescript-adk/README.md";
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), "ce-ts-adk-outside-"));
const packs = join(work, "packs");
const project = join(work, "my-agent");

after(() => {
  stopServer();
  rmSync(work, { recursive: true, force: true });
});

/** Runs a shell command; a failure's error says what it printed (tsc writes to stdout). */
async function sh(command: string, cwd: string, env: Record<string, string> = {}) {
  try {
    return await run("bash", ["-c", command], {
      cwd,
      timeout: 300_000,
      env: { ...process.env, ...env, npm_config_prefer_offline: "true", npm_config_audit: "false" },
    });
  } catch (err) {
    const { stdout = "", stderr = "" } = err as { stdout?: string; stderr?: string };
    throw new Error(`\`${command}\` in ${cwd} failed:\n${stdout}${stderr}`, { cause: err });
  }
}

/** npm ci has run on the lock of `dir` (make's stamp is newer than the lock). */
function installedFromLock(dir: string): boolean {
  const stamp = join(dir, "node_modules", ".stamp-ci");
  const lock = join(dir, "package-lock.json");
  return existsSync(stamp) && statSync(stamp).mtimeMs >= statSync(lock).mtimeMs;
}

/** `typescript` and `@types/node` at this package's locked versions. */
function pinned(command: string): string {
  const manifest = JSON.parse(
    readFileSync(join(REPO_ROOT, "clients/typescript-adk/package.json"), "utf8"),
  ) as { devDependencies: Record<string, string> };
  let out = command;
  for (const name of ["typescript", "@types/node"]) {
    const version = manifest.devDependencies[name];
    assert.ok(version, `package.json pins ${name}`);
    out = out.replace(
      new RegExp(`(?<=\\s)${name.replace("/", "\\/")}(?=\\s|$)`),
      `${name}@${version}`,
    );
  }
  return out;
}

/** The guide's shell block: each command, with the directory it runs in. */
function steps(): { command: string; cwd: string }[] {
  const block = guideBlocks(GUIDE, "sh").find((b) => b.includes("npm pack"));
  assert.ok(block, `${GUIDE} has a sh block with npm pack`);
  const out: { command: string; cwd: string }[] = [];
  let cwd = REPO_ROOT;
  let inProject = false;
  for (const raw of block.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").trim();
    if (raw.startsWith("# in your project")) {
      inProject = true;
      cwd = project;
    }
    if (line === "" || line.startsWith("#")) {
      continue;
    }
    for (const part of line.split(" && ")) {
      const cd = /^cd (\S+)$/.exec(part);
      if (cd) {
        assert.ok(!inProject, "no cd in the project's part");
        cwd = resolve(cwd, cd[1] ?? "");
      } else {
        out.push({ command: part.replaceAll("/tmp", packs), cwd });
      }
    }
  }
  return out;
}

const TSC = steps().find((s) => s.command.startsWith("npx tsc"));

before(async () => {
  mkdirSync(packs); // /tmp's stand-in
  mkdirSync(project);
  for (const { command, cwd } of steps()) {
    if (command.includes("agent.")) {
      continue; // tsc and node: the test below, once agent.ts is written
    }
    if (command === "npm ci" && installedFromLock(cwd)) {
      continue;
    }
    await sh(pinned(command), cwd);
  }
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
  assert.ok(steps().some((s) => s.command === "node agent.js"));
  const { stdout } = await sh(`${TSC.command} && node agent.js`, project);
  assert.equal(stdout.trim().split("\n").at(-1), "trips true Lisbon"); // after ADK's log lines
});
