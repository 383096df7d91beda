package dev.contextengine.examples;

import dev.contextengine.client.*;
import dev.contextengine.v1.*;

/**
 * The Java guide's "contents since" example, verbatim between the markers (ReadmeTest checks both
 * agree, and runs it).
 */
public final class ContextViewExample {
  private ContextViewExample() {}

  public static void main(String[] args) {
    try (ContextEngineClient ce =
        ContextEngineClient.connect(
            System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151"))) {
      SessionRef ref =
          SessionRef.of(
              ce.createSession(
                      CreateSessionRequest.newBuilder().setAppName("demo").setUserId("zoe").build())
                  .getSession());
      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-1", "Hi!")));
      // README begin
      ContextView view = ce.contextView(); // one per session and agent view
      BuildContextResponse first = view.build(ref.buildContext("greeter"));
      ce.appendEvent(ref.appendEvent(SessionRef.said("user", "inv-2", "And now?")));
      BuildContextResponse next =
          view.build(ref.buildContext("greeter")); // only the new one was sent
      System.out.println(first.getContentsCount() + " " + next.getContentsCount()); // 1 2

      // The raw form: what you hold (count, digest) in, only what follows it out.
      BuildContextResponse same =
          ce.buildContext(
              ref.buildContext("greeter").toBuilder()
                  .setSince(
                      ContextSince.newBuilder()
                          .setContentsCount(next.getContentsCount())
                          .setContentsDigest(next.getContentsDigest()))
                  .build());
      System.out.println(same.getBaseContentsCount() + " " + same.getContentsCount()); // 2 0
      // README end
    }
  }
}
