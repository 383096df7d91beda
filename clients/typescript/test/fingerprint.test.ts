/**
 * The prompt-cache fingerprint against every golden vector of
 * tests/golden/fingerprints/vectors.json (written by scripts/gen_fingerprint_vectors.py from the
 * server's Python implementation): RFC 8785 canonical JSON of JSON texts and of IEEE 754 bit
 * patterns, and whole fingerprints (canonical document and SHA-256) from proto3 JSON inputs.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import {
  CanonicalizationError,
  type Content,
  type ContentInit,
  ContentSchema,
  canonicalize,
  canonicalNumber,
  FINGERPRINT_VERSION,
  fingerprint,
  fingerprintDocument,
  ModelProvider,
} from "../src/index.js";
import { REPO_ROOT } from "./helpers.js";

interface JcsCase {
  name: string;
  input: string;
  canonical: string;
}
interface NumberCase {
  bits: string;
  canonical: string;
}
interface FingerprintCase {
  name: string;
  model: string;
  system_instruction: JsonObject | null;
  tools: JsonObject[];
  tool_config: JsonObject | null;
  contents: JsonObject[];
  n: number;
  canonical: string;
  sha256: string;
}
interface Vectors {
  version: number;
  jcs: JcsCase[];
  numbers: NumberCase[];
  fingerprints: FingerprintCase[];
}

const VECTORS = JSON.parse(
  readFileSync(join(REPO_ROOT, "tests", "golden", "fingerprints", "vectors.json"), "utf8"),
) as Vectors;

/** The double whose IEEE 754 big-endian bit pattern is `bits` (16 hex digits). */
function doubleOf(bits: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${bits}`));
  return view.getFloat64(0);
}

function contentOf(json: JsonObject): Content {
  return fromJson(ContentSchema, json);
}

/** A message as a plain `create()` init object: the same fields, no `$typeName` anywhere. */
function plainOf(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(plainOf);
  }
  if (typeof value === "object" && value !== null && !(value instanceof Uint8Array)) {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== "$typeName")
        .map(([key, item]) => [key, plainOf(item)]),
    );
  }
  return value;
}

function inputOf(v: FingerprintCase) {
  return {
    model: v.model,
    systemInstruction: v.system_instruction === null ? undefined : contentOf(v.system_instruction),
    tools: v.tools,
    toolConfig: v.tool_config === null ? undefined : v.tool_config,
  };
}

describe("golden fingerprint vectors", () => {
  it("the file has every kind of vector, for this version", () => {
    assert.equal(VECTORS.version, FINGERPRINT_VERSION);
    assert.ok(VECTORS.jcs.length >= 6, `${VECTORS.jcs.length} JCS cases`);
    assert.ok(VECTORS.numbers.length >= 20, `${VECTORS.numbers.length} number cases`);
    assert.ok(VECTORS.fingerprints.length >= 8, `${VECTORS.fingerprints.length} fingerprints`);
  });

  describe("JCS", () => {
    for (const v of VECTORS.jcs) {
      it(`${v.name}`, () => {
        assert.equal(canonicalize(JSON.parse(v.input) as JsonValue), v.canonical);
        // Canonical text is a fixed point.
        assert.equal(canonicalize(JSON.parse(v.canonical) as JsonValue), v.canonical);
      });
    }
  });

  describe("numbers", () => {
    for (const v of VECTORS.numbers) {
      it(`${v.bits} -> ${v.canonical}`, () => {
        const value = doubleOf(v.bits);
        assert.equal(canonicalNumber(value), v.canonical);
        assert.equal(canonicalize([value]), `[${v.canonical}]`);
        assert.ok(Object.is(Number(v.canonical), value === 0 ? 0 : value), "round-trips");
      });
    }
  });

  describe("fingerprints", () => {
    for (const v of VECTORS.fingerprints) {
      it(`${v.name}: canonical document and digest`, () => {
        const contents = v.contents.map(contentOf);
        const input = inputOf(v);
        assert.equal(canonicalize(fingerprintDocument(input, contents, v.n)), v.canonical);
        assert.equal(fingerprint(input, contents, v.n), v.sha256);
      });

      it(`${v.name}: the same from plain objects and a BuildContext request`, () => {
        const plain = v.contents.map((c) => plainOf(contentOf(c)) as ContentInit);
        assert.ok(plain.every((c) => !("$typeName" in c)));
        const request = {
          appName: "a",
          userId: "u",
          sessionId: "s",
          model: { provider: ModelProvider.GEMINI, model: v.model },
          ...(v.system_instruction === null
            ? {}
            : { systemInstruction: plainOf(contentOf(v.system_instruction)) as ContentInit }),
          tools: v.tools,
          ...(v.tool_config === null ? {} : { toolConfig: v.tool_config }),
          invocationId: "ignored",
        };
        assert.equal(fingerprint(request, plain, v.n), v.sha256);
      });
    }
  });
});

describe("fingerprint rules", () => {
  const base = { model: "gemini-2.5-flash" };
  const said = (text: string) => create(ContentSchema, { role: "user", parts: [{ text }] });

  it("n is clamped to [0, contents.length]", () => {
    const contents = [said("a"), said("b")];
    assert.equal(fingerprint(base, contents, 5), fingerprint(base, contents, 2));
    assert.equal(fingerprint(base, contents, -1), fingerprint(base, [], 0));
    assert.notEqual(fingerprint(base, contents, 1), fingerprint(base, contents, 2));
  });

  it("reordering tools or declarations keeps the digest; a field spelling does not", () => {
    const a = { function_declarations: [{ name: "b" }, { name: "a" }] };
    const b = { google_search: {} };
    const one = fingerprint({ ...base, tools: [a, b] }, [], 0);
    assert.equal(
      fingerprint(
        { ...base, tools: [b, { function_declarations: [{ name: "a" }, { name: "b" }] }] },
        [],
        0,
      ),
      one,
    );
    assert.notEqual(fingerprint({ ...base, tools: [{ googleSearch: {} }, a] }, [], 0), one);
    // The caller's objects are not reordered.
    assert.deepEqual(a.function_declarations, [{ name: "b" }, { name: "a" }]);
  });

  it("empty parts are left out of the document", () => {
    assert.deepEqual(
      fingerprintDocument(
        { model: "", systemInstruction: {}, tools: [], toolConfig: {} },
        [said("x")],
        0,
      ),
      { v: 1 },
    );
  });

  it("what is not canonical JSON is refused", () => {
    for (const bad of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      "\ud800",
      "x\udc00",
      [undefined],
      new Date(0),
      10n,
    ]) {
      assert.throws(() => canonicalize(bad as unknown as JsonValue), CanonicalizationError);
    }
    assert.equal(canonicalize({ a: undefined, b: 1 } as unknown as JsonValue), '{"b":1}');
    assert.equal(canonicalize("\ud83d\ude00\u2028\u007f"), '"\ud83d\ude00\u2028\u007f"');
  });
});
