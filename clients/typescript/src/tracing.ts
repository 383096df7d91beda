/**
 * W3C trace context on outgoing calls: when the agent's process traces with OpenTelemetry and a
 * span is current, every call carries its `traceparent` (and `tracestate`), so the sidecar's span
 * of the RPC is a child of the agent's (docs/design/observability.md).
 *
 * `@opentelemetry/api` is an OPTIONAL peer dependency: it is loaded with a dynamic `import()` the
 * first time a call is made, and when it is not installed nothing is added. The headers are
 * written from the current span's context in the W3C format (`00-<trace id>-<span id>-<flags>`)
 * rather than through `propagation.inject`: the global propagator is a no-op until an SDK
 * registers one (and may be B3 or another format the sidecar does not read), and the API package
 * has no W3C propagator of its own (`@opentelemetry/core` has, as a second dependency).
 */

import type { Interceptor } from "@connectrpc/connect";

type OtelApi = typeof import("@opentelemetry/api");

let loaded: Promise<OtelApi | undefined> | undefined;

/** `@opentelemetry/api`, or undefined when it is not installed (loaded once). */
function otelApi(): Promise<OtelApi | undefined> {
  loaded ??= import("@opentelemetry/api").then(
    (api) => api,
    () => undefined,
  );
  return loaded;
}

/**
 * The `traceparent` / `tracestate` of the current span, or no pairs when there is no valid span
 * (or no OpenTelemetry API).
 */
export function traceHeaders(api: OtelApi | undefined): [string, string][] {
  if (api === undefined) {
    return [];
  }
  const span = api.trace.getSpan(api.context.active());
  const ctx = span?.spanContext();
  if (ctx === undefined || !api.isSpanContextValid(ctx)) {
    return [];
  }
  const flags = (ctx.traceFlags & 0xff).toString(16).padStart(2, "0");
  const pairs: [string, string][] = [["traceparent", `00-${ctx.traceId}-${ctx.spanId}-${flags}`]];
  const state = ctx.traceState?.serialize();
  if (state) {
    pairs.push(["tracestate", state]);
  }
  return pairs;
}

/**
 * An interceptor adding the current OpenTelemetry span's W3C trace context to every request
 * (unary and streaming). The client installs it by default (`traceContext: false` turns it off).
 */
export function traceContext(): Interceptor {
  return (next) => async (request) => {
    // The caller's context survives the await (the SDK's context manager is AsyncLocalStorage).
    for (const [name, value] of traceHeaders(await otelApi())) {
      request.header.set(name, value);
    }
    return next(request);
  };
}
