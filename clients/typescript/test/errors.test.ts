/** The error model the ADK drop-ins share with the client: reasons and refused ids. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ContextEngineError, hasReason } from "../src/index.js";

describe("the shared error model", () => {
  it("an id refused before any lookup is recognised by its field", () => {
    const missing = new ContextEngineError({
      code: "INVALID_ARGUMENT",
      message: "session_id is required",
      reason: "MISSING_FIELD",
      metadata: { field: "session_id" },
    });
    const invalid = new ContextEngineError({
      code: "INVALID_ARGUMENT",
      message: "bad id",
      reason: "INVALID_ID",
      metadata: { field: "session_id" },
    });
    assert.equal(missing.isInvalidId("session_id"), true);
    assert.equal(invalid.isInvalidId("session_id"), true);
    assert.equal(invalid.isInvalidId("user_id"), false);
    const notFound = new ContextEngineError({
      code: "NOT_FOUND",
      message: "no such session",
      reason: "SESSION_NOT_FOUND",
      metadata: { session_id: "s" },
    });
    assert.equal(notFound.isInvalidId("session_id"), false);
  });

  it("hasReason narrows anything thrown", () => {
    const err: unknown = new ContextEngineError({
      code: "NOT_FOUND",
      message: "gone",
      reason: "SESSION_NOT_FOUND",
    });
    assert.equal(hasReason(err, "SESSION_NOT_FOUND"), true);
    assert.equal(hasReason(err, "SEQUENCE_MISMATCH"), false);
    assert.equal(hasReason(new Error("SESSION_NOT_FOUND"), "SESSION_NOT_FOUND"), false);
    assert.equal(hasReason(undefined, "SESSION_NOT_FOUND"), false);
  });
});
