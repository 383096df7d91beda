/**
 * `@google/adk` objects <-> `contextengine.v1` messages.
 *
 * The proto `Event` mirrors ADK's event field for field, and its JSON names are ADK TypeScript's
 * camelCase property names, so an event converts through its JSON form: the ADK event made plain
 * JSON (`JSON.stringify` drops `undefined` and the brand symbol) and parsed strictly into the
 * proto (a property the proto does not know is an error, never dropped); back through `toJson`
 * and ADK's own `createEvent`. On the way:
 *
 * - **Milliseconds <-> seconds.** ADK TypeScript stamps events (and `Session.lastUpdateTime`) in
 *   epoch milliseconds; the engine, as ADK Python, in seconds. `timestamp` is divided by 1000 on
 *   the way in and multiplied back (rounded to a whole millisecond when it was one), as are the
 *   `startTimestamp` / `endTimestamp` of the engine's compaction summaries.
 * - **`route`**: ADK TypeScript keeps a routing node's route on the event, the engine (as ADK
 *   Python 2.13) in `actions.route`; it is moved there and back.
 * - The engine's own fields (`sequence`, `pinned`, `contextEdits`, a summary's `startSequence` /
 *   `endSequence`) are not part of ADK's event and are left out; fields ADK TypeScript does not
 *   model but the engine stores (`actions.compaction`, `actions.rewindBeforeInvocationId`, ...)
 *   are kept as they are, so nothing the engine returns is lost.
 * - **Numbers**: protobuf stores JSON numbers as doubles, and JavaScript has only doubles, so
 *   integral numbers come back integral (`2` is `2`): nothing to restore, unlike Python and Java.
 */
import { fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  type Content as ContentMessage,
  ContentSchema,
  type Event as EventMessage,
  EventSchema,
  type Session as SessionMessage,
} from "@contextengine/client";
import type { Event, Session } from "@google/adk";
import { createEvent } from "@google/adk";
import type { Content } from "@google/genai";

/** An ADK event that the engine's `Event` cannot hold (the message says which field). */
export class EventConversionError extends Error {
  override readonly name = "EventConversionError";
}

/** Epoch milliseconds (ADK TypeScript) to seconds (the engine). */
export function msToSeconds(ms: number): number {
  return ms / 1000;
}

/** Epoch seconds (the engine) to milliseconds, exact when the value was a whole millisecond. */
export function secondsToMs(seconds: number): number {
  const ms = seconds * 1000;
  const whole = Math.round(ms);
  return Math.abs(ms - whole) < 1e-3 ? whole : ms;
}

/**
 * `value` as plain JSON data: what `JSON.parse(JSON.stringify(value))` gives (`undefined`,
 * functions and symbols left out of objects and `null` in arrays, `toJSON` honoured, non-finite
 * numbers `null`), except that a negative zero stays `-0` (JSON text has no `-0` for
 * `JSON.stringify`, and the engine, as google-adk, keeps the `-0.0` a model sent).
 */
export function plain(value: unknown): JsonValue {
  return plainValue(value ?? null) ?? null;
}

function plainValue(value: unknown): JsonValue | undefined {
  if (value === null) {
    return null;
  }
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? value : null;
    case "string":
    case "boolean":
      return value;
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt");
    case "object": {
      const withJson = value as { toJSON?: () => unknown };
      if (typeof withJson.toJSON === "function") {
        return plainValue(withJson.toJSON());
      }
      if (Array.isArray(value)) {
        return value.map((item) => plainValue(item) ?? null);
      }
      const out: JsonObject = {};
      for (const [key, item] of Object.entries(value)) {
        const converted = plainValue(item);
        if (converted !== undefined) {
          out[key] = converted;
        }
      }
      return out;
    }
    default:
      return undefined;
  }
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function scaleField(target: JsonObject, key: string, scale: (n: number) => number): void {
  const value = target[key];
  if (typeof value === "number") {
    target[key] = scale(value);
  }
}

/** The engine's `Event` of an ADK TypeScript event; throws EventConversionError if it cannot fit. */
export function eventToProto(event: Event): EventMessage {
  const json = plain(event);
  if (!isObject(json)) {
    throw new EventConversionError("an event must be an object");
  }
  scaleField(json, "timestamp", msToSeconds);
  const actions = isObject(json.actions) ? json.actions : {};
  if (json.route !== undefined) {
    if (actions.route === undefined) {
      actions.route = json.route;
    }
    delete json.route;
  }
  if (isObject(actions.compaction)) {
    scaleField(actions.compaction, "startTimestamp", msToSeconds);
    scaleField(actions.compaction, "endTimestamp", msToSeconds);
  }
  json.actions = actions;
  try {
    return fromJson(EventSchema, json);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    throw new EventConversionError(
      `the event ${JSON.stringify(event.id)} does not fit the engine's Event: ${detail}`,
      { cause: err },
    );
  }
}

/** The ADK TypeScript event of an engine `Event` (the engine's own fields left out). */
export function eventFromProto(message: EventMessage): Event {
  const json = toJson(EventSchema, message) as JsonObject;
  delete json.sequence;
  delete json.pinned;
  delete json.contextEdits;
  scaleField(json, "timestamp", secondsToMs);
  const actions = isObject(json.actions) ? json.actions : {};
  if (actions.route !== undefined) {
    json.route = actions.route;
    delete actions.route;
  }
  if (isObject(actions.compaction)) {
    const compaction = actions.compaction;
    delete compaction.startSequence;
    delete compaction.endSequence;
    scaleField(compaction, "startTimestamp", secondsToMs);
    scaleField(compaction, "endTimestamp", secondsToMs);
  }
  json.actions = actions;
  const event = createEvent(json as Parameters<typeof createEvent>[0]);
  // createEvent leaves empty strings as they are but keeps an explicit undefined author/branch
  // as own properties; drop them so a converted event has exactly the fields the engine sent.
  for (const key of ["author", "branch"] as const) {
    if (event[key] === undefined) {
      delete event[key];
    }
  }
  return event;
}

/** A state object as the proto `Struct`'s JSON (values made JSON as ADK's database service does). */
export function stateToStruct(state: Record<string, unknown> | undefined): JsonObject {
  const json = plain(state ?? {});
  return isObject(json) ? json : {};
}

/** A genai `Content` as the engine's `Content`. */
export function contentToProto(content: Content): ContentMessage {
  return fromJson(ContentSchema, plain(content));
}

/** The engine's `Content` as a genai `Content`. */
export function contentFromProto(message: ContentMessage): Content {
  return toJson(ContentSchema, message) as Content;
}

/** An ADK TypeScript `Session` of the engine's session (state merged, timestamps in ms). */
export function sessionFromProto(message: SessionMessage): Session {
  return {
    id: message.id,
    appName: message.appName,
    userId: message.userId,
    state: { ...(message.state ?? {}) },
    events: message.events.map(eventFromProto),
    lastUpdateTime: secondsToMs(message.lastUpdateTime),
  };
}
