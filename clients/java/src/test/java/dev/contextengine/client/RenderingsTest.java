package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.BuildContextResponse;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.Event;
import dev.contextengine.v1.Part;
import dev.contextengine.v1.RenderFormat;
import dev.contextengine.v1.RenderRequest;
import dev.contextengine.v1.RenderedContext;
import dev.contextengine.v1.RenderedSince;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Renderings through the Java client against a real sidecar: {@code renderContext} for each format,
 * and {@link RenderedView}, whose reassembled answers must equal a fresh full rendering through
 * appends, a rewind and a compaction while only the new items cross the wire.
 */
class RenderingsTest {
  private static final Content SYSTEM =
      Content.newBuilder().addParts(Part.newBuilder().setText("You plan trips.")).build();
  private static ContextEngineClient ce;
  private static ContextEngineClient spied;

  /** {base_items_count, items sent} of each BuildContext answer {@code spied} received. */
  private static final List<List<Integer>> SENT = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void connect() {
    ce =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .build();
    Answers record =
        new Answers(
            answer -> {
              RenderedContext r = answer.getRendered();
              SENT.add(List.of(r.getBaseItemsCount(), r.getItemsCount()));
              return answer;
            });
    spied =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .timeout(Duration.ofSeconds(20))
            .intercept(record)
            .build();
  }

  @AfterAll
  static void close() {
    ce.close();
    spied.close();
  }

  /** An event from its proto JSON (the conformance scenarios' notation). */
  static Event event(String json) {
    Event.Builder event = Event.newBuilder();
    try {
      JsonFormat.parser().merge(json, event);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(json, e);
    }
    return event.build();
  }

  /** The planner's call of {@code name} with {@code args} (JSON), under {@code id}. */
  static Event call(String id, String name, String args) {
    return event(
        "{\"author\":\"planner\",\"invocationId\":\"i1\",\"content\":{\"role\":\"model\",\"parts\":"
            + "[{\"functionCall\":{\"id\":\""
            + id
            + "\",\"name\":\""
            + name
            + "\",\"args\":"
            + args
            + "}}]}}");
  }

  /** The result of the call {@code id} of {@code name}: {@code response} (JSON). */
  static Event result(String id, String name, String response) {
    return event(
        "{\"author\":\"planner\",\"invocationId\":\"i1\",\"content\":{\"role\":\"user\",\"parts\":"
            + "[{\"functionResponse\":{\"id\":\""
            + id
            + "\",\"name\":\""
            + name
            + "\",\"response\":"
            + response
            + "}}]}}");
  }

  static void append(ContextEngineClient ce, SessionRef ref, Event... events) {
    ce.appendEvents(
        AppendEventsRequest.newBuilder()
            .setAppName(ref.appName())
            .setUserId(ref.userId())
            .setSessionId(ref.sessionId())
            .addAllEvents(List.of(events))
            .build());
  }

  private static SessionRef asked() {
    SessionRef ref = ClientTest.newSession(ce);
    append(ce, ref, SessionRef.said("user", "i1", "Which museums open on Monday?"));
    return ref;
  }

  private static BuildContextRequest request(SessionRef ref) {
    return ref.buildContext("planner").toBuilder().setSystemInstruction(SYSTEM).build();
  }

  /** A fresh full rendering of {@code format}, through buildContext. */
  private static BuildContextResponse full(SessionRef ref, RenderFormat format) {
    BuildContextResponse answer =
        ce.buildContext(
            request(ref).toBuilder()
                .setRender(RenderRequest.newBuilder().setFormat(format))
                .build());
    assertEquals(0, answer.getRendered().getBaseItemsCount());
    return answer;
  }

  /** The request part of each format is the answer's items and system part, parsed. */
  @Test
  void renderContextGivesEachProvidersRequestPart() {
    SessionRef ref = asked();
    append(
        ce,
        ref,
        SessionRef.said("planner", "i1", "MAAT."),
        SessionRef.said("user", "i2", "And on Tuesday?"));

    JsonObject chat = ce.renderContext(request(ref), RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
    assertEquals(
        List.of(
            "{\"role\":\"system\",\"content\":\"You plan trips.\"}",
            "{\"role\":\"user\",\"content\":\"Which museums open on Monday?\"}",
            "{\"role\":\"assistant\",\"content\":\"MAAT.\"}",
            "{\"role\":\"user\",\"content\":\"And on Tuesday?\"}"),
        texts(chat, "messages"));
    assertEquals(1, chat.size());

    JsonObject input = ce.renderContext(request(ref), RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES);
    assertEquals(
        full(ref, RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES).getRendered().getItemsList(),
        texts(input, "input"));
    assertEquals("You plan trips.", input.get("instructions").getAsString());

    JsonObject messages =
        ce.renderContext(request(ref), RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES);
    assertEquals(
        List.of(
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Which museums open on Monday?\"}]}",
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"MAAT.\"}]}",
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"And on Tuesday?\"}]}"),
        texts(messages, "messages"));
    assertEquals("You plan trips.", messages.get("system").getAsString());
  }

  private static List<String> texts(JsonObject part, String key) {
    List<String> texts = new ArrayList<>();
    for (JsonElement item : part.getAsJsonArray(key)) {
      texts.add(item.toString());
    }
    return texts;
  }

  @Test
  void renderContextReplacesTheRequestsOwnRenderAndSince() throws Exception {
    SessionRef ref = asked();
    BuildContextRequest withSince =
        request(ref).toBuilder()
            .setRender(
                RenderRequest.newBuilder()
                    .setFormat(RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES)
                    .setSince(RenderedSince.newBuilder().setItemsCount(1).setItemsDigest("x")))
            .build();
    JsonObject part =
        ce.renderContextAsync(withSince, RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES).get();
    assertEquals(1, part.getAsJsonArray("messages").size());
    assertEquals(
        JsonParser.parseString(
            full(ref, RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES).getRendered().getItems(0)),
        part.getAsJsonArray("messages").get(0));
  }

  @Test
  void aFormatIsRequired() {
    SessionRef ref = asked();
    assertThrows(
        IllegalArgumentException.class,
        () -> ce.renderContext(request(ref), RenderFormat.RENDER_FORMAT_UNSPECIFIED));
    assertThrows(
        IllegalArgumentException.class,
        () -> ce.renderedView(RenderFormat.RENDER_FORMAT_UNSPECIFIED));
  }

  @Test
  void theServersErrorsComeThrough() {
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class,
            () ->
                ce.renderContext(
                    request(new SessionRef("nope", "u", "s")),
                    RenderFormat.RENDER_FORMAT_OPENAI_CHAT));
    assertEquals("SESSION_NOT_FOUND", e.reason());
    ContextEngineException missing =
        assertThrows(
            ContextEngineException.class,
            () ->
                ce.renderContext(
                    BuildContextRequest.getDefaultInstance(),
                    RenderFormat.RENDER_FORMAT_OPENAI_CHAT));
    assertEquals("app_name", missing.metadata().get("field"));
  }

  @Test
  void anAnswerWithoutTheRenderingIsUnimplemented() throws Exception {
    SessionRef ref = asked();
    try (ContextEngineClient old =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .intercept(new Answers(answer -> answer.toBuilder().clearRendered().build()))
            .build()) {
      ContextEngineException e =
          assertThrows(
              ContextEngineException.class,
              () -> old.renderContext(request(ref), RenderFormat.RENDER_FORMAT_OPENAI_CHAT));
      assertEquals(Status.Code.UNIMPLEMENTED, e.code());
      assertTrue(e.clientSide());
      assertTrue(e.getMessage().contains("older than renderings"), e.getMessage());

      RenderedView view = old.renderedView(RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
      ExecutionException async =
          assertThrows(ExecutionException.class, () -> view.buildAsync(request(ref)).get());
      assertEquals(Status.Code.UNIMPLEMENTED, ((ContextEngineException) async.getCause()).code());
      assertEquals(List.of(), view.items());
    }
  }

  @Test
  void anItemThatIsNotJsonBreaksTheProtocol() {
    SessionRef ref = asked();
    UnaryOperator<BuildContextResponse> garble =
        answer ->
            answer.toBuilder()
                .setRendered(answer.getRendered().toBuilder().addItems("{not json"))
                .build();
    try (ContextEngineClient broken =
        ContextEngineClient.builder()
            .target(Sidecar.shared())
            .intercept(new Answers(garble))
            .build()) {
      ContextEngineException e =
          assertThrows(
              ContextEngineException.class,
              () -> broken.renderContext(request(ref), RenderFormat.RENDER_FORMAT_OPENAI_CHAT));
      assertEquals(Status.Code.INTERNAL, e.code());
      assertTrue(e.getMessage().contains("item 2 of the rendering is not JSON"), e.getMessage());
    }
  }

  @Test
  void aViewReassemblesThroughAppendsARewindAndACompaction() throws Exception {
    RenderFormat format = RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES;
    SessionRef ref = asked();
    RenderedView view = spied.renderedView(format);
    assertEquals(format, view.format());
    assertEquals(List.of(), view.items());
    SENT.clear();

    BuildContextResponse first = view.build(request(ref));
    assertEquals(full(ref, format), first);
    assertEquals(first.getRendered().getItemsList(), view.items());
    assertEquals(first.getRendered().getItemsDigest(), view.digest());
    assertEquals(full(ref, format), view.build(request(ref)));

    append(ce, ref, call("toolu_1", "open_museums", "{\"city\":\"Lisbon\"}"));
    append(
        ce,
        ref,
        result("toolu_1", "open_museums", "{\"open\":[\"MAAT\"]}"),
        SessionRef.said("planner", "i1", "MAAT."));
    append(ce, ref, SessionRef.said("user", "i2", "And on Tuesday?"));
    BuildContextResponse grown = view.buildAsync(request(ref), Duration.ofSeconds(5)).get();
    assertEquals(5, grown.getRendered().getItemsCount());
    assertEquals(full(ref, format), grown);
    assertEquals(grown.getRendered().getItemsList(), view.items());

    ContextViewTest.rewindBefore(ce, ref, "i2");
    BuildContextResponse rewound = view.buildAsync(request(ref)).get();
    assertEquals(4, rewound.getRendered().getItemsCount());
    assertEquals(full(ref, format), rewound);

    // A summary of the first event replaces its content: the held items are no longer the first.
    ContextViewTest.summarizeFirstEvent(ce, ref, "Asked about Monday.");
    BuildContextResponse compacted = view.build(request(ref));
    assertEquals(full(ref, format), compacted);
    assertTrue(
        compacted.getRendered().getItemsList().stream()
            .anyMatch(i -> i.contains("Asked about Monday.")),
        compacted.toString());

    view.reset();
    assertEquals("", view.digest());
    assertEquals(full(ref, format), view.build(request(ref)));

    int n = compacted.getRendered().getItemsCount();
    assertEquals(
        List.of(
            List.of(0, 1),
            List.of(1, 0),
            List.of(1, 4),
            List.of(0, 4),
            List.of(0, n),
            List.of(0, n)),
        SENT);
  }

  @Test
  void aViewFollowsTheRequestsFormatNotItsOwnRender() {
    SessionRef ref = asked();
    RenderedView view = ce.renderedView(RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES);
    BuildContextRequest chat =
        request(ref).toBuilder()
            .setRender(RenderRequest.newBuilder().setFormat(RenderFormat.RENDER_FORMAT_OPENAI_CHAT))
            .build();
    assertEquals(full(ref, RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES), view.build(chat));
  }

  @Test
  void aFailedBuildKeepsWhatTheViewHeld() {
    SessionRef ref = asked();
    RenderedView view = ce.renderedView(RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
    view.build(request(ref));
    List<String> held = view.items();
    String digest = view.digest();
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class,
            () -> view.build(request(ref).toBuilder().setSessionId("nope").build()));
    assertEquals("SESSION_NOT_FOUND", e.reason());
    assertEquals(held, view.items());
    assertEquals(digest, view.digest());
    assertNotEquals("", digest);
    append(
        ce,
        ref,
        SessionRef.said("planner", "i1", "MAAT."),
        SessionRef.said("user", "i2", "And on Tuesday?"));
    assertEquals(full(ref, RenderFormat.RENDER_FORMAT_OPENAI_CHAT), view.build(request(ref)));
  }

  @Test
  void cancellingARenderingCancelsTheCall() throws Exception {
    CancelWatch watch = new CancelWatch();
    try (Sidecar.Silent silent = new Sidecar.Silent();
        ContextEngineClient hung =
            ContextEngineClient.builder().target(silent.target()).intercept(watch).build()) {
      BuildContextRequest request = new SessionRef("a", "u", "s").buildContext("planner");
      CompletableFuture<JsonObject> part =
          hung.renderContextAsync(request, RenderFormat.RENDER_FORMAT_OPENAI_CHAT);
      assertTrue(part.cancel(true));
      watch.awaitCancelled();
      CompletableFuture<BuildContextResponse> build =
          hung.renderedView(RenderFormat.RENDER_FORMAT_OPENAI_CHAT).buildAsync(request);
      assertTrue(build.cancel(true));
      watch.awaitCancelled();
    }
  }

  @Test
  void reassembleRefusesABaseBeyondTheHeldItems() {
    BuildContextResponse answer =
        BuildContextResponse.newBuilder()
            .setRendered(RenderedContext.newBuilder().setBaseItemsCount(3).addItems("{}"))
            .build();
    ContextEngineException e =
        assertThrows(
            ContextEngineException.class, () -> RenderedView.reassemble(List.of("{}"), answer));
    assertEquals(Status.Code.INTERNAL, e.code());
    assertTrue(e.clientSide());
    BuildContextResponse whole =
        RenderedView.reassemble(List.of("[1]", "[2]", "[3]", "[4]"), answer);
    assertEquals(List.of("[1]", "[2]", "[3]", "{}"), whole.getRendered().getItemsList());
    assertEquals(0, whole.getRendered().getBaseItemsCount());
  }
}
