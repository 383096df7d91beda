package dev.contextengine.examples;

import dev.contextengine.client.*;
import dev.contextengine.v1.*;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The Java guide's "compaction" example, verbatim between the markers (ReadmeTest checks both
 * agree, and runs it): a sliding-window summary written in the background after an invocation ends,
 * then expanded back to the events it covers. The story of examples/python/compaction.py.
 */
public final class CompactionExample {
  private CompactionExample() {}

  public static void main(String[] args) throws InterruptedException {
    // README begin
    try (ContextEngineClient ce =
        ContextEngineClient.connect(
            System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151"))) {
      // Summarise every two invocations, without overlap (the app's setting; a session can
      // override it with updateSessionConfig).
      ce.updateAppConfig(
          UpdateAppConfigRequest.newBuilder()
              .setConfig(
                  AppConfig.newBuilder()
                      .setAppName("travel-java")
                      .setEventsCompactionConfig(
                          EventsCompactionConfig.newBuilder()
                              .setCompactionInterval(2)
                              .setOverlapSize(0)))
              .build());
      SessionRef ref =
          SessionRef.of(
              ce.createSession(
                      CreateSessionRequest.newBuilder()
                          .setAppName("travel-java")
                          .setUserId("erin")
                          .build())
                  .getSession());

      List<List<String>> turns =
          List.of(
              List.of(
                  "Find me a flight to Lisbon on May 3.", "TP1351 leaves at 09:40 for 182 EUR."),
              List.of(
                  "And a hotel near the river for two nights?",
                  "Memmo Alfama has a room at 160 EUR."));
      for (int i = 0; i < turns.size(); i++) {
        String invocation = "inv" + i;
        ce.appendEvent(ref.appendEvent(SessionRef.said("user", invocation, turns.get(i).get(0))));
        ce.appendEvent(
            ref.appendEvent(SessionRef.said("planner", invocation, turns.get(i).get(1))));
        ce.endInvocation(ref.endInvocation(invocation)); // returns at once
      }

      GetCompactionStatusRequest status =
          GetCompactionStatusRequest.newBuilder()
              .setAppName(ref.appName())
              .setUserId(ref.userId())
              .setSessionId(ref.sessionId())
              .build();
      while (ce.getCompactionStatus(status).getRunning()) {
        Thread.sleep(50); // the summary is written in the background
      }

      BuildContextResponse context = ce.buildContext(ref.buildContext("planner"));
      System.out.println(context.getContentsCount()); // 1: one summary instead of four events
      System.out.println(context.getContents(0).getParts(0).getText());

      long summarySequence = 5; // the summary was appended after the four events
      ExpandSummaryResponse expanded =
          ce.expandSummary(
              ExpandSummaryRequest.newBuilder()
                  .setAppName(ref.appName())
                  .setUserId(ref.userId())
                  .setSessionId(ref.sessionId())
                  .setSummarySequence(summarySequence)
                  .build());
      System.out.println(
          expanded.getEventsList().stream()
              .map(e -> Long.toString(e.getSequence()))
              .collect(Collectors.joining(" "))); // 1 2 3 4
    }
    // README end
  }
}
