/**
 * The prompt-cache fingerprint, computed in the client: the same lowercase hex SHA-256 the sidecar
 * returns in `BuildContextResponse.fingerprint` and `CacheDecision.cache_metadata.fingerprint`
 * (docs/design/prompt-cache.md, section 1, is the normative text; every vector of
 * tests/golden/fingerprints/vectors.json is checked by test/fingerprint.test.ts).
 *
 * The digest is taken over the UTF-8 bytes of the RFC 8785 (JCS) canonical JSON of
 *
 *     {"v": 1, "model": ..., "system_instruction": ..., "tools": [...], "tool_config": ...,
 *      "contents": [<the first n contents>]}
 *
 * where the system instruction and the contents are proto3 JSON with the original (snake_case)
 * field names (`toJson(ContentSchema, c, {useProtoFieldName: true})`), tools and tool config are
 * the JSON objects as given (tools normalised: `function_declarations` sorted by name, then the
 * tools sorted by their canonical text), and empty parts are left out.
 *
 * Verify what the sidecar said (it says it only for an app with a `context_cache_config`; the
 * answer's fingerprint is empty otherwise), or compute a fingerprint before asking it:
 *
 *     const context = await ce.buildContext(request);
 *     fingerprint(request, context.contents, context.cacheableContentsCount) === context.fingerprint
 */
import { createHash } from "node:crypto";
import {
  create,
  isMessage,
  type JsonObject,
  type JsonValue,
  type MessageInitShape,
  toJson,
} from "@bufbuild/protobuf";
import jcs from "canonicalize";
import { type Content, ContentSchema } from "./gen/contextengine/v1/content_pb.js";
import type { BuildContextRequestSchema } from "./gen/contextengine/v1/context_service_pb.js";

/** The `"v"` of the fingerprint document. A new version would be a breaking change. */
export const FINGERPRINT_VERSION = 1;

/** The value is not canonicalizable JSON (NaN, an infinity, a lone surrogate, a bigint, a
 * function, a class instance, `undefined` inside an array...). */
export class CanonicalizationError extends TypeError {
  override readonly name = "CanonicalizationError";
}

/** Orders strings by their UTF-16 code units (what RFC 8785 prescribes for member names). */
export function compareUtf16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The canonical text of a finite number: ECMAScript `Number.prototype.toString` (shortest
 * round-trip digits, exponent form from 1e21 up and below 1e-6), `-0` as `0`.
 */
export function canonicalNumber(value: number): string {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new CanonicalizationError(`${String(value)} is not a JSON number`);
  }
  return String(value); // String(-0) is "0"
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * Refuses what JSON text could never hold but the `canonicalize` package would write anyway, as
 * `JSON.stringify` does: `undefined` (or a function, a symbol) inside an array (it writes `null`),
 * an object that is not a plain one (it calls `toJSON`, or lists the instance's keys), a function
 * or a symbol as a member's value. The fingerprint refuses rather than guesses. NaN, infinities,
 * lone surrogates and bigints the package refuses itself.
 */
function assertJson(value: unknown, path: string): void {
  if (value === null || typeof value !== "object") {
    if (typeof value === "function" || typeof value === "symbol" || value === undefined) {
      throw new CanonicalizationError(`${path}: a ${typeof value} is not a JSON value`);
    }
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item: unknown, index) => {
      assertJson(item, `${path}[${index}]`);
    });
    return;
  }
  if (!isPlainObject(value)) {
    const kind = (value as { constructor?: { name?: string } }).constructor?.name ?? "object";
    throw new CanonicalizationError(`${path}: a ${kind} is not a JSON value (plain objects only)`);
  }
  for (const [key, item] of Object.entries(value)) {
    // Members whose value is undefined are absent, as in JSON.stringify.
    if (item !== undefined) {
      assertJson(item, `${path}.${key}`);
    }
  }
}

/**
 * The RFC 8785 (JCS) canonical JSON text of a JSON value: object members sorted by name as UTF-16
 * code unit sequences, no whitespace, strings escaped as `JSON.stringify` does, numbers printed as
 * ECMAScript does. NaN, infinities, lone surrogates and non-JSON values throw
 * {@link CanonicalizationError}. Encode the text as UTF-8 before hashing it.
 *
 * The scheme itself is the `canonicalize` package (npm, by the RFC's co-author), which passes the
 * golden vectors every client checks (tests/golden/fingerprints/vectors.json); ours is the check
 * that the value is JSON at all and the error type.
 */
export function canonicalize(value: JsonValue): string {
  assertJson(value, "$");
  let text: string | undefined;
  try {
    text = jcs(value);
  } catch (error) {
    throw new CanonicalizationError(error instanceof Error ? error.message : String(error), {
      cause: error,
    });
  }
  if (text === undefined) {
    throw new CanonicalizationError("the value has no JSON text");
  }
  return text;
}

/** A `Content` message, or the plain object `create(ContentSchema, ...)` accepts. */
export type ContentInit = Content | MessageInitShape<typeof ContentSchema>;

/** What the fingerprint covers besides the contents: the model request's fixed parts. */
export interface FingerprintParts {
  /** The model name, or a `ModelIdentity` (only its `model` counts). Empty: left out. */
  model?: string | { model?: string | undefined } | undefined;
  /** The system instruction. Unset, or a content whose proto3 JSON is `{}`: left out. */
  systemInstruction?: ContentInit | undefined;
  /** google-genai `Tool` objects as JSON (snake_case field names recommended). */
  tools?: readonly JsonObject[] | undefined;
  /** The google-genai `ToolConfig` as JSON. Unset or `{}`: left out. */
  toolConfig?: JsonObject | undefined;
}

/**
 * The fixed parts, or a `BuildContextRequest` (a message or the plain object `buildContext` takes;
 * its other fields do not count), so the request sent to `buildContext` can be passed as is.
 */
export type FingerprintInput =
  | FingerprintParts
  | MessageInitShape<typeof BuildContextRequestSchema>;

/** The proto3 JSON of a content with the original (snake_case) field names. */
export function contentJson(content: ContentInit): JsonObject {
  const message = isMessage(content, ContentSchema) ? content : create(ContentSchema, content);
  return toJson(ContentSchema, message, { useProtoFieldName: true }) as JsonObject;
}

const DECLARATIONS = ["function_declarations", "functionDeclarations"] as const;

function declarationName(declaration: unknown): string {
  if (typeof declaration === "object" && declaration !== null && !Array.isArray(declaration)) {
    const name = (declaration as Record<string, unknown>).name;
    if (typeof name === "string") {
      return name;
    }
  }
  return "";
}

/**
 * Tools in fingerprint order: in each tool, a `function_declarations` (or
 * `functionDeclarations`) array stably sorted by each declaration's `name` (missing or not a
 * string: `""`); then the tools stably sorted by their canonical text. The inputs are not changed.
 */
export function normalizeTools(tools: readonly JsonObject[]): JsonObject[] {
  const keyed = tools.map((tool) => {
    if (typeof tool !== "object" || tool === null || Array.isArray(tool)) {
      throw new CanonicalizationError("a tool is a JSON object");
    }
    const copy: JsonObject = { ...tool };
    for (const key of DECLARATIONS) {
      const declarations = copy[key];
      if (Array.isArray(declarations)) {
        copy[key] = [...declarations].sort((a, b) =>
          compareUtf16(declarationName(a), declarationName(b)),
        );
      }
    }
    return { tool: copy, text: canonicalize(copy) };
  });
  keyed.sort((a, b) => compareUtf16(a.text, b.text));
  return keyed.map((k) => k.tool);
}

function modelName(model: FingerprintInput["model"]): string {
  return (typeof model === "string" ? model : model?.model) ?? "";
}

/**
 * The fingerprint document (before canonicalization) for `input` and the first
 * `min(n, contents.length)` contents.
 */
export function fingerprintDocument(
  input: FingerprintInput,
  contents: readonly ContentInit[],
  n: number,
): JsonObject {
  const document: JsonObject = { v: FINGERPRINT_VERSION };
  const model = modelName(input.model);
  if (model) {
    document.model = model;
  }
  if (input.systemInstruction !== undefined) {
    const instruction = contentJson(input.systemInstruction);
    if (Object.keys(instruction).length > 0) {
      document.system_instruction = instruction;
    }
  }
  if (input.tools !== undefined && input.tools.length > 0) {
    document.tools = normalizeTools(input.tools);
  }
  if (input.toolConfig !== undefined && Object.keys(input.toolConfig).length > 0) {
    document.tool_config = input.toolConfig;
  }
  const count = Math.min(Math.max(Math.trunc(n) || 0, 0), contents.length);
  if (count > 0) {
    document.contents = contents.slice(0, count).map(contentJson);
  }
  return document;
}

/**
 * The prompt-cache fingerprint of `input` and the first `min(n, contents.length)` contents:
 * lowercase hex SHA-256 of the canonical JSON of {@link fingerprintDocument}. With a
 * `BuildContext` request and its response (for an app with a `context_cache_config`), `fingerprint(request, response.contents,
 * response.cacheableContentsCount)` equals `response.fingerprint`, and with a decision's
 * `cacheMetadata.contentsCount` it equals `cacheMetadata.fingerprint`.
 */
export function fingerprint(
  input: FingerprintInput,
  contents: readonly ContentInit[],
  n: number,
): string {
  const text = canonicalize(fingerprintDocument(input, contents, n));
  return createHash("sha256").update(text, "utf8").digest("hex");
}
