package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.Sidecar
import dev.contextengine.examples.kotlin.AgentLoop
import io.grpc.Status
import java.io.ByteArrayOutputStream
import java.io.PrintStream
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * examples/AgentLoop.kt runs against a real server, its subscriber follows, it prints the context.
 */
class ExampleKtTest {
    @Test
    fun theAgentLoopPrintsTheContext() {
        val original = System.out
        val captured = ByteArrayOutputStream()
        val contents =
            try {
                System.setOut(PrintStream(captured, true, Charsets.UTF_8))
                runBlocking { AgentLoop.agentLoop(Sidecar.shared(), "What is 17 * 23?") }
            } finally {
                System.setOut(original)
            }
        assertEquals(4, contents.size)
        val lines = captured.toString(Charsets.UTF_8).trim().split("\n")
        assertEquals("subscriber saw 4 events, the last one the answer", lines[0])
        assertTrue(
            Regex("^context for calculator in session \\S+: 4 contents, \\d+ tokens.*")
                .matches(lines[1]),
            lines[1],
        )
        assertEquals(
            listOf(
                "  user  | What is 17 * 23?",
                "  model | call multiply({\"a\":17,\"b\":23})",
                "  user  | multiply -> {\"result\":391}",
                "  model | 17 * 23 = 391",
            ),
            lines.drop(2),
        )
    }

    @Test
    fun theExampleFailsClearlyWhenTheServerIsDown() {
        val e =
            assertThrows<ContextEngineException> {
                runBlocking {
                    AgentLoop.agentLoop("127.0.0.1:" + Sidecar.closedPort(), "What is 17 * 23?")
                }
            }
        assertEquals(Status.Code.UNAVAILABLE, e.code())
        assertTrue(e.message!!.contains("cannot reach the contextengine sidecar"), e.message)
    }
}
