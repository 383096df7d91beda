package dev.contextengine.adk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import dev.contextengine.adk.examples.TravelAgent;
import dev.contextengine.client.Sidecar;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The ADK Java guide's example runs against a real sidecar and leaves the expected log in the
 * engine.
 */
class ExampleTest {
  @Test
  void travelAgentRuns() {
    Session stored = TravelAgent.run(Sidecar.shared());
    List<String> authors = stored.events().stream().map(Event::author).toList();
    assertEquals(
        List.of(
            "user", "root", "root", "root", "user", "root", "root", "helper", "helper", "helper"),
        authors);
    assertEquals("Porto", stored.state().get("user:home"));
    Event last = stored.events().get(stored.events().size() - 1);
    assertTrue(last.stringifyContent().contains("42 USD"), last.stringifyContent());
    Event converted = stored.events().get(8);
    assertEquals(42, converted.functionResponses().get(0).response().get().get("usd"));
  }
}
