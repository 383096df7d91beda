package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.AppendEventsResponse;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.ContextSince;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.EventActions;
import dev.contextengine.v1.EventCompaction;
import dev.contextengine.v1.RewindSessionRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * "Contents since" against a real sidecar: the raw answers of {@code buildContext} with {@code
 * since}, and {@link ContextView}, whose reassembled answers must equal a fresh full build through
 * appends, a rewind and a compaction.
 */
class ContextViewTest {
  private static ContextEngineClient ce;
  private static ContextEngineClient spied;

  /** {base_contents_count, contents sent} of each BuildContext answer {@code spied} received. */
  private static final List<List<Integer>> SENT = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void connect() {
    ce =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .build();
    spied =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .intercept(
                new Answers(
                    answer -> {
                      SENT.add(List.of(answer.getBaseContentsCount(), answer.getContentsCount()));
                      return answer;
                    }))
            .build();
  }

  @AfterAll
  static void close() {
    ce.close();
    spied.close();
  }

  private static SessionRef newSession() {
    SessionRef ref = ClientTest.newSession(ce);
    ce.appendEvents(
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .addEvents(SessionRef.said("user", "i1", "Which museums open on Monday?"))
            .addEvents(SessionRef.said("guide", "i1", "MAAT."))
            .build());
    return ref;
  }

  private static AppendEventsResponse secondTurn(SessionRef ref) {
    return ce.appendEvents(
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .addEvents(SessionRef.said("user", "i2", "And on Tuesday?"))
            .addEvents(SessionRef.said("guide", "i2", "Both are open."))
            .build());
  }

  private static BuildContextRequest since(SessionRef ref, int count, String digest) {
    return ref.buildContext("guide").toBuilder()
        .setSince(ContextSince.newBuilder().setContentsCount(count).setContentsDigest(digest))
        .build();
  }

  /** A view's answer is a fresh full build's, byte for byte (base 0 included). */
  private static void assertSameAsFull(BuildContextResponse view, SessionRef ref) {
    BuildContextResponse full = ce.buildContext(ref.buildContext("guide"));
    assertEquals(0, full.getBaseContentsCount());
    assertEquals(full, view);
  }

  @Test
  void aFullAnswerHasADigestAndTheSameContentsAgainAreSentAsNone() {
    SessionRef ref = newSession();
    BuildContextResponse full = ce.buildContext(ref.buildContext("guide"));
    assertEquals(2, full.getContentsCount());
    assertEquals(0, full.getBaseContentsCount());
    assertNotEquals("", full.getContentsDigest());
    BuildContextResponse same = ce.buildContext(since(ref, 2, full.getContentsDigest()));
    assertEquals(2, same.getBaseContentsCount());
    assertEquals(0, same.getContentsCount());
    assertEquals(full.getContentsDigest(), same.getContentsDigest());
    assertEquals(full.getLastSequence(), same.getLastSequence());
  }

  @Test
  void afterAnAppendOnlyTheNewContentsAreSent() {
    SessionRef ref = newSession();
    BuildContextResponse first = ce.buildContext(ref.buildContext("guide"));
    secondTurn(ref);
    BuildContextResponse next = ce.buildContext(since(ref, 2, first.getContentsDigest()));
    assertEquals(2, next.getBaseContentsCount());
    assertEquals(
        List.of("And on Tuesday?", "Both are open."),
        next.getContentsList().stream().map(c -> c.getParts(0).getText()).toList());
    assertSameAsFull(ContextView.reassemble(first.getContentsList(), next), ref);
  }

  @Test
  void anUnknownDigestGetsAFullAnswerAndANegativeCountIsInvalid() {
    SessionRef ref = newSession();
    BuildContextResponse answer = ce.buildContext(since(ref, 2, "not-a-digest"));
    assertEquals(0, answer.getBaseContentsCount());
    assertEquals(2, answer.getContentsCount());
    ContextEngineException e =
        assertThrows(ContextEngineException.class, () -> ce.buildContext(since(ref, -1, "x")));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals(false, e.clientSide());
    assertTrue(
        e.metadata().getOrDefault("field", "").contains("since.contents_count"), e.toString());
  }

  @Test
  void aViewReassemblesThroughAppendsARewindAndACompaction() throws Exception {
    SessionRef ref = newSession();
    ContextView view = spied.contextView();
    assertEquals(List.of(), view.contents());
    SENT.clear();

    BuildContextResponse first = view.build(ref.buildContext("guide"));
    assertEquals(2, first.getContentsCount());
    assertEquals(first.getContentsDigest(), view.digest());
    assertSameAsFull(first, ref);
    assertSameAsFull(view.build(ref.buildContext("guide")), ref);

    secondTurn(ref);
    BuildContextResponse grown =
        view.buildAsync(ref.buildContext("guide"), Duration.ofSeconds(5)).get();
    assertEquals(4, grown.getContentsCount());
    assertSameAsFull(grown, ref);
    assertEquals(grown.getContentsList(), view.contents());

    rewindBefore(ce, ref, "i2");
    BuildContextResponse rewound = view.buildAsync(ref.buildContext("guide")).get();
    assertEquals(2, rewound.getContentsCount());
    assertSameAsFull(rewound, ref);

    // A summary of the first event replaces its content: the held contents are no longer the
    // prefix.
    summarizeFirstEvent(ce, ref, "Asked about Monday.");
    BuildContextResponse compacted = view.build(ref.buildContext("guide"));
    assertSameAsFull(compacted, ref);
    assertTrue(
        compacted.getContentsList().stream()
            .anyMatch(c -> c.getParts(0).getText().equals("Asked about Monday.")),
        compacted.toString());

    view.reset();
    assertEquals("", view.digest());
    assertSameAsFull(view.build(ref.buildContext("guide")), ref);

    int n = compacted.getContentsCount();
    assertEquals(
        List.of(
            List.of(0, 2),
            List.of(2, 0),
            List.of(2, 2),
            List.of(0, 2),
            List.of(0, n),
            List.of(0, n)),
        SENT);
  }

  /** Rewinds {@code ref} to just before {@code invocationId}. */
  static void rewindBefore(ContextEngineClient ce, SessionRef ref, String invocationId) {
    ce.rewindSession(
        RewindSessionRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .setRewindBeforeInvocationId(invocationId)
            .build());
  }

  /** Appends a compaction whose {@code summary} (a model text) replaces the first event. */
  static void summarizeFirstEvent(ContextEngineClient ce, SessionRef ref, String summary) {
    Event firstEvent = ce.listEvents(ref.listEvents(0)).getEvents(0);
    ce.appendEvent(
        ref.appendEvent(
            Event.newBuilder()
                .setAuthor("user")
                .setActions(
                    EventActions.newBuilder()
                        .setCompaction(
                            EventCompaction.newBuilder()
                                .setStartTimestamp(firstEvent.getTimestamp())
                                .setEndTimestamp(firstEvent.getTimestamp())
                                .setCompactedContent(SessionRef.text("model", summary))))
                .build()));
  }

  @Test
  void aFailedBuildKeepsWhatTheViewHeld() {
    SessionRef ref = newSession();
    ContextView view = ce.contextView();
    view.build(ref.buildContext("guide"));
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class,
            () -> view.build(ref.buildContext("guide").toBuilder().setSessionId("nope").build()));
    assertEquals("SESSION_NOT_FOUND", e.reason());
    assertEquals(2, view.contents().size());
    secondTurn(ref);
    assertSameAsFull(view.build(ref.buildContext("guide")), ref);
  }

  @Test
  void cancellingABuildCancelsTheCall() throws Exception {
    CancelWatch watch = new CancelWatch();
    try (Sidecar.Silent silent = new Sidecar.Silent();
        ContextEngineClient hung =
            ContextEngineClient.builder().target(silent.target()).intercept(watch).build()) {
      CompletableFuture<BuildContextResponse> build =
          hung.contextView().buildAsync(new SessionRef("a", "u", "s").buildContext("guide"));
      assertTrue(build.cancel(true));
      watch.awaitCancelled();
    }
  }

  @Test
  void reassembleRefusesABaseBeyondTheHeldContents() {
    BuildContextResponse answer = BuildContextResponse.newBuilder().setBaseContentsCount(3).build();
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class,
            () -> ContextView.reassemble(List.of(Content.getDefaultInstance()), answer));
    assertEquals(Status.Code.INTERNAL, e.code());
    assertTrue(e.clientSide());
  }
}
