package dev.contextengine.client;

import dev.contextengine.v1.AppendEventRequest;
import dev.contextengine.v1.AppendEventsRequest;
import dev.contextengine.v1.Event;
import java.util.UUID;

/** Ids and timestamps given to events before the first attempt, so that retries replay exactly. */
final class Events {
  private Events() {}

  private static double lastTimestamp;

  /**
   * The wall clock in seconds, strictly increasing within this process: events of one batch get
   * distinct timestamps (compaction ranges are timestamp ranges, as in ADK).
   */
  static synchronized double nextTimestamp() {
    lastTimestamp =
        Math.max(System.currentTimeMillis() / 1000.0, Math.nextUp(lastTimestamp + 1e-6));
    return lastTimestamp;
  }

  static Event prepare(Event event) {
    if (!event.getId().isEmpty() && event.getTimestamp() != 0) {
      return event;
    }
    Event.Builder builder = event.toBuilder();
    if (builder.getId().isEmpty()) {
      builder.setId(UUID.randomUUID().toString());
    }
    if (builder.getTimestamp() == 0) {
      builder.setTimestamp(nextTimestamp());
    }
    return builder.build();
  }

  static AppendEventRequest prepare(AppendEventRequest request) {
    if (!request.hasEvent()) {
      return request;
    }
    return request.toBuilder().setEvent(prepare(request.getEvent())).build();
  }

  static AppendEventsRequest prepare(AppendEventsRequest request) {
    AppendEventsRequest.Builder builder = request.toBuilder();
    for (int i = 0; i < builder.getEventsCount(); i++) {
      builder.setEvents(i, prepare(builder.getEvents(i)));
    }
    return builder.build();
  }
}
