/**
 * Following a server stream across failures: a stream that breaks in a way a new stream can
 * repair (the server shuts down, the connection is lost, the subscriber lagged behind its buffer,
 * nothing arrived for too long) is opened again, after a short randomized backoff, from the last
 * cursor received. After `maxFailures` failures in a row without a frame in between, the last
 * error is thrown.
 */
import { ContextEngineError, toContextEngineError } from "./errors.js";

/** How a followed stream recovers. */
export interface FollowPolicy {
  /** Failures in a row (without a frame in between) before the error is thrown. */
  maxFailures: number;
  /** A stream that sends nothing for this long is treated as broken (`undefined`: never). */
  idleTimeoutMs: number | undefined;
  /** First backoff before reopening; doubles up to `maxBackoffMs`. */
  firstBackoffMs: number;
  maxBackoffMs: number;
  /** Called before each reopening, with the error that ended the previous stream. */
  onReconnect?: ((error: ContextEngineError, failures: number) => void) | undefined;
}

const RESUMABLE_CODES = new Set(["UNAVAILABLE", "CANCELLED", "DEADLINE_EXCEEDED", "INTERNAL"]);
const RESUMABLE_REASONS = new Set(["SUBSCRIBER_LAGGED"]);

/** Whether a new stream from the last cursor repairs this failure. */
export function isResumable(error: ContextEngineError): boolean {
  return RESUMABLE_CODES.has(error.code) || RESUMABLE_REASONS.has(error.reason);
}

/** Sleeps `ms`, or rejects with CANCELLED as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(cancelled(signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export function cancelled(signal: AbortSignal | undefined, method = ""): ContextEngineError {
  const reason = signal?.reason;
  const text = reason instanceof Error ? reason.message : reason ? String(reason) : "aborted";
  return new ContextEngineError(
    { code: "CANCELLED", message: `the call was cancelled (${text})`, method, clientSide: true },
    { cause: reason },
  );
}

/** A randomized exponential backoff: `base * 2^(n-1)` capped, times a factor in [0.5, 1.5). */
export function backoffMs(failures: number, firstMs: number, maxMs: number): number {
  const base = Math.min(firstMs * 2 ** Math.max(0, failures - 1), maxMs);
  return base * (0.5 + Math.random());
}

const IDLE = Symbol("idle");

/**
 * Yields the frames of the streams `open` opens (called again for every new stream, so it can
 * build the request from the last frame the caller saw). Ends when a stream ends normally or the
 * consumer stops iterating; throws a {@link ContextEngineError} when it fails for good or
 * `signal` aborts.
 */
export async function* follow<T>(
  open: (signal: AbortSignal) => AsyncIterable<T>,
  policy: FollowPolicy,
  method: string,
  signal?: AbortSignal,
): AsyncGenerator<T, void, undefined> {
  if (policy.maxFailures < 1) {
    throw new RangeError("maxFailures must be at least 1");
  }
  let failures = 0;
  for (;;) {
    if (signal?.aborted) {
      throw cancelled(signal, method);
    }
    const controller = new AbortController();
    const forward = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", forward, { once: true });
    const frames = open(controller.signal)[Symbol.asyncIterator]();
    let error: ContextEngineError;
    try {
      for (;;) {
        const next = frames.next();
        const result = await withIdleTimeout(next, policy.idleTimeoutMs);
        if (result === IDLE) {
          next.catch(() => undefined); // settles once the stream is aborted below
          error = new ContextEngineError({
            code: "DEADLINE_EXCEEDED",
            message: `nothing received for ${policy.idleTimeoutMs} ms`,
            method,
            clientSide: true,
          });
          break;
        }
        if (result.done) {
          return;
        }
        failures = 0;
        yield result.value;
      }
    } catch (err) {
      if (signal?.aborted) {
        throw cancelled(signal, method);
      }
      error = toContextEngineError(err, method);
      if (!isResumable(error)) {
        throw error;
      }
    } finally {
      signal?.removeEventListener("abort", forward);
      controller.abort();
    }
    failures += 1;
    if (failures >= policy.maxFailures) {
      throw error;
    }
    policy.onReconnect?.(error, failures);
    await sleep(backoffMs(failures, policy.firstBackoffMs, policy.maxBackoffMs), signal);
  }
}

async function withIdleTimeout<R>(
  promise: Promise<R>,
  idleMs: number | undefined,
): Promise<R | typeof IDLE> {
  if (idleMs === undefined) {
    return promise;
  }
  let timer: NodeJS.Timeout | undefined;
  const idle = new Promise<typeof IDLE>((resolve) => {
    timer = setTimeout(() => resolve(IDLE), idleMs);
  });
  try {
    return await Promise.race([promise, idle]);
  } finally {
    clearTimeout(timer);
  }
}
