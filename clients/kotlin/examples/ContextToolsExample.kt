package dev.contextengine.examples.kotlin

import dev.contextengine.client.ContextTools.Format
import dev.contextengine.client.kotlin.*
import dev.contextengine.v1.AppConfig
import dev.contextengine.v1.ContextToolsConfig
import dev.contextengine.v1.FunctionResponse
import kotlinx.coroutines.runBlocking

/**
 * The Kotlin guide's "context tools" example, verbatim between the markers (ReadmeKtTest checks
 * both agree, and runs it): the model hides a tool result it has finished with, and the next
 * context holds one short stub instead.
 */
object ContextToolsExample {
    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking {
            val target = System.getenv("CONTEXTENGINE_TARGET") ?: "127.0.0.1:50151"
            ContextEngineClient.connect(target).use { ce ->
                val session = ce.createSession(appName = "demo-tools", userId = "zoe")
                // A finished turn (events 1-4) with a report, then the user's next message (5).
                val report =
                    (0 until 12).joinToString(" ") {
                        "row $it: water level at station $it measured twice;"
                    }
                val fetch =
                    ContextTools.functionCall(
                        "fetch_report",
                        mapOf("topic" to "tides"),
                        "call-1",
                    )
                ce.appendEvent(session.ref, said("user", "inv-1", "Read the tides report."))
                ce.appendEvent(session.ref, ContextTools.callEvent("assistant", "inv-1", fetch))
                ce.appendEvent(
                    session.ref,
                    ContextTools.answerEvent(
                        "assistant",
                        "inv-1",
                        FunctionResponse.newBuilder()
                            .setId("call-1")
                            .setName("fetch_report")
                            .setResponse(mapOf("report" to report).toStruct())
                            .build(),
                    ),
                )
                ce.appendEvent(session.ref, said("assistant", "inv-1", "High tide at 06:12."))
                ce.appendEvent(session.ref, said("user", "inv-2", "Tidy up your context."))
                // README begin
                ce.updateAppConfig { // the app enables the tools (they are off by default)
                    setConfig(
                        AppConfig.newBuilder()
                            .setAppName(session.appName)
                            .setContextTools(ContextToolsConfig.newBuilder().setEnabled(true))
                    )
                }
                // One agent in one session.
                val tools = ce.contextTools(session.ref, agentName = "assistant")
                println(tools.declarations(Format.ANTHROPIC).size) // 7

                // The model's tool_use block: append the call, let the engine run it, append
                // the answer.
                val hide =
                    ContextTools.functionCall(
                        "context_hide",
                        mapOf("first" to 2, "last" to 3, "stub" to "The tides report."),
                        "toolu_2",
                    )
                ce.appendEvent(session.ref, ContextTools.callEvent("assistant", "inv-2", hide))
                val answer = tools.answer(hide, invocationId = "inv-2")
                val answerEvent = ContextTools.answerEvent("assistant", "inv-2", answer)
                val recorded = ce.appendEvent(session.ref, answerEvent).event
                println("${answer.response.toMap()["ok"]} ${recorded.contextEditsCount}") // true 1

                // From now on every context shows one stub instead of the call and the report.
                val second = ce.buildContext(session.ref, agentName = "assistant").getContents(1)
                println(second.text.startsWith("[Hidden")) // true
                // README end
            }
        }
    }
}
