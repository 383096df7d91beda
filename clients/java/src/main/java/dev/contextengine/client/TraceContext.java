package dev.contextengine.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapSetter;

/**
 * Sends the W3C trace context ({@code traceparent}, {@code tracestate}) of the current
 * OpenTelemetry span with every call, so the sidecar's span of the RPC is a child of the agent's
 * (docs/design/observability.md). Nothing is added when no valid span is current.
 *
 * <p>{@code io.opentelemetry:opentelemetry-api} is an optional dependency of the client: this class
 * is the only one that names it, and {@link ContextEngineClient.Builder} installs it only when the
 * API is on the class path ({@link ContextEngineClient.Builder#traceContext} turns it off). It
 * always writes W3C headers (the format the sidecar reads), whatever propagator the application
 * registered globally.
 */
public final class TraceContext implements ClientInterceptor {
  private static final TextMapSetter<Metadata> SETTER =
      (headers, key, value) -> {
        if (headers != null) {
          headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
        }
      };

  /** The interceptor; needs {@code opentelemetry-api} on the class path. */
  public TraceContext() {}

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(
      MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    // The caller's context, read where the call is made (start() may run on another thread).
    Context current = Context.current();
    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        if (Span.fromContext(current).getSpanContext().isValid()) {
          W3CTraceContextPropagator.getInstance().inject(current, headers, SETTER);
        }
        super.start(listener, headers);
      }
    };
  }

  @Override
  public String toString() {
    return "TraceContext(W3C)";
  }
}
