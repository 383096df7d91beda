/**
 * What the outside-project tests of the TypeScript client (./install.test.ts) and of the ADK
 * drop-ins (clients/typescript-adk/test/outside/) share: a guide's install block read as steps,
 * the shell that runs them, and the two liberties both take to download nothing new
 * (`--prefer-offline`; `typescript` and `@types/node` at the package's locked versions) and to
 * leave every suite's node_modules/ alone (`npm ci` skipped where `make` already ran it).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { guideBlocks, REPO_ROOT } from "../helpers.js";

const run = promisify(execFile);

/** Runs a shell command; a failure's error says what it printed (tsc writes to stdout). */
export async function sh(command: string, cwd: string, env: Record<string, string> = {}) {
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
export function installedFromLock(dir: string): boolean {
  const stamp = join(dir, "node_modules", ".stamp-ci");
  const lock = join(dir, "package-lock.json");
  return existsSync(stamp) && statSync(stamp).mtimeMs >= statSync(lock).mtimeMs;
}

/** `command` with `typescript` and `@types/node` at the versions `packageDir`'s manifest pins. */
export function pinned(command: string, packageDir: string): string {
  const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
    devDependencies: Record<string, string>;
  };
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

/** One command of a guide's install block, with the directory it runs in. */
export interface Step {
  command: string;
  cwd: string;
}

/**
 * The `sh` block of `guide` (a path from the repository's root) that packs: each command, run
 * from the clone's root until `# in your project`, then in `project`; `cd` moves through the
 * clone, and `/tmp` is `packs`.
 */
export function installSteps(guide: string, project: string, packs: string): Step[] {
  const block = guideBlocks(guide, "sh").find((b) => b.includes("npm pack"));
  assert.ok(block, `${guide} has a sh block with npm pack`);
  const out: Step[] = [];
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

/** Runs `steps` but those `skip` says (and `npm ci` where make already ran it on the lock). */
export async function runSteps(steps: Step[], packageDir: string, skip = (_: Step) => false) {
  for (const step of steps) {
    if (skip(step) || (step.command === "npm ci" && installedFromLock(step.cwd))) {
      continue;
    }
    await sh(pinned(step.command, packageDir), step.cwd);
  }
}
