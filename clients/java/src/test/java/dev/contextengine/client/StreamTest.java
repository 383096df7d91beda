package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.EventActions;
import dev.contextengine.v1.SubscribeEventsResponse;
import dev.contextengine.v1.SubscribedEvent;
import dev.contextengine.v1.WatchSessionStateResponse;
import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Followed streams against real sidecars: resume, exactly once, cancellation. */
class StreamTest {
  private static final Duration WAIT = Duration.ofSeconds(20);

  private static SessionRef session(ContextEngineClient ce) {
    return SessionRef.of(
        ce.createSession(
                CreateSessionRequest.newBuilder()
                    .setAppName(Sidecar.uniqueApp("java-stream"))
                    .setUserId("u")
                    .build())
            .getSession());
  }

  /** Reads frames until {@code count} events arrived; returns their sequences. */
  private static List<Long> sequences(FollowedStream<SubscribeEventsResponse> frames, int count) {
    List<Long> seen = new ArrayList<>();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (seen.size() < count) {
      assertTrue(System.nanoTime() < deadline, "only " + seen.size() + " events: " + seen);
      SubscribeEventsResponse frame = frames.poll(Duration.ofSeconds(1));
      if (frame == null) {
        continue;
      }
      for (SubscribedEvent e : ContextEngineClient.eventsOf(frame)) {
        seen.add(e.getEvent().getSequence());
      }
    }
    return seen;
  }

  private static List<Long> oneTo(int n) {
    List<Long> out = new ArrayList<>();
    for (long i = 1; i <= n; i++) {
      out.add(i);
    }
    return out;
  }

  @Test
  void everyEventOnceInOrderWhileTheConnectionIsCutAtRandom() throws Exception {
    int total = 120;
    Random random = new Random(15);
    try (Sidecar.Proxy proxy = new Sidecar.Proxy(Sidecar.shared());
        ContextEngineClient direct = ContextEngineClient.connect(Sidecar.shared());
        ContextEngineClient cut = ContextEngineClient.connect(proxy.target())) {
      SessionRef ref = session(direct);
      for (int i = 0; i < total / 2; i++) {
        direct.appendEvent(ref.appendEvent(SessionRef.said("user", "i", "before " + i)));
      }
      // The live events go out only after the first cut, so the stream cannot be read to its end
      // before any cut (a fast machine, or a slow one that delays the cutter).
      CountDownLatch firstCut = new CountDownLatch(1);
      Thread writer =
          new Thread(
              () -> {
                try {
                  firstCut.await();
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                  return;
                }
                for (int i = total / 2; i < total; i++) {
                  direct.appendEvent(ref.appendEvent(SessionRef.said("user", "i", "live " + i)));
                }
              });
      Thread cutter =
          new Thread(
              () -> {
                try {
                  for (int i = 0; i < 6; i++) {
                    Thread.sleep(50 + random.nextInt(250));
                    proxy.cutAll();
                    firstCut.countDown();
                  }
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              });
      try (FollowedStream<SubscribeEventsResponse> frames =
          cut.subscribeEvents(ref.subscribeEvents(), StreamOptions.DEFAULT.withMaxFailures(50))) {
        writer.start();
        cutter.start();
        List<Long> seen = sequences(frames, total);
        writer.join();
        cutter.join();
        assertEquals(oneTo(total), seen, "every event once, in order");
        assertTrue(frames.reconnects() >= 1, "the stream was reopened");
        SubscribeEventsResponse more = frames.poll(Duration.ofMillis(300));
        assertTrue(more == null || ContextEngineClient.eventsOf(more).isEmpty(), "nothing more");
      }
    }
  }

  @Test
  void resumesAfterTheServerShutsDownAndAnotherTakesOver() throws Exception {
    Path dir = Files.createTempDirectory("ce-java-restart-");
    Path db = dir.resolve("ce.db");
    Sidecar first = Sidecar.start(db, List.of());
    try (Sidecar.Proxy proxy = new Sidecar.Proxy(first.target);
        ContextEngineClient ce =
            ContextEngineClient.builder().target(proxy.target()).timeout(WAIT).build()) {
      SessionRef ref = session(ce);
      for (int i = 0; i < 5; i++) {
        ce.appendEvent(ref.appendEvent(SessionRef.said("user", "i", "m" + i)));
      }
      List<ContextEngineException> reconnects = new ArrayList<>();
      try (FollowedStream<SubscribeEventsResponse> frames =
          ce.subscribeEvents(
              ref.subscribeEvents(),
              StreamOptions.DEFAULT
                  .withMaxFailures(100)
                  .withOnReconnect((e, n) -> reconnects.add(e)))) {
        assertEquals(oneTo(5), sequences(frames, 5));
        first.stop(); // SIGTERM: streams end with UNAVAILABLE / SHUTTING_DOWN
        try (Sidecar second = Sidecar.start(db, List.of())) {
          proxy.retarget(second.target);
          for (int i = 5; i < 10; i++) {
            ce.appendEvent(ref.appendEvent(SessionRef.said("user", "i", "m" + i)));
          }
          List<Long> rest = sequences(frames, 5);
          assertEquals(List.of(6L, 7L, 8L, 9L, 10L), rest, "after the restart, exactly the rest");
          assertTrue(
              reconnects.stream().anyMatch(e -> e.code() == Status.Code.UNAVAILABLE),
              reconnects.toString());
        }
      }
    } finally {
      first.close();
    }
  }

  @Test
  void aLaggedSubscriberResumesFromItsCursor() throws Exception {
    try (Sidecar small = Sidecar.start(null, List.of("--subscriber-buffer-bytes", "4096"));
        ContextEngineClient ce =
            ContextEngineClient.builder().target(small.target).timeout(WAIT).build()) {
      SessionRef ref = session(ce);
      List<ContextEngineException> reconnects = new ArrayList<>();
      try (FollowedStream<SubscribeEventsResponse> frames =
          ce.subscribeEvents(
              ref.subscribeEvents(),
              StreamOptions.DEFAULT
                  .withMaxFailures(100)
                  .withOnReconnect((e, n) -> reconnects.add(e)))) {
        SubscribeEventsResponse caughtUp = frames.poll(WAIT);
        assertNotNull(caughtUp);
        assertEquals(SubscribeEventsResponse.FrameCase.CAUGHT_UP, caughtUp.getFrameCase());
        // Far more than the HTTP/2 windows hold while nothing is read: the server's buffer for
        // this subscriber (4 KiB) overflows.
        String filler = "x".repeat(8000);
        int total = 400;
        for (int batch = 0; batch < total / 50; batch++) {
          AppendEventsRequest.Builder request =
              AppendEventsRequest.newBuilder()
                  .setAppName(ref.appName())
                  .setUserId(ref.userId())
                  .setSessionId(ref.sessionId());
          for (int i = 0; i < 50; i++) {
            request.addEvents(SessionRef.said("user", "i", filler + i));
          }
          ce.appendEvents(request.build());
        }
        List<Long> seen = sequences(frames, total);
        assertEquals(oneTo(total), seen);
        assertTrue(
            reconnects.stream().anyMatch(e -> e.reason().equals("SUBSCRIBER_LAGGED")),
            "the subscriber lagged: " + reconnects);
      }
    }
  }

  @Test
  void closingTheStreamCancelsItOnTheServer() throws Exception {
    try (Sidecar own = Sidecar.start(null, List.of());
        ContextEngineClient ce =
            ContextEngineClient.builder().target(own.target).timeout(WAIT).build()) {
      SessionRef ref = session(ce);
      FollowedStream<SubscribeEventsResponse> frames = ce.subscribeEvents(ref.subscribeEvents());
      assertEquals(SubscribeEventsResponse.FrameCase.CAUGHT_UP, frames.poll(WAIT).getFrameCase());
      assertTrue(!own.log().contains("SubscribeEvents code=CANCELLED"));
      frames.close();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (!own.log().contains("SubscribeEvents code=CANCELLED")
          && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
      assertTrue(own.log().contains("SubscribeEvents code=CANCELLED"), own.log());
      ContextEngineException e =
          assertThrows(ContextEngineException.class, () -> frames.poll(WAIT));
      assertEquals(Status.Code.CANCELLED, e.code());
      // The client still works on the same connection.
      assertEquals(0, ce.getSession(ref.getSession()).getSession().getLastSequence());
    }
  }

  @Test
  void aSubscriptionToAClosedPortFailsAfterMaxFailures() {
    try (ContextEngineClient down =
        ContextEngineClient.connect("127.0.0.1:" + Sidecar.closedPort())) {
      FollowedStream<SubscribeEventsResponse> frames =
          down.subscribeEvents(
              new SessionRef("a", "u", "s").subscribeEvents(),
              StreamOptions.DEFAULT.withMaxFailures(3));
      long t0 = System.nanoTime();
      ContextEngineException e =
          assertThrows(ContextEngineException.class, () -> frames.poll(WAIT));
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertEquals(2, frames.reconnects());
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 5_000);
    }
  }

  @Test
  void aNonResumableErrorEndsTheIterationAtOnce() {
    try (ContextEngineClient ce = ContextEngineClient.connect(Sidecar.shared())) {
      SessionRef ref = new SessionRef(Sidecar.uniqueApp("java-stream"), "u", "missing");
      FollowedStream<SubscribeEventsResponse> frames = ce.subscribeEvents(ref.subscribeEvents());
      ContextEngineException e = assertThrows(ContextEngineException.class, frames::hasNext);
      assertEquals(Status.Code.NOT_FOUND, e.code());
      assertEquals("SESSION_NOT_FOUND", e.reason());
      assertEquals(0, frames.reconnects());
    }
  }

  @Test
  void watchSessionStateSnapshotDeltasAndANewSnapshotAfterACut() throws Exception {
    try (Sidecar.Proxy proxy = new Sidecar.Proxy(Sidecar.shared());
        ContextEngineClient direct = ContextEngineClient.connect(Sidecar.shared());
        ContextEngineClient cut = ContextEngineClient.connect(proxy.target())) {
      SessionRef ref = session(direct);
      try (FollowedStream<WatchSessionStateResponse> frames =
          cut.watchSessionState(ref.watchSessionState())) {
        WatchSessionStateResponse snapshot = frames.next();
        assertEquals(WatchSessionStateResponse.FrameCase.SNAPSHOT, snapshot.getFrameCase());
        direct.appendEvent(
            ref.appendEvent(
                SessionRef.said("agent", "i", "set").toBuilder()
                    .setActions(
                        EventActions.newBuilder()
                            .setStateDelta(
                                Struct.newBuilder()
                                    .putFields("k", Value.newBuilder().setNumberValue(1).build())))
                    .build()));
        WatchSessionStateResponse delta = frames.next();
        assertEquals(WatchSessionStateResponse.FrameCase.DELTA, delta.getFrameCase());
        proxy.cutAll();
        WatchSessionStateResponse again = frames.next();
        assertEquals(WatchSessionStateResponse.FrameCase.SNAPSHOT, again.getFrameCase());
        assertEquals(1, again.getSnapshot().getState().getFieldsOrThrow("k").getNumberValue());
        assertEquals(1, frames.reconnects());
      }
    }
  }
}
