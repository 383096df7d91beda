package dev.contextengine.client;

import dev.contextengine.v1.BuildContextResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.util.function.UnaryOperator;

/**
 * An interceptor that sees, or changes, every BuildContext answer a client receives (a spy on what
 * crossed the wire, or a sidecar that answers otherwise).
 */
public final class Answers implements ClientInterceptor {
  private final UnaryOperator<BuildContextResponse> change;

  public Answers(UnaryOperator<BuildContextResponse> change) {
    this.change = change;
  }

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(
      MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
        next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        super.start(
            new ForwardingClientCallListener.SimpleForwardingClientCallListener<R>(listener) {
              @Override
              @SuppressWarnings("unchecked") // a BuildContext call's R is BuildContextResponse
              public void onMessage(R message) {
                super.onMessage(
                    message instanceof BuildContextResponse answer
                        ? (R) change.apply(answer)
                        : message);
              }
            },
            headers);
      }
    };
  }
}
