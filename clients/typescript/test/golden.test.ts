/**
 * The wire contract: every golden event (tests/golden/events, written by the Python generator)
 * parses from its binary and its JSON encoding to equal messages, and re-encodes, both ways, to
 * messages equal to the original (messages are compared, not bytes: serialization is not
 * canonical across languages).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { equals, fromBinary, fromJson, fromJsonString, toBinary, toJson } from "@bufbuild/protobuf";
import { EventSchema } from "../src/index.js";
import { REPO_ROOT } from "./helpers.js";

const GOLDEN = join(REPO_ROOT, "tests", "golden", "events");
const NAMES = readdirSync(GOLDEN)
  .filter((f) => f.endsWith(".json"))
  .map((f) => f.slice(0, -".json".length))
  .sort();

function load(name: string) {
  const json = readFileSync(join(GOLDEN, `${name}.json`), "utf8");
  const binary = new Uint8Array(readFileSync(join(GOLDEN, `${name}.binpb`)));
  return {
    fromJson: fromJsonString(EventSchema, json),
    fromBinary: fromBinary(EventSchema, binary),
  };
}

describe("golden events", () => {
  it("there are golden vectors, each with both encodings", () => {
    assert.ok(NAMES.length >= 12, `${NAMES.length} vectors`);
    const binaries = readdirSync(GOLDEN)
      .filter((f) => f.endsWith(".binpb"))
      .map((f) => f.slice(0, -".binpb".length))
      .sort();
    assert.deepEqual(binaries, NAMES);
  });

  for (const name of NAMES) {
    it(`${name}: binary and JSON decode to equal messages`, () => {
      const { fromJson: a, fromBinary: b } = load(name);
      assert.ok(equals(EventSchema, a, b), "binary and JSON differ");
      assert.ok(a.id !== "" || a.author !== "", "the vector is not empty");
    });

    it(`${name}: binary -> JSON -> message is the same message`, () => {
      const { fromBinary: original } = load(name);
      const json = toJson(EventSchema, original, { useProtoFieldName: true });
      const back = fromJson(EventSchema, JSON.parse(JSON.stringify(json)));
      assert.ok(equals(EventSchema, original, back));
    });

    it(`${name}: JSON -> binary -> message is the same message`, () => {
      const { fromJson: original } = load(name);
      const back = fromBinary(EventSchema, toBinary(EventSchema, original));
      assert.ok(equals(EventSchema, original, back));
    });
  }
});
