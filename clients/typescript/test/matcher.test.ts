// biome-ignore-all lint/suspicious/noTemplateCurlyInString: scenario variables are written ${name}
/** The conformance matcher decides the shared cases (clients/conformance/matcher_cases.yaml)
 * exactly as the Python reference runner does. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { MISSING, match, StepFailure, substitute } from "../conformance/match.js";
import { REPO_ROOT } from "./helpers.js";

interface Case {
  name: string;
  expected: unknown;
  actual?: unknown;
  ok: boolean;
}

const { cases } = parse(
  readFileSync(join(REPO_ROOT, "clients", "conformance", "matcher_cases.yaml"), "utf8"),
) as { cases: Case[] };

describe("conformance matcher", () => {
  for (const c of cases) {
    it(c.name, () => {
      const actual = "actual" in c ? c.actual : MISSING;
      let matched = true;
      try {
        match(c.expected, actual);
      } catch (err) {
        assert.ok(err instanceof StepFailure, String(err));
        matched = false;
      }
      assert.equal(matched, c.ok);
    });
  }

  it("substitutes variables, keeping the type of a whole-string reference", () => {
    const vars = { app: "demo", seq: "3", n: 4 };
    assert.deepEqual(substitute({ a: "${app}-x", b: "${n}", c: ["${seq}"] }, vars), {
      a: "demo-x",
      b: 4,
      c: ["3"],
    });
    assert.throws(() => substitute("${nope}", vars), /unknown variable/);
  });
});
