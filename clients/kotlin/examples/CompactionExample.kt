package dev.contextengine.examples.kotlin

import dev.contextengine.client.kotlin.*
import dev.contextengine.v1.AppConfig
import dev.contextengine.v1.EventsCompactionConfig
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking

/**
 * The Kotlin guide's "compaction" example, verbatim between the markers (ReadmeKtTest checks both
 * agree, and runs it): a sliding-window summary written in the background after an invocation ends,
 * then expanded back to the events it covers. The story of examples/python/compaction.py.
 */
object CompactionExample {
    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking {
            // README begin
            val target = System.getenv("CONTEXTENGINE_TARGET") ?: "127.0.0.1:50151"
            ContextEngineClient.connect(target).use { ce ->
                // Summarise every two invocations, without overlap (the app's setting; a session
                // can override it with updateSessionConfig).
                ce.updateAppConfig {
                    setConfig(
                        AppConfig.newBuilder()
                            .setAppName("travel-kotlin")
                            .setEventsCompactionConfig(
                                EventsCompactionConfig.newBuilder()
                                    .setCompactionInterval(2)
                                    .setOverlapSize(0)
                            )
                    )
                }
                val session = ce.createSession(appName = "travel-kotlin", userId = "erin")

                val turns =
                    listOf(
                        "Find me a flight to Lisbon on May 3." to
                            "TP1351 leaves at 09:40 for 182 EUR.",
                        "And a hotel near the river for two nights?" to
                            "Memmo Alfama has a room at 160 EUR.",
                    )
                for ((i, turn) in turns.withIndex()) {
                    val (question, answer) = turn
                    val events =
                        listOf(said("user", "inv$i", question), said("planner", "inv$i", answer))
                    ce.appendEvents(session.ref, events)
                    ce.endInvocation(session.ref, "inv$i") // returns at once
                }

                // The summary is written in the background.
                suspend fun compacting() =
                    ce.getCompactionStatus {
                            setAppName(session.appName)
                            setUserId(session.userId)
                            setSessionId(session.id)
                        }
                        .running
                while (compacting()) delay(50)

                val context = ce.buildContext(session.ref, agentName = "planner")
                println(context.contentsCount) // 1: one summary instead of four events
                println(context.getContents(0).text)

                val expanded = ce.expandSummary {
                    setAppName(session.appName)
                    setUserId(session.userId)
                    setSessionId(session.id)
                    setSummarySequence(5) // appended after the four events
                }
                println(expanded.eventsList.joinToString(" ") { "${it.sequence}" }) // 1 2 3 4
            }
            // README end
        }
    }
}
