package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.contextengine.v1.AddEventsToMemoryRequest;
import dev.contextengine.v1.AddSessionToMemoryRequest;
import dev.contextengine.v1.AppConfig;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.CallContextToolRequest;
import dev.contextengine.v1.CommitCompactionRequest;
import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.DeleteMemoryRequest;
import dev.contextengine.v1.ExpandSummaryRequest;
import dev.contextengine.v1.GetAppConfigRequest;
import dev.contextengine.v1.GetCompactionStatusRequest;
import dev.contextengine.v1.GetSessionConfigRequest;
import dev.contextengine.v1.ListContextToolsRequest;
import dev.contextengine.v1.ListSessionsRequest;
import dev.contextengine.v1.PlanCompactionRequest;
import dev.contextengine.v1.RewindSessionRequest;
import dev.contextengine.v1.SearchMemoryRequest;
import dev.contextengine.v1.SessionConfig;
import dev.contextengine.v1.SessionServiceGrpc;
import dev.contextengine.v1.UpdateAppConfigRequest;
import dev.contextengine.v1.UpdateSessionConfigRequest;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The client retries exactly the RPCs whose proto declares an {@code idempotency_level}: the proto
 * text, the generated descriptors the client reads ({@link Retryability}) and the client's
 * behaviour against a closed port (UNAVAILABLE every time) must agree.
 */
class RetryabilityTest {
  /** The RPCs a repeat could do twice: never retried. */
  static final Set<String> NEVER_RETRIED =
      Set.of(
          "SessionService/CreateSession",
          "SessionService/RewindSession",
          "CompactionService/Compact",
          "CompactionService/CommitCompaction",
          "ContextToolsService/CallContextTool");

  private static final Pattern RPC =
      Pattern.compile(
          "rpc (\\w+)\\([^)]*\\) returns \\([^)]*\\)\\s*(;|\\{\\s*option idempotency_level = "
              + "(NO_SIDE_EFFECTS|IDEMPOTENT);\\s*\\})");

  /** [every RPC, those with an idempotency_level option], from the .proto files' text. */
  static List<Set<String>> declaredInProtoText() throws IOException {
    Set<String> every = new TreeSet<>();
    Set<String> declared = new TreeSet<>();
    Path dir = Sidecar.REPO.resolve("proto/contextengine/v1");
    try (Stream<Path> files = Files.list(dir)) {
      for (Path file : files.filter(p -> p.toString().endsWith("_service.proto")).toList()) {
        String text = Files.readString(file);
        Matcher service = Pattern.compile("(?m)^service (\\w+) \\{").matcher(text);
        assertTrue(service.find(), file.toString());
        Matcher rpc = RPC.matcher(text);
        int found = 0;
        while (rpc.find()) {
          found++;
          String name = service.group(1) + "/" + rpc.group(1);
          every.add(name);
          if (rpc.group(3) != null) {
            declared.add(name);
          }
        }
        assertEquals(text.split("rpc ", -1).length - 1, found, file.toString());
      }
    }
    return List.of(every, declared);
  }

  @Test
  void theRetrySetIsTheProtosDeclaration() throws IOException {
    List<Set<String>> proto = declaredInProtoText();
    assertEquals(proto.get(0), Retryability.allMethods());
    assertEquals(proto.get(1), Retryability.retryableMethods());
    Set<String> never = new TreeSet<>(Retryability.allMethods());
    never.removeAll(Retryability.retryableMethods());
    assertEquals(new TreeSet<>(NEVER_RETRIED), never);
  }

  @Test
  void aMethodOutsideTheContractIsAnError() {
    assertTrue(Retryability.isRetryable(SessionServiceGrpc.getGetSessionMethod()));
    assertFalse(Retryability.isRetryable(SessionServiceGrpc.getCreateSessionMethod()));
    MethodDescriptor<?, ?> other =
        SessionServiceGrpc.getGetSessionMethod().toBuilder()
            .setFullMethodName("contextengine.v1.SessionService/GetSesion")
            .build();
    assertThrows(IllegalArgumentException.class, () -> Retryability.isRetryable(other));
  }

  @Test
  void theClientRetriesExactlyTheDeclaredRpcs() {
    int attempts = 3;
    ClientTest.Attempts seen = new ClientTest.Attempts();
    SessionRef s = new SessionRef("a", "u", "s");
    try (ContextEngineClient down =
        ContextEngineClient.builder()
            .target("127.0.0.1:" + Sidecar.closedPort())
            .intercept(seen)
            .timeout(Duration.ofSeconds(20))
            .retryPolicy(new RetryPolicy(attempts, Duration.ofMillis(1), Duration.ofMillis(1)))
            .build()) {
      Map<String, Runnable> calls = new TreeMap<>();
      calls.put(
          "SessionService/CreateSession",
          () ->
              down.createSession(
                  CreateSessionRequest.newBuilder().setAppName("a").setUserId("u").build()));
      calls.put("SessionService/GetSession", () -> down.getSession(s.getSession()));
      calls.put(
          "SessionService/ListSessions",
          () -> down.listSessions(ListSessionsRequest.newBuilder().setAppName("a").build()));
      calls.put(
          "SessionService/DeleteSession",
          () -> down.deleteSession(s.deleteSession().toBuilder().setAllowMissing(true).build()));
      calls.put(
          "SessionService/AppendEvent",
          () -> down.appendEvent(s.appendEvent(SessionRef.said("user", "i", "x"))));
      calls.put(
          "SessionService/AppendEvents",
          () ->
              down.appendEvents(
                  AppendEventsRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .addEvents(SessionRef.said("user", "i", "x"))
                      .build()));
      calls.put("SessionService/ListEvents", () -> down.listEvents(s.listEvents(0)));
      calls.put(
          "SessionService/RewindSession",
          () ->
              down.rewindSession(
                  RewindSessionRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .setRewindBeforeInvocationId("i")
                      .build()));
      calls.put(
          "SessionService/GetAppConfig",
          () -> down.getAppConfig(GetAppConfigRequest.newBuilder().setAppName("a").build()));
      calls.put(
          "SessionService/UpdateAppConfig",
          () ->
              down.updateAppConfig(
                  UpdateAppConfigRequest.newBuilder()
                      .setConfig(AppConfig.newBuilder().setAppName("a"))
                      .build()));
      calls.put(
          "SessionService/GetSessionConfig",
          () ->
              down.getSessionConfig(
                  GetSessionConfigRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      calls.put(
          "SessionService/UpdateSessionConfig",
          () ->
              down.updateSessionConfig(
                  UpdateSessionConfigRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .setConfig(SessionConfig.getDefaultInstance())
                      .build()));
      calls.put("ContextService/BuildContext", () -> down.buildContext(s.buildContext("")));
      calls.put("CompactionService/EndInvocation", () -> down.endInvocation(s.endInvocation("")));
      calls.put("CompactionService/Compact", () -> down.compact(s.compact()));
      calls.put(
          "CompactionService/PlanCompaction",
          () ->
              down.planCompaction(
                  PlanCompactionRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      calls.put(
          "CompactionService/CommitCompaction",
          () ->
              down.commitCompaction(
                  CommitCompactionRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      calls.put(
          "CompactionService/ExpandSummary",
          () ->
              down.expandSummary(
                  ExpandSummaryRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .setSummarySequence(1)
                      .build()));
      calls.put(
          "CompactionService/GetCompactionStatus",
          () ->
              down.getCompactionStatus(
                  GetCompactionStatusRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      calls.put(
          "MemoryService/AddSessionToMemory",
          () ->
              down.addSessionToMemory(
                  AddSessionToMemoryRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      calls.put(
          "MemoryService/AddEventsToMemory",
          () ->
              down.addEventsToMemory(
                  AddEventsToMemoryRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .addSequences(1)
                      .build()));
      calls.put(
          "MemoryService/SearchMemory",
          () ->
              down.searchMemory(
                  SearchMemoryRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setQuery("q")
                      .build()));
      calls.put(
          "MemoryService/DeleteMemory",
          () ->
              down.deleteMemory(
                  DeleteMemoryRequest.newBuilder().setAppName("a").setUserId("u").build()));
      calls.put(
          "ContextToolsService/ListContextTools",
          () ->
              down.listContextTools(ListContextToolsRequest.newBuilder().setAppName("a").build()));
      calls.put(
          "ContextToolsService/CallContextTool",
          () ->
              down.callContextTool(
                  CallContextToolRequest.newBuilder()
                      .setAppName("a")
                      .setUserId("u")
                      .setSessionId("s")
                      .build()));
      // The streams resubscribe by their own policy; GetUserState has no wrapper (stubs only).
      Set<String> wrapped = new TreeSet<>(Retryability.allMethods());
      wrapped.removeAll(
          Set.of(
              "SubscriptionService/SubscribeEvents",
              "SubscriptionService/WatchSessionState",
              "SessionService/GetUserState"));
      assertEquals(wrapped, calls.keySet());
      calls.forEach(
          (name, call) -> {
            ContextEngineException e = assertThrows(ContextEngineException.class, call::run, name);
            assertEquals(Status.Code.UNAVAILABLE, e.code(), name);
          });
      // Without allow_missing a delete is tried once.
      assertThrows(ContextEngineException.class, () -> down.deleteSession(s.deleteSession()));
      Map<String, Integer> expected = new TreeMap<>();
      Map<String, Integer> actual = new TreeMap<>();
      for (String name : calls.keySet()) {
        expected.put(name, Retryability.retryableMethods().contains(name) ? attempts : 1);
        actual.put(name, seen.of(name.substring(name.indexOf('/') + 1)));
      }
      expected.put("SessionService/DeleteSession", attempts + 1);
      assertEquals(expected, actual);
    }
  }
}
