/**
 * Client-side checks of obvious mistakes, raised before anything is sent. They mirror the
 * server's first checks exactly (same code, reason, `field` metadata and order), so a request
 * the client rejects fails the same way it would have failed on the server, only sooner.
 */
import { missingField } from "./errors.js";

/** A loosely typed view of a request: JavaScript callers may pass anything. */
type Loose = Record<string, unknown> | undefined | null;

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === "";
}

/** Throws MISSING_FIELD for the first of `fields` (`[jsName, protoName]`) that is empty. */
export function requireFields(
  method: string,
  request: Loose,
  fields: ReadonlyArray<readonly [string, string]>,
): void {
  for (const [jsName, protoName] of fields) {
    if (isEmpty(request?.[jsName])) {
      throw missingField(method, protoName);
    }
  }
}

export const APP = [["appName", "app_name"]] as const;
export const APP_USER = [...APP, ["userId", "user_id"]] as const;
export const SESSION = [...APP_USER, ["sessionId", "session_id"]] as const;

/** An event to append: present, with an author (`field` is "event" or "events[i]"). */
export function requireEvent(method: string, event: Loose, field: string): void {
  if (event === undefined || event === null) {
    throw missingField(method, field);
  }
  if (isEmpty(event.author)) {
    throw missingField(method, `${field}.author`);
  }
}
