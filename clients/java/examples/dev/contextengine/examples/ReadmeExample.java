package dev.contextengine.examples;

import dev.contextengine.client.*;
import dev.contextengine.v1.*;
import java.time.Duration;

/** The Java guide's first example, verbatim between the markers (ReadmeTest checks both agree). */
public final class ReadmeExample {
  private ReadmeExample() {}

  public static void main(String[] args) {
    // README begin
    try (ContextEngineClient ce =
        ContextEngineClient.builder()
            .target(System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151"))
            .timeout(Duration.ofSeconds(5)) // the whole call, retries included
            .build()) {
      Session session =
          ce.createSession(
                  CreateSessionRequest.newBuilder().setAppName("demo").setUserId("zoe").build())
              .getSession();
      SessionRef ref = SessionRef.of(session);

      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-1", "Hi!")));
      BuildContextResponse context = ce.buildContext(ref.buildContext("greeter"));
      System.out.println(context.getContentsCount() + " " + context.getLastSequence()); // 1 1

      try {
        ce.getSession(new SessionRef("demo", "zoe", "nope").getSession());
      } catch (ContextEngineException e) {
        System.out.println(e.code() + " " + e.reason()); // NOT_FOUND SESSION_NOT_FOUND
      }

      // A followed stream: reopened from the last cursor when the connection drops.
      try (FollowedStream<SubscribeEventsResponse> frames =
          ce.subscribeEvents(ref.subscribeEvents())) {
        while (frames.hasNext()) {
          if (frames.next().hasCaughtUp()) {
            break; // the stored events are behind us
          }
        }
      }
    }
    // README end
  }
}
