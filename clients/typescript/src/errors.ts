/**
 * Typed errors: every failure of a {@link ContextEngineClient} call is a {@link ContextEngineError}
 * carrying the gRPC status code and, when the server sent one, the `google.rpc.ErrorInfo` reason
 * and metadata (see proto/contextengine/v1/errors.proto for the reasons and their metadata).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** gRPC status code names, indexed by their numeric value. */
export const STATUS_CODES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** A gRPC status code name, e.g. `"NOT_FOUND"`. */
export type StatusCode = (typeof STATUS_CODES)[number];

/** The domain of every reason the engine sends. */
export const ERROR_DOMAIN = "contextengine.v1";

/** What a {@link ContextEngineError} is made of. */
export interface ContextEngineErrorInit {
  code: StatusCode;
  /** Human-readable text from the server (or the client). */
  message: string;
  /** `ErrorInfo.reason`, e.g. `"SESSION_NOT_FOUND"`; `""` when the status had no ErrorInfo. */
  reason?: string;
  /** `ErrorInfo.domain` (`"contextengine.v1"` for the engine's errors). */
  domain?: string;
  /** `ErrorInfo.metadata`, e.g. `{ field: "session_id" }`. */
  metadata?: Record<string, string>;
  /** The RPC, e.g. `"SessionService/GetSession"`. */
  method?: string;
  /** True when the client raised the error itself (validation, connection, deadline). */
  clientSide?: boolean;
}

/** The one error type thrown by the client. */
export class ContextEngineError extends Error {
  override readonly name = "ContextEngineError";
  /** The gRPC status code name. */
  readonly code: StatusCode;
  /** The reason from `google.rpc.ErrorInfo` (`""` if none was sent). */
  readonly reason: string;
  /** The domain from `google.rpc.ErrorInfo` (`""` if none was sent). */
  readonly domain: string;
  /** The metadata from `google.rpc.ErrorInfo`. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The RPC that failed (`""` if unknown). */
  readonly method: string;
  /** The status message as sent (without the prefix this error's `message` adds). */
  readonly detail: string;
  /** True when the client raised it without an answer from the server. */
  readonly clientSide: boolean;

  constructor(init: ContextEngineErrorInit, options?: { cause?: unknown }) {
    const reason = init.reason ?? "";
    const method = init.method ?? "";
    const head = reason ? `${init.code} ${reason}` : init.code;
    super(`${method ? `${method}: ` : ""}${head}: ${init.message}`, options);
    this.code = init.code;
    this.reason = reason;
    this.domain = init.domain ?? "";
    this.metadata = Object.freeze({ ...(init.metadata ?? {}) });
    this.method = method;
    this.detail = init.message;
    this.clientSide = init.clientSide ?? false;
  }

  /** The numeric gRPC status code. */
  get grpcCode(): number {
    return STATUS_CODES.indexOf(this.code);
  }

  /**
   * Whether the server refused the id in `field` (`"session_id"`, ...) before looking anything
   * up: missing (MISSING_FIELD) or malformed (INVALID_ID: too long, control characters,
   * surrounding whitespace). Such an id names nothing, so the ADK drop-ins answer a get of it as
   * ADK does a get of a missing session.
   */
  isInvalidId(field: string): boolean {
    return (
      (this.reason === "MISSING_FIELD" || this.reason === "INVALID_ID") &&
      this.metadata.field === field
    );
  }
}

/** Whether `err` is a {@link ContextEngineError} with the ErrorInfo reason `reason`. */
export function hasReason(err: unknown, reason: string): err is ContextEngineError {
  return err instanceof ContextEngineError && err.reason === reason;
}

/** The status code name of a numeric gRPC code (`"UNKNOWN"` for values out of range). */
export function statusCodeName(code: number): StatusCode {
  return STATUS_CODES[code] ?? "UNKNOWN";
}

/** Turns whatever a Connect call threw into a {@link ContextEngineError}. */
export function toContextEngineError(err: unknown, method = ""): ContextEngineError {
  if (err instanceof ContextEngineError) {
    return err;
  }
  const connectError = ConnectError.from(err);
  const infos = connectError.findDetails(ErrorInfoSchema);
  const info = infos.find((i) => i.domain === ERROR_DOMAIN) ?? infos[0];
  const tooLarge = info === undefined ? transportTooLarge(connectError) : undefined;
  if (tooLarge !== undefined) {
    return new ContextEngineError(
      {
        code: "RESOURCE_EXHAUSTED",
        message: connectError.rawMessage,
        reason: "REQUEST_TOO_LARGE",
        domain: ERROR_DOMAIN,
        metadata: tooLarge,
        method,
        clientSide: tooLarge.refused_by === "client",
      },
      { cause: err },
    );
  }
  // A status that never reached the server: connection refused, reset, deadline, abort.
  const clientSide = info === undefined && isClientSideCode(connectError.code);
  return new ContextEngineError(
    {
      code: statusCodeName(connectError.code),
      message: connectError.rawMessage,
      reason: info?.reason ?? "",
      domain: info?.domain ?? "",
      metadata: info ? { ...info.metadata } : {},
      method,
      clientSide,
    },
    { cause: err },
  );
}

/** grpc core's words when the server's transport refuses an oversized request unread. */
const SERVER_TOO_LARGE = /Received message larger than max \((\d+) vs\. (\d+)\)/;
/** Connect's words when this client refuses to send an oversized request. */
const CLIENT_TOO_LARGE = /message size (\d+) is larger than configured writeMaxBytes (\d+)/;

/**
 * The `REQUEST_TOO_LARGE` metadata of a bare RESOURCE_EXHAUSTED about an oversized request, or
 * undefined. Beyond twice `--max-request-bytes` the server's gRPC transport refuses a request
 * from its length prefix, without an ErrorInfo (see errors.proto); this client reports it with
 * the reason the server uses below that bound. (This client's own receive limit is worded
 * differently by Connect, so a too-large response is never mistaken for it.)
 */
function transportTooLarge(error: ConnectError): Record<string, string> | undefined {
  if (error.code !== Code.ResourceExhausted) {
    return undefined;
  }
  const server = SERVER_TOO_LARGE.exec(error.rawMessage);
  const client = server ? null : CLIENT_TOO_LARGE.exec(error.rawMessage);
  const match = server ?? client;
  if (!match) {
    return undefined;
  }
  return {
    request_bytes: match[1] ?? "",
    transport_limit_bytes: match[2] ?? "",
    refused_by: server ? "server_transport" : "client",
  };
}

function isClientSideCode(code: Code): boolean {
  return code === Code.Unavailable || code === Code.DeadlineExceeded || code === Code.Canceled;
}

/** An INVALID_ARGUMENT / MISSING_FIELD error raised before sending, worded like the server's. */
export function missingField(method: string, field: string, message?: string): ContextEngineError {
  return new ContextEngineError({
    code: "INVALID_ARGUMENT",
    reason: "MISSING_FIELD",
    domain: ERROR_DOMAIN,
    metadata: { field },
    message: message ?? `${field} is required`,
    method,
    clientSide: true,
  });
}
