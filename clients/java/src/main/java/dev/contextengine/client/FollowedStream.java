package dev.contextengine.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.time.Duration;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * A server stream that is followed across failures: a blocking {@link Iterator} of frames that is
 * also {@link AutoCloseable} (use it in try-with-resources; {@link #close()} cancels the stream on
 * the server, from any thread).
 *
 * <p>When the stream breaks in a way a new stream repairs ({@code UNAVAILABLE}, including the
 * server's {@code SHUTTING_DOWN}; {@code SUBSCRIBER_LAGGED}; a lost connection; nothing received
 * for the idle timeout) it is opened again after a short randomized backoff, with a request built
 * from the last frame received ({@code SubscribeEvents} resumes after the last cursor, so every
 * event is delivered exactly once and in order; {@code WatchSessionState} starts with a new
 * snapshot). After {@code maxFailures} failures in a row without a frame in between, or on any
 * other error, {@link #hasNext()} / {@link #poll(Duration)} throw the {@link
 * ContextEngineException}. A stream the server ends normally ends the iteration.
 *
 * <p>One thread consumes a stream; {@link #close()} may be called from any thread.
 *
 * @param <T> the frame type
 */
public final class FollowedStream<T> implements Iterator<T>, AutoCloseable {
  private static final Set<Status.Code> RESUMABLE_CODES =
      Set.of(
          Status.Code.UNAVAILABLE,
          Status.Code.CANCELLED,
          Status.Code.DEADLINE_EXCEEDED,
          Status.Code.INTERNAL);
  private static final Set<String> RESUMABLE_REASONS = Set.of("SUBSCRIBER_LAGGED");

  /**
   * Whether a new stream from the last cursor repairs this failure (public: the Kotlin client's
   * followed flows apply the same rule).
   */
  public static boolean isResumable(ContextEngineException error) {
    return RESUMABLE_CODES.contains(error.code()) || RESUMABLE_REASONS.contains(error.reason());
  }

  private static final Object CLOSED_MARK = new Object();

  private record Item(int generation, Object frame, Status status, Metadata trailers) {}

  private final Channel channel;
  private final MethodDescriptor<Object, T> method;
  private final String methodName;
  private final Supplier<Object> request;
  private final Consumer<T> onFrame;
  private final StreamOptions options;
  private final RetryPolicy backoff;
  private final LinkedBlockingQueue<Item> queue = new LinkedBlockingQueue<>();

  private volatile boolean closed;
  private volatile ClientCall<Object, T> current;
  private int generation;
  private long lastActivity;
  private long reopenAt;
  private int failures;
  private int reconnects;
  private boolean ended;
  private ContextEngineException finalError;
  private T buffered;

  @SuppressWarnings("unchecked")
  <Q> FollowedStream(
      Channel channel,
      MethodDescriptor<Q, T> method,
      String methodName,
      Supplier<Q> request,
      Consumer<T> onFrame,
      StreamOptions options,
      RetryPolicy backoff) {
    this.channel = channel;
    this.method = (MethodDescriptor<Object, T>) (MethodDescriptor<?, T>) method;
    this.methodName = methodName;
    this.request = (Supplier<Object>) (Supplier<?>) request;
    this.onFrame = onFrame;
    this.options = options;
    this.backoff = backoff;
    open();
  }

  private void open() {
    generation += 1;
    final int gen = generation;
    ClientCall<Object, T> call = channel.newCall(method, CallOptions.DEFAULT);
    Metadata headers = new Metadata();
    for (Map.Entry<String, String> header : options.headers().entrySet()) {
      headers.put(
          Metadata.Key.of(header.getKey(), Metadata.ASCII_STRING_MARSHALLER), header.getValue());
    }
    current = call;
    lastActivity = System.nanoTime();
    reopenAt = 0;
    call.start(
        new ClientCall.Listener<T>() {
          @Override
          public void onMessage(T message) {
            queue.add(new Item(gen, message, null, null));
          }

          @Override
          public void onClose(Status status, Metadata trailers) {
            queue.add(new Item(gen, null, status, trailers));
          }
        },
        headers);
    call.sendMessage(request.get());
    call.halfClose();
    call.request(1);
    if (closed) {
      call.cancel("closed by the client", null);
    }
  }

  /** Reopenings so far (each after a failure the stream recovered from). */
  public int reconnects() {
    return reconnects;
  }

  /** True once the server ended the stream normally (no more frames will come). */
  public boolean ended() {
    return ended;
  }

  /**
   * The next frame, or {@code null} when none arrived within {@code timeout} (the stream goes on:
   * call again). Throws {@link ContextEngineException} when the stream failed for good or was
   * closed, and {@link NoSuchElementException} after the server ended it.
   */
  public T poll(Duration timeout) {
    if (buffered != null) {
      T frame = buffered;
      buffered = null;
      return frame;
    }
    long deadline = System.nanoTime() + Math.max(0, timeout.toNanos());
    while (true) {
      if (closed) {
        throw closedError();
      }
      if (finalError != null) {
        throw finalError;
      }
      if (ended) {
        throw new NoSuchElementException(methodName + ": the server ended the stream");
      }
      long now = System.nanoTime();
      if (current == null) {
        if (now >= reopenAt) {
          reconnects += 1;
          open();
          continue;
        }
        if (now >= deadline) {
          return null;
        }
        sleepNanos(Math.min(reopenAt, deadline) - now);
        continue;
      }
      long idleAt = lastActivity + options.idleTimeout().toNanos();
      long wait = Math.min(deadline, idleAt) - now;
      Item item = null;
      if (wait > 0) {
        try {
          item = queue.poll(wait, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          close();
          throw closedError();
        }
      }
      if (item == null) {
        if (System.nanoTime() >= idleAt) {
          fail(
              new ContextEngineException(
                  Status.Code.DEADLINE_EXCEEDED,
                  "nothing received for " + options.idleTimeout().toMillis() + " ms",
                  "",
                  "",
                  Map.of(),
                  methodName,
                  true,
                  null));
          continue;
        }
        if (System.nanoTime() >= deadline) {
          return null;
        }
        continue;
      }
      if (item.frame == CLOSED_MARK || item.generation != generation) {
        continue; // a wake-up from close(), or what an abandoned stream still said
      }
      lastActivity = System.nanoTime();
      if (item.status == null) {
        @SuppressWarnings("unchecked")
        T frame = (T) item.frame;
        failures = 0;
        onFrame.accept(frame);
        ClientCall<Object, T> call = current;
        if (call != null) {
          call.request(1);
        }
        return frame;
      }
      if (item.status.isOk()) {
        current = null;
        ended = true;
        continue;
      }
      fail(ContextEngineException.from(item.status.asRuntimeException(item.trailers), methodName));
    }
  }

  private void fail(ContextEngineException error) {
    ClientCall<Object, T> call = current;
    current = null;
    if (call != null) {
      call.cancel("reopening the stream", null);
    }
    if (!isResumable(error)) {
      finalError = error;
      return;
    }
    failures += 1;
    if (failures >= options.maxFailures()) {
      finalError = error;
      return;
    }
    BiConsumer<ContextEngineException, Integer> hook = options.onReconnect();
    if (hook != null) {
      hook.accept(error, failures);
    }
    reopenAt = System.nanoTime() + backoff.backoffNanos(failures);
  }

  private static void sleepNanos(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(Math.max(0, nanos));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private ContextEngineException closedError() {
    return new ContextEngineException(
        Status.Code.CANCELLED, "the stream was closed", "", "", Map.of(), methodName, true, null);
  }

  /** Waits for the next frame; false once the server ended the stream. */
  @Override
  public boolean hasNext() {
    if (buffered != null) {
      return true;
    }
    while (true) {
      if (ended && finalError == null && !closed) {
        return false;
      }
      T frame;
      try {
        frame = poll(Duration.ofSeconds(60));
      } catch (NoSuchElementException e) {
        return false;
      }
      if (frame != null) {
        buffered = frame;
        return true;
      }
    }
  }

  @Override
  public T next() {
    if (!hasNext()) {
      throw new NoSuchElementException(methodName + ": the server ended the stream");
    }
    T frame = buffered;
    buffered = null;
    return frame;
  }

  /** Cancels the stream (the server frees its side at once); iteration then throws CANCELLED. */
  @Override
  public void close() {
    closed = true;
    ClientCall<Object, T> call = current;
    if (call != null) {
      call.cancel("closed by the client", null);
    }
    queue.add(new Item(-1, CLOSED_MARK, null, null));
  }
}
