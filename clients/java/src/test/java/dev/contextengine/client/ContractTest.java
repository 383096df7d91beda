package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.Gson;
import com.google.protobuf.Any;
import com.google.protobuf.util.JsonFormat;
import com.google.rpc.ErrorInfo;
import dev.contextengine.v1.Content;
import dev.contextengine.v1.ErrorReason;
import dev.contextengine.v1.Event;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared contract without a server: error mapping for every reason of errors.proto, the
 * fingerprint vectors and the golden events (the conformance matcher is the Python driver's).
 */
class ContractTest {
  private static final Path GOLDEN = Sidecar.REPO.resolve("tests/golden");
  private static final Gson GSON = new Gson();

  @SuppressWarnings("unchecked")
  private static Map<String, Object> vectors() throws IOException {
    return GSON.fromJson(
        Files.readString(GOLDEN.resolve("fingerprints/vectors.json"), StandardCharsets.UTF_8),
        Map.class);
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> list(Object value) {
    return (List<Map<String, Object>>) value;
  }

  // --- errors -----------------------------------------------------------------------------------

  @TestFactory
  Stream<DynamicTest> everyReasonOfErrorsProtoIsMapped() {
    List<DynamicTest> tests = new ArrayList<>();
    for (ErrorReason reason : ErrorReason.values()) {
      if (reason == ErrorReason.UNRECOGNIZED || reason == ErrorReason.ERROR_REASON_UNSPECIFIED) {
        continue;
      }
      String name = reason.name().substring("ERROR_REASON_".length());
      tests.add(
          DynamicTest.dynamicTest(
              name,
              () -> {
                com.google.rpc.Status status =
                    com.google.rpc.Status.newBuilder()
                        .setCode(Status.Code.FAILED_PRECONDITION.value())
                        .setMessage("because")
                        .addDetails(
                            Any.pack(
                                ErrorInfo.newBuilder()
                                    .setReason(name)
                                    .setDomain(ContextEngineException.DOMAIN)
                                    .putMetadata("field", "session_id")
                                    .build()))
                        .build();
                ContextEngineException e =
                    ContextEngineException.from(
                        StatusProto.toStatusRuntimeException(status), "S/M");
                assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
                assertEquals(name, e.reason());
                assertEquals(ContextEngineException.DOMAIN, e.domain());
                assertEquals(Map.of("field", "session_id"), e.metadata());
                assertEquals("because", e.detail());
                assertEquals("S/M: FAILED_PRECONDITION " + name + ": because", e.getMessage());
                assertFalse(e.clientSide());
                assertEquals(
                    name.equals("SUBSCRIBER_LAGGED"), FollowedStream.isResumable(e), "resumable");
              }));
    }
    assertTrue(tests.size() >= 25, tests.size() + " reasons");
    return tests.stream();
  }

  @Test
  void aStatusWithoutDetailsHasAnEmptyReason() {
    ContextEngineException e =
        ContextEngineException.from(
            Status.INTERNAL.withDescription("boom").asRuntimeException(), "");
    assertEquals(Status.Code.INTERNAL, e.code());
    assertEquals("", e.reason());
    assertEquals(Map.of(), e.metadata());
  }

  @Test
  void aLoneScalarIsCanonicalToo() {
    assertEquals("3", Fingerprint.canonicalize(3));
    assertEquals("1e+21", Fingerprint.canonicalize(1e21));
    assertEquals("null", Fingerprint.canonicalize(null));
    assertEquals("true", Fingerprint.canonicalize(true));
    assertEquals("\"a\u2028\\n\"", Fingerprint.canonicalize("a\u2028\n"));
  }

  @Test
  void anIdRefusedBeforeAnyLookupIsRecognisedByItsField() {
    for (String reason : List.of("MISSING_FIELD", "INVALID_ID")) {
      ContextEngineException e =
          new ContextEngineException(
              Status.Code.INVALID_ARGUMENT,
              "bad id",
              reason,
              "contextengine.v1",
              Map.of("field", "session_id"),
              "",
              false,
              null);
      assertTrue(e.isInvalidId("session_id"), reason);
      assertFalse(e.isInvalidId("user_id"), reason);
    }
    ContextEngineException notFound =
        new ContextEngineException(
            Status.Code.NOT_FOUND,
            "gone",
            "SESSION_NOT_FOUND",
            "contextengine.v1",
            Map.of("session_id", "s"),
            "",
            false,
            null);
    assertFalse(notFound.isInvalidId("session_id"));
  }

  @Test
  void grpcsOwnRefusalOfAnOversizedRequestIsRequestTooLarge() {
    ContextEngineException e =
        ContextEngineException.from(
            Status.RESOURCE_EXHAUSTED
                .withDescription("Received message larger than max (9437201 vs. 8388608)")
                .asRuntimeException(),
            "");
    assertEquals("REQUEST_TOO_LARGE", e.reason());
    assertEquals(
        Map.of(
            "request_bytes", "9437201",
            "transport_limit_bytes", "8388608",
            "refused_by", "server_transport"),
        e.metadata());
  }

  // --- fingerprints -----------------------------------------------------------------------------

  @Test
  void jcsVectors() throws IOException {
    List<Map<String, Object>> jcs = list(vectors().get("jcs"));
    assertFalse(jcs.isEmpty());
    for (Map<String, Object> v : jcs) {
      assertEquals(
          v.get("canonical"),
          Fingerprint.canonicalizeJson((String) v.get("input")),
          (String) v.get("name"));
    }
  }

  @Test
  void numberVectors() throws IOException {
    List<Map<String, Object>> numbers = list(vectors().get("numbers"));
    assertTrue(numbers.size() > 10);
    for (Map<String, Object> v : numbers) {
      double d = Double.longBitsToDouble(Long.parseUnsignedLong((String) v.get("bits"), 16));
      assertEquals(v.get("canonical"), Fingerprint.number(d), (String) v.get("bits"));
    }
  }

  @Test
  void fingerprintVectors() throws IOException {
    List<Map<String, Object>> fingerprints = list(vectors().get("fingerprints"));
    assertFalse(fingerprints.isEmpty());
    for (Map<String, Object> v : fingerprints) {
      String name = (String) v.get("name");
      Content instruction = null;
      if (v.get("system_instruction") != null) {
        Content.Builder b = Content.newBuilder();
        JsonFormat.parser().merge(GSON.toJson(v.get("system_instruction")), b);
        instruction = b.build();
      }
      List<Content> contents = new ArrayList<>();
      for (Object c : (List<?>) v.get("contents")) {
        Content.Builder b = Content.newBuilder();
        JsonFormat.parser().merge(GSON.toJson(c), b);
        contents.add(b.build());
      }
      Map<String, Object> document =
          Fingerprint.document(
              (String) v.get("model"),
              instruction,
              (List<?>) v.get("tools"),
              (Map<?, ?>) v.get("tool_config"),
              contents,
              ((Number) v.get("n")).intValue());
      assertEquals(v.get("canonical"), Fingerprint.canonicalize(document), name);
      assertEquals(
          v.get("sha256"),
          Fingerprint.of(
              (String) v.get("model"),
              instruction,
              (List<?>) v.get("tools"),
              (Map<?, ?>) v.get("tool_config"),
              contents,
              ((Number) v.get("n")).intValue()),
          name);
    }
  }

  @Test
  void nonJsonValuesAreRefused() {
    assertThrows(Fingerprint.CanonicalizationException.class, () -> Fingerprint.number(Double.NaN));
    assertThrows(
        Fingerprint.CanonicalizationException.class, () -> Fingerprint.canonicalize("\ud800"));
    assertThrows(
        Fingerprint.CanonicalizationException.class, () -> Fingerprint.canonicalize(new Object()));
  }

  // --- golden events ----------------------------------------------------------------------------

  @TestFactory
  Stream<DynamicTest> goldenEventsDecodeAndReencodeByteIdentically() throws IOException {
    List<String> names;
    try (Stream<Path> files = Files.list(GOLDEN.resolve("events"))) {
      names =
          files
              .map(p -> p.getFileName().toString())
              .filter(f -> f.endsWith(".binpb"))
              .map(f -> f.substring(0, f.length() - ".binpb".length()))
              .sorted()
              .collect(Collectors.toList());
    }
    assertTrue(names.size() >= 12, names.size() + " vectors");
    return names.stream()
        .map(
            name ->
                DynamicTest.dynamicTest(
                    name,
                    () -> {
                      byte[] binary =
                          Files.readAllBytes(GOLDEN.resolve("events/" + name + ".binpb"));
                      Event fromBinary = Event.parseFrom(binary);
                      assertArrayEquals(binary, fromBinary.toByteArray(), "re-encoded bytes");
                      Event.Builder fromJson = Event.newBuilder();
                      JsonFormat.parser()
                          .merge(
                              Files.readString(GOLDEN.resolve("events/" + name + ".json")),
                              fromJson);
                      assertEquals(fromBinary, fromJson.build(), "JSON and binary decode alike");
                      Event.Builder back = Event.newBuilder();
                      JsonFormat.parser()
                          .merge(
                              JsonFormat.printer().preservingProtoFieldNames().print(fromBinary),
                              back);
                      assertEquals(fromBinary, back.build(), "binary -> JSON -> message");
                    }));
  }
}
