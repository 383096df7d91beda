/**
 * The package as an outside project gets it, from the guide alone (clients/typescript/README.md,
 * "In your project"): its shell commands run as written in a fresh directory (the tarball packed
 * into this test's own directory instead of /tmp), then the guide's first block and its
 * compaction block are type-checked with the guide's `tsc --strict` line and run against a real
 * sidecar (CONTEXTENGINE_TARGET, as `make test-ts-outside` sets it, or one started here).
 *
 * Two liberties (./helpers.ts, shared with the ADK drop-ins' test), both to download nothing new: `npm install` runs with `--prefer-offline`, and
 * `typescript` and `@types/node` are installed at the versions this package's lock has (which
 * `npm ci` here has put in the npm cache). `npm ci` in the clone is skipped when
 * `make ts-deps` has already run it on this lock (running it again would remove the
 * node_modules/ other suites use).
 *
 * Not in `npm test` (test/*.test.ts): it packs and installs, which takes a while; `make test`
 * runs it (test-clients, through test-ts-outside).
 */
import assert from "node:assert/strict";
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
import { guideBlocks, PACKAGE_DIR, serverTarget, stopServer } from "../helpers.js";
import { installSteps, runSteps, sh } from "./helpers.js";

const GUIDE = "clients/typescript/README.md";
const work = mkdtempSync(join(tmpdir(), "ce-ts-outside-"));
const packs = join(work, "packs");
const project = join(work, "my-agent");

after(() => {
  stopServer();
  rmSync(work, { recursive: true, force: true });
});

before(async () => {
  const steps = installSteps(GUIDE, project, packs);
  assert.ok(
    steps.some((s) => s.cwd === PACKAGE_DIR && s.command.startsWith("npm pack")),
    "the guide packs in the clone's clients/typescript",
  );
  mkdirSync(packs); // /tmp's stand-in
  mkdirSync(project);
  await runSteps(steps, PACKAGE_DIR);
  const tarballs = readdirSync(packs);
  assert.deepEqual(tarballs, ["contextengine-client-0.1.0.tgz"]);
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
