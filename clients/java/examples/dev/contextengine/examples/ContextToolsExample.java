package dev.contextengine.examples;

import dev.contextengine.client.*;
import dev.contextengine.v1.*;
import java.util.List;
import java.util.Map;

/**
 * The Java guide's "context tools" example, verbatim between the markers (ContextToolsExampleTest
 * checks both agree, and runs it): the model hides a bulky tool result it has finished with, and
 * the next context holds one short stub instead.
 */
public final class ContextToolsExample {
  private ContextToolsExample() {}

  public static void main(String[] args) {
    try (ContextEngineClient ce =
        ContextEngineClient.connect(
            System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151"))) {
      SessionRef ref =
          SessionRef.of(
              ce.createSession(
                      CreateSessionRequest.newBuilder()
                          .setAppName("demo-tools")
                          .setUserId("zoe")
                          .build())
                  .getSession());
      // A finished turn (events 1-4) with a long report, then the user's next message (5).
      FunctionCall fetch =
          ContextTools.functionCall("fetch_report", Map.of("topic", "tides"), "call-1");
      StringBuilder report = new StringBuilder();
      for (int i = 0; i < 12; i++) {
        report
            .append("row ")
            .append(i)
            .append(": water level at station ")
            .append(i)
            .append(" measured twice; ");
      }
      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-1", "Read the tides report.")));
      ce.appendEvent(ref.appendEvent(ContextTools.callEvent("assistant", "inv-1", fetch)));
      ce.appendEvent(
          ref.appendEvent(
              ContextTools.answerEvent(
                  "assistant",
                  "inv-1",
                  FunctionResponse.newBuilder()
                      .setId("call-1")
                      .setName("fetch_report")
                      .setResponse(ContextTools.struct(Map.of("report", report.toString())))
                      .build())));
      ce.appendEvent(ref.appendEvent(SessionRef.said("assistant", "inv-1", "High tide at 06:12.")));
      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-2", "Tidy up your context.")));
      // README begin
      // The app enables the tools (they are off by default).
      ce.updateAppConfig(
          UpdateAppConfigRequest.newBuilder()
              .setConfig(
                  AppConfig.newBuilder()
                      .setAppName(ref.appName())
                      .setContextTools(ContextToolsConfig.newBuilder().setEnabled(true)))
              .build());
      ContextTools tools = ce.contextTools(ref, "assistant"); // one agent in one session
      List<Map<String, Object>> declared = tools.declarations(ContextTools.Format.OPENAI_CHAT);
      System.out.println(declared.size() + " " + ContextTools.handles("context_hide")); // 7 true

      // The model calls context_hide: append its call, let the engine run it, append the answer.
      FunctionCall hide =
          ContextTools.functionCall(
              "context_hide",
              "{\"first\": 2, \"last\": 3, \"stub\": \"The tides report.\"}",
              "call-2");
      ce.appendEvent(ref.appendEvent(ContextTools.callEvent("assistant", "inv-2", hide)));
      FunctionResponse answer = tools.answer(hide, "inv-2");
      Event recorded =
          ce.appendEvent(ref.appendEvent(ContextTools.answerEvent("assistant", "inv-2", answer)))
              .getEvent();
      System.out.println(
          ContextTools.json(answer.getResponse()).get("ok")
              + " "
              + recorded.getContextEditsList().size()); // true 1

      // From now on every context shows one stub instead of the call and the report.
      BuildContextResponse context = ce.buildContext(ref.buildContext("assistant"));
      System.out.println(
          context.getContents(1).getParts(0).getText().startsWith("[Hidden")); // true
      // README end
    }
  }
}
