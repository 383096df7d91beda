/**
 * The package as an outside project gets it, from the guide alone (clients/typescript/README.md,
 * "In your project"): its shell commands run as written in a fresh directory (the tarball packed
 * into this test's own directory instead of /tmp), then the guide's first block and its
 * compaction block are type-checked with the guide's `tsc --strict` line and run against a real
 * sidecar (CONTEXTENGINE_TARGET, as `make test-ts-outside` sets it, or one started here).
 *
 * Two liberties, both to download nothing new: `npm install` runs with `--prefer-offline`, and
 * `typescript` and `@types/node` are installed at the versions this package's lock has (which
 * `npm ci` here has put in the npm cache). `npm ci` in the clone is skipped when
 * `make ts-deps` has already run it on this lock (running it again would remove the
 * node_modules/ other suites use).
 *
 * Not in `npm test` (test/*.test.ts): it packs and installs, which takes a while; `make test`
 * runs it (test-clients, through test-ts-outside).
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
import { join } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import { guideBlocks, PACKAGE_DIR, serverTarget, stopServer } from "../helpers.js";

const GUIDE = "clients/typescript/README.md";
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), "ce-ts-outside-"));
const packs = join(work, "packs");
const project = join(work, "my-agent");

after(() => {
  stopServer();
  rmSync(work, { recursive: true, force: true });
});

/** The guide's install block: [commands in the clone's package, commands in the project]. */
function installSteps(): [string[], string[]] {
  const block = guideBlocks(GUIDE, "sh").find((b) => b.includes("npm pack"));
  assert.ok(block, `${GUIDE} has a sh block with npm pack`);
  const lines = block.split("\n").map((l) => l.replace(/\s+#.*$/, "").trim());
  const commands = lines.filter((l) => l !== "" && !l.startsWith("#"));
  const [clone = "", ...inProject] = commands;
  assert.match(clone, /^cd clients\/typescript && /, "the first command is in the clone");
  const inClone = clone.replace(/^cd clients\/typescript && /, "").split(" && ");
  return [inClone, inProject.flatMap((c) => c.split(" && "))];
}

/** The versions of this package's lock for what the guide installs unpinned. */
function pinned(command: string): string {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8")) as {
    devDependencies: Record<string, string>;
  };
  let pinnedCommand = command;
  for (const name of ["typescript", "@types/node"]) {
    const version = manifest.devDependencies[name];
    assert.ok(version, `package.json pins ${name}`);
    pinnedCommand = pinnedCommand.replace(
      new RegExp(`(?<=\\s)${name.replace("/", "\\/")}(?=\\s|$)`),
      `${name}@${version}`,
    );
  }
  return pinnedCommand;
}

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

/** npm ci has run on this lock (make ts-deps' stamp is newer than the lock). */
function installedFromLock(): boolean {
  const stamp = join(PACKAGE_DIR, "node_modules", ".stamp-ci");
  const lock = join(PACKAGE_DIR, "package-lock.json");
  return existsSync(stamp) && statSync(stamp).mtimeMs >= statSync(lock).mtimeMs;
}

before(async () => {
  const [inClone, inProject] = installSteps();
  mkdirSync(packs); // /tmp's stand-in
  for (const command of inClone) {
    if (command === "npm ci" && installedFromLock()) {
      continue;
    }
    await sh(command.replaceAll("/tmp", packs), PACKAGE_DIR);
  }
  const tarballs = readdirSync(packs);
  assert.deepEqual(tarballs, ["contextengine-client-0.1.0.tgz"]);
  mkdirSync(project);
  for (const command of inProject) {
    await sh(pinned(command.replaceAll("/tmp", packs)), project);
  }
});

it("the installed package is the tarball's copy, with dist/ and no sources", () => {
  const installed = join(project, "node_modules", "@contextengine", "client");
  assert.ok(!statSync(installed).isSymbolicLink(), "a copy, not a link to the clone");
  assert.ok(existsSync(join(installed, "dist", "index.js")));
  assert.ok(existsSync(join(installed, "dist", "index.d.ts")));
  assert.ok(!existsSync(join(installed, "src")));
  const manifest = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as {
    type?: string;
    dependencies?: Record<string, string>;
  };
  assert.equal(manifest.type, "module");
  assert.match(manifest.dependencies?.["@contextengine/client"] ?? "", /contextengine-client/);
});

/** Writes `source` as `name`.ts in the project, then the guide's tsc and node line on it. */
async function checkAndRun(name: string, source: string): Promise<string[]> {
  const line =
    guideBlocks(GUIDE, "sh")
      .find((b) => b.includes("npx tsc"))
      ?.trim() ?? "";
  assert.match(line, /^npx tsc --strict .*agent\.ts && node agent\.js$/);
  await writeFile(join(project, `${name}.ts`), source);
  const target = await serverTarget();
  const { stdout } = await sh(line.replaceAll("agent.", `${name}.`), project, {
    CONTEXTENGINE_TARGET: target,
  });
  return stdout.trim().split("\n");
}

it("the guide's first block type-checks strictly and fetches a context", async () => {
  const first = guideBlocks(GUIDE, "ts")[0] ?? "";
  assert.match(first, /from "@contextengine\/client"/);
  const lines = await checkAndRun("agent", first);
  assert.deepEqual(lines, ["1 1n", "NOT_FOUND SESSION_NOT_FOUND"]);
});

it("the guide's compaction block type-checks strictly and summarises", async () => {
  const block = guideBlocks(GUIDE, "ts").find((b) => b.includes("expandSummary")) ?? "";
  assert.match(block, /from "@contextengine\/client"/);
  const lines = await checkAndRun("compaction", block);
  assert.equal(lines[0], "1");
  assert.equal(lines.at(-1), "1 2 3 4");
});

it("a plain-object request's fingerprint type-checks in the outside project", async () => {
  const source = [
    'import { ContextEngineClient, fingerprint } from "@contextengine/client";',
    'const target = process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";',
    "const ce = new ContextEngineClient(target);",
    'const appName = "outside-cache";',
    "await ce.updateAppConfig({ config: { appName, contextCacheConfig: {} } });",
    'const { session } = await ce.createSession({ appName, userId: "zoe" });',
    'const address = { appName, userId: "zoe", sessionId: session?.id ?? "" };',
    "await ce.appendEvent({",
    "  ...address,",
    '  event: { author: "greeter", content: { role: "model", parts: [{ text: "Hi." }] } },',
    "});",
    'const request = { ...address, agentName: "greeter" };',
    "const context = await ce.buildContext(request);",
    "const mine = fingerprint(request, context.contents, context.cacheableContentsCount);",
    "console.log(context.cacheableContentsCount, mine === context.fingerprint);",
    "ce.close();",
    "",
  ].join("\n");
  assert.deepEqual(await checkAndRun("fingerprint", source), ["1 true"]);
});
