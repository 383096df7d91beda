package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.ContextTools.Format
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.AppConfig
import dev.contextengine.v1.ContextToolsConfig
import dev.contextengine.v1.FunctionCall
import dev.contextengine.v1.FunctionResponse
import dev.contextengine.v1.Session
import io.grpc.Status
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** The context tools through [ContextTools], against a real sidecar. */
class ContextToolsKtTest {
    /** A session of a new app whose configuration enables the tools (or not). */
    private suspend fun session(ce: ContextEngineClient, enabled: Boolean = true): Session {
        val app = Sidecar.uniqueApp("kotlin-tools")
        ce.updateAppConfig {
            setConfig(
                AppConfig.newBuilder()
                    .setAppName(app)
                    .setContextTools(
                        ContextToolsConfig.newBuilder()
                            .setEnabled(enabled)
                            .setMaxHiddenFraction(1.0)
                    )
            )
        }
        return ce.createSession(appName = app, userId = "u")
    }

    /** Events 1-4: a finished turn with a bulky tool result; 5: the current turn's message. */
    private suspend fun bulkyTurn(ce: ContextEngineClient, session: Session) {
        val rows =
            (0 until 40).joinToString(" ") {
                "row$it: water level ${it * 7 % 31} cm at station S$it measured twice;"
            }
        val fetch = ContextTools.functionCall("fetch", mapOf("topic" to "tides"), "c1")
        ce.appendEvents(
            session.ref,
            listOf(
                said("user", "i1", "Find the tide tables."),
                ContextTools.callEvent("agent", "i1", fetch),
                ContextTools.answerEvent(
                    "agent",
                    "i1",
                    FunctionResponse.newBuilder()
                        .setId("c1")
                        .setName("fetch")
                        .setResponse(mapOf("rows" to rows).toStruct())
                        .build(),
                ),
                said("agent", "i1", "High tide at 06:12, code TIDE-7."),
                said("user", "i2", "Tidy up your context."),
            ),
        )
    }

    @Test
    fun declarationsOnceForEveryProvider() = runBlocking {
        val attempts = Attempts()
        ContextEngineClient.connect(Sidecar.shared(), interceptors = listOf(attempts)).use { ce ->
            val tools =
                ce.contextTools(
                    sessionRef(Sidecar.uniqueApp("kotlin-tools"), "u", "s"),
                    agentName = "agent",
                )
            val names = tools.declarations().map { it["name"] }
            assertEquals(
                listOf(
                    "context_status",
                    "context_pin",
                    "context_unpin",
                    "context_hide",
                    "context_summarize",
                    "context_expand",
                    "context_search",
                ),
                names,
            )
            assertEquals(ContextTools.NAMES, names.toSet())
            assertEquals(
                "function",
                tools.declarations(Format.OPENAI_CHAT)[0]["type"],
            )
            assertEquals(
                "context_pin",
                tools.declarations(Format.OPENAI_RESPONSES)[1]["name"],
            )
            assertTrue(tools.declarations(Format.ANTHROPIC)[2].containsKey("input_schema"))
            assertEquals(1, attempts.of("ListContextTools"), "read once, then kept")
            assertTrue(ContextTools.handles("context_search"))
            assertFalse(ContextTools.handles("search"))
        }
    }

    @Test
    fun theModelHidesAReportAndARewindBringsItBack() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val session = session(ce)
            bulkyTurn(ce, session)
            val tools = ce.contextTools(session.ref, agentName = "agent")
            val hide =
                ContextTools.functionCall(
                    "context_hide",
                    """{"first": 2, "last": 3, "stub": "The tide tables."}""",
                    "c2",
                )
            ce.appendEvent(session.ref, ContextTools.callEvent("agent", "i2", hide))
            val answer = tools.answer(hide, invocationId = "i2")
            assertEquals("c2", answer.id)
            assertEquals(true, answer.response.toMap()["ok"])
            val recorded =
                ce.appendEvent(session.ref, ContextTools.answerEvent("agent", "i2", answer)).event
            assertEquals(7, recorded.sequence)
            assertEquals("The tide tables.", recorded.getContextEdits(0).hide.stub)
            assertEquals(2, recorded.getContextEdits(0).hide.range.first)
            val context =
                ce.buildContext(session.ref, agentName = "agent").contentsList.joinToString("\n") {
                    it.text
                }
            assertFalse("row39" in context, context)
            assertTrue("The tide tables." in context, context)

            // an Anthropic-style call, its input JSON values
            val expanded =
                tools.run(
                    "context_expand",
                    mapOf("sequence" to 2),
                    callId = "toolu_3",
                    invocationId = "i2",
                )
            assertEquals("hidden_range", expanded["kind"])
            assertEquals(listOf(2L, 3L), listOf(expanded["first"], expanded["last"]))
            assertTrue((expanded["text"] as String).contains("row39: water level"))

            ce.rewindSession {
                setAppName(session.appName)
                    .setUserId("u")
                    .setSessionId(session.id)
                    .setRewindBeforeInvocationId("i2")
            }
            val back = ce.buildContext(session.ref, agentName = "agent").contentsList
            assertTrue(
                back.any { content ->
                    content.partsList.any {
                        it.hasFunctionResponse() && it.functionResponse.name == "fetch"
                    }
                }
            )
        }
    }

    @Test
    fun theModelsMistakesAreAnsweredTheCallersFail() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val session = session(ce)
            bulkyTurn(ce, session)
            val tools =
                ce.contextTools(
                    session.ref,
                    agentName = "agent",
                    branch = null,
                    isolationScope = null,
                )
            val refused =
                tools.call(
                    ContextTools.functionCall(
                        "context_hide",
                        mapOf("first" to 2, "last" to 2),
                        "c2",
                    ),
                    "i2",
                )
            assertEquals("splits_call", refused.refusal.rule)
            assertEquals("3", refused.refusal.metadataMap["answer_sequence"])
            assertEquals(0, refused.editsCount)
            val answered = refused.response.response.toMap()
            assertEquals(false, answered["ok"])
            assertTrue(
                (answered["message"] as String).contains("end the range at 3"),
                answered.toString(),
            )
            val status = tools.run("context_status", "", invocationId = "i2")
            assertEquals(5L, status["current_turn_starts_at"])
            assertEquals(8L, status["edits_left_this_turn"])
            assertThrows<IllegalArgumentException> { tools.run("context_status", "not json") }

            val unknown =
                assertThrows<ContextEngineException> {
                    tools.call(FunctionCall.newBuilder().setName("delete_everything").build())
                }
            assertEquals(Status.Code.INVALID_ARGUMENT, unknown.code())
            assertEquals("UNKNOWN_CONTEXT_TOOL", unknown.reason())
            val off = session(ce, enabled = false)
            val disabled =
                assertThrows<ContextEngineException> {
                    ce.contextTools(off.ref).run("context_status", "")
                }
            assertEquals("CONTEXT_TOOLS_DISABLED", disabled.reason())
        }
    }

    @Test
    fun listingIsRetriedCallingNeverIs() = runBlocking {
        val attempts = Attempts()
        ContextEngineClient.connect(
                "127.0.0.1:" + Sidecar.closedPort(),
                interceptors = listOf(attempts),
            )
            .use { down ->
                val tools = down.contextTools(sessionRef("a", "u", "s"), agentName = "agent")
                assertEquals(
                    Status.Code.UNAVAILABLE,
                    assertThrows<ContextEngineException> { tools.declarations() }.code(),
                )
                assertEquals(4, attempts.of("ListContextTools"), "a read is retried")
                assertEquals(
                    Status.Code.UNAVAILABLE,
                    assertThrows<ContextEngineException> { tools.run("context_status", "") }.code(),
                )
                assertEquals(
                    1,
                    attempts.of("CallContextTool"),
                    "a call may append a summary: never retried",
                )
                val missing =
                    assertThrows<ContextEngineException> {
                        down.callContextTool { setAppName("a").setUserId("u") }
                    }
                assertEquals(mapOf("field" to "session_id"), missing.metadata())
                assertTrue(missing.clientSide())
            }
    }
}
