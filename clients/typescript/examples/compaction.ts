/**
 * Compaction (docs/guide/compaction.md) in TypeScript: a sliding-window summary written in the
 * background after an invocation ends, then expanded back to the events it covers. The same
 * story as examples/python/compaction.py.
 *
 * Against a sidecar (`make run` in the repository root; CONTEXTENGINE_TARGET for another one):
 *
 *   cd clients/typescript && npx tsx examples/compaction.ts
 *
 * The guide (clients/typescript/README.md, "Compaction") shows this file between the README
 * markers, with the import from "@contextengine/client"; test/readme.test.ts checks that and
 * runs it.
 */
// README begin
import { ContextEngineClient } from "../src/index.js";

const ce = new ContextEngineClient(process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151");
// Summarise every two invocations, without overlap (the app's setting; a session can override it).
await ce.updateAppConfig({
  config: {
    appName: "travel-ts",
    eventsCompactionConfig: { compactionInterval: 2, overlapSize: 0 },
  },
});
const { session } = await ce.createSession({ appName: "travel-ts", userId: "erin" });
const address = { appName: "travel-ts", userId: "erin", sessionId: session?.id ?? "" };

const turns = [
  ["Find me a flight to Lisbon on May 3.", "TP1351 leaves at 09:40 for 182 EUR."],
  ["And a hotel near the river for two nights?", "Memmo Alfama has a room at 160 EUR."],
];
for (const [i, [question, answer]] of turns.entries()) {
  const invocationId = `inv${i}`;
  await ce.appendEvents({
    ...address,
    events: [
      { author: "user", invocationId, content: { role: "user", parts: [{ text: question }] } },
      { author: "planner", invocationId, content: { role: "model", parts: [{ text: answer }] } },
    ],
  });
  await ce.endInvocation({ ...address, invocationId }); // returns at once
}

while ((await ce.getCompactionStatus(address)).running) {
  await new Promise((resolve) => setTimeout(resolve, 50)); // the summary is written in the background
}

const context = await ce.buildContext({ ...address, agentName: "planner" });
console.log(context.contents.length); // 1: one summary instead of four events
console.log(context.contents[0]?.parts[0]?.text);

const summarySequence = 5n; // the summary was appended after the four events
const expanded = await ce.expandSummary({ ...address, summarySequence });
console.log(expanded.events.map((e) => e.sequence).join(" ")); // 1 2 3 4
ce.close();
// README end
