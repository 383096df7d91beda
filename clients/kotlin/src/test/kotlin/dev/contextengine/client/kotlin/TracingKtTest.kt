package dev.contextengine.client.kotlin

import com.google.gson.JsonParser
import dev.contextengine.client.Sidecar
import io.opentelemetry.api.trace.Span
import io.opentelemetry.api.trace.SpanContext
import io.opentelemetry.api.trace.TraceFlags
import io.opentelemetry.api.trace.TraceState
import java.security.SecureRandom
import java.util.HexFormat
import java.util.UUID
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance

/**
 * The Kotlin client inherits the Java client's W3C trace context: a real `contextengine serve` with
 * traces on and JSON logs (as in the Java TracingTest) logs the trace id of the span current when a
 * suspend call is made; `traceContext = false` does not.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TracingKtTest {
    private val random = SecureRandom()
    private lateinit var sidecar: Sidecar

    @BeforeAll
    fun start() {
        sidecar =
            Sidecar.start(
                null,
                listOf(
                    "--log-format",
                    "json",
                    "--log-level",
                    "INFO",
                    "--tracing-otlp-endpoint",
                    "http://127.0.0.1:9",
                ),
            )
    }

    @AfterAll fun stop() = sidecar.close()

    private fun hex(bytes: Int): String =
        HexFormat.of().formatHex(ByteArray(bytes).also(random::nextBytes))

    /** Creates a session of a new app under a sampled span of [traceId]; the app's name. */
    private fun createUnderSpan(client: ContextEngineClient, traceId: String): String {
        val app = "kt-trace-${UUID.randomUUID()}"
        val parent =
            SpanContext.create(traceId, hex(8), TraceFlags.getSampled(), TraceState.getDefault())
        Span.wrap(parent).makeCurrent().use {
            runBlocking { client.createSession(appName = app, userId = "u") }
        }
        return app
    }

    /** The trace id the sidecar logged for the CreateSession of [app] (waits for its line). */
    private fun loggedTraceId(app: String): String {
        val deadline = System.nanoTime() + 10_000_000_000L
        while (System.nanoTime() < deadline) {
            for (line in sidecar.log().lines().filter { it.startsWith("{") }) {
                val record = JsonParser.parseString(line).asJsonObject
                if (
                    record.get("app")?.asString == app &&
                        record.get("method")?.asString?.endsWith("CreateSession") == true
                ) {
                    return record.get("trace_id")?.asString ?: ""
                }
            }
            Thread.sleep(50)
        }
        fail<Unit>("no CreateSession line for $app in the sidecar's log:\n${sidecar.log()}")
        return ""
    }

    @Test
    fun `the sidecar's RPC span joins the current span's trace`() {
        ContextEngineClient.connect(sidecar.target).use { client ->
            val traceId = hex(16)
            assertEquals(traceId, loggedTraceId(createUnderSpan(client, traceId)))
        }
    }

    @Test
    fun `nothing is sent with traceContext = false`() {
        ContextEngineClient.connect(sidecar.target, traceContext = false).use { client ->
            val traceId = hex(16)
            val logged = loggedTraceId(createUnderSpan(client, traceId))
            assertEquals(32, logged.length, "the sidecar traces the RPC on its own: $logged")
            assertNotEquals(traceId, logged)
        }
    }
}
