package dev.contextengine.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;

/**
 * Sends {@code authorization: Bearer <token>} with every call, for a sidecar started with tokens
 * ({@code --auth-tokens-file} / {@code --auth-token}; docs/security.md). It works on plaintext
 * channels too (a Unix socket or loopback sidecar that checks tokens), unlike grpc-java's
 * call-credentials helpers, which require TLS. {@link ContextEngineClient.Builder#token} installs
 * one; its {@code toString} never shows the token.
 */
public final class BearerToken implements ClientInterceptor {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final String value;

  /** {@code token}: printable ASCII without spaces. */
  public BearerToken(String token) {
    if (token == null || !token.matches("[\\x21-\\x7e]+")) {
      throw new IllegalArgumentException(
          "the token must be printable ASCII without spaces, and not empty");
    }
    this.value = "Bearer " + token;
  }

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(
      MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        headers.put(AUTHORIZATION, value);
        super.start(listener, headers);
      }
    };
  }

  @Override
  public String toString() {
    return "BearerToken(<hidden>)";
  }
}
