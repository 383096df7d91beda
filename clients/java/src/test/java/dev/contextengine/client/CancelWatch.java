package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.MethodDescriptor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/** An interceptor that counts the calls a client cancels. */
public final class CancelWatch implements ClientInterceptor {
  private final Semaphore cancelled = new Semaphore(0);

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(
      MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
        next.newCall(method, options)) {
      @Override
      public void cancel(String message, Throwable cause) {
        cancelled.release();
        super.cancel(message, cause);
      }
    };
  }

  /** Waits (10 s at most) for one more call to be cancelled. */
  public void awaitCancelled() throws InterruptedException {
    assertTrue(cancelled.tryAcquire(10, TimeUnit.SECONDS), "the call was cancelled");
  }
}
