package dev.contextengine.client.kotlin

import com.google.gson.JsonParser
import dev.contextengine.client.Answers
import dev.contextengine.client.CancelWatch
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.ExampleRun
import dev.contextengine.client.FakeProviders
import dev.contextengine.client.SessionRef
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.BuildContextResponse
import dev.contextengine.v1.Content
import dev.contextengine.v1.Part
import dev.contextengine.v1.RenderFormat
import dev.contextengine.v1.RenderRequest
import io.grpc.Status
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows

/**
 * Renderings through the suspend API against a real sidecar (renderContext, RenderedView,
 * requestPart), and examples/Renderings.kt against it and the fake providers, a process that
 * answers 400 for a body the OpenAI or Anthropic SDK types refuse.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RenderingsKtTest {
    private val system: Content =
        Content.newBuilder().addParts(Part.newBuilder().setText("You plan trips.")).build()
    private lateinit var fake: FakeProviders

    @BeforeAll
    fun start() {
        fake = FakeProviders.start()
    }

    @AfterAll fun stop() = fake.close()

    private suspend fun asked(ce: ContextEngineClient): SessionRef {
        val session = ce.createSession(appName = Sidecar.uniqueApp("kotlin-render"), userId = "u")
        ce.appendEvent(session.ref, said("user", "i1", "Which museums open on Monday?"))
        return session.ref
    }

    /** A fresh full rendering, through buildContext. */
    private suspend fun full(
        ce: ContextEngineClient,
        ref: SessionRef,
        format: RenderFormat,
    ): BuildContextResponse = ce.buildContext {
        mergeFrom(ref.buildContext("planner"))
            .setSystemInstruction(system)
            .setRender(RenderRequest.newBuilder().setFormat(format))
    }

    @Test
    fun renderContextGivesEachProvidersRequestPart() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val ref = asked(ce)
            for (format in
                listOf(
                    RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
                    RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES,
                    RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES,
                )) {
                val part =
                    ce.renderContext(
                        ref,
                        format,
                        agentName = "planner",
                        systemInstruction = system,
                        timeout = 5.seconds,
                    )
                assertEquals(full(ce, ref, format).rendered.requestPart(), part, format.name)
            }
            val chat =
                ce.renderContext(
                    ref,
                    RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
                    agentName = "planner",
                    systemInstruction = system,
                )
            assertEquals(
                JsonParser.parseString("""{"role":"system","content":"You plan trips."}"""),
                chat["messages"].asJsonArray[0],
            )
            val anthropic =
                ce.renderContext(
                    ref,
                    RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES,
                    agentName = "planner",
                    systemInstruction = system,
                )
            assertEquals("You plan trips.", anthropic["system"].asString)
            val e =
                assertThrows<IllegalArgumentException> {
                    runBlocking { ce.renderContext(ref, RenderFormat.RENDER_FORMAT_UNSPECIFIED) }
                }
            assertTrue(e.message!!.contains("needs a format"), e.message)
        }
    }

    @Test
    fun aViewSendsOnlyTheNewItemsAndReassemblesThem() = runBlocking {
        val sent = CopyOnWriteArrayList<Pair<Int, Int>>()
        val spy = Answers { answer ->
            answer.also { sent.add(it.rendered.baseItemsCount to it.rendered.itemsCount) }
        }
        ContextEngineClient.connect(Sidecar.shared(), interceptors = listOf(spy)).use { ce ->
            val format = RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES
            val ref = asked(ce)
            val view =
                ce.renderedView(ref, format, agentName = "planner", systemInstruction = system)
            assertEquals(format, view.format)
            assertEquals(emptyList<String>(), view.items)
            sent.clear()

            assertEquals(full(ce, ref, format), view.build())
            assertEquals(full(ce, ref, format).rendered.itemsList, view.items)
            ce.appendEvents(
                ref,
                listOf(said("planner", "i1", "MAAT."), said("user", "i2", "And on Tuesday?")),
            )
            val part = view.requestPart(timeout = 5.seconds) { setInvocationId("i2") }
            assertEquals(full(ce, ref, format).rendered.requestPart(), part)
            assertEquals(3, view.items.size)
            assertTrue(view.digest.isNotEmpty())
            view.reset()
            assertEquals("", view.digest)
            assertEquals(full(ce, ref, format), view.build())
            // The full builds of this test ask without since: (0, n) each.
            assertEquals(listOf(0 to 1, 0 to 1, 0 to 1, 1 to 2, 0 to 3, 0 to 3, 0 to 3), sent)
        }
    }

    @Test
    fun cancellingTheCoroutineCancelsTheRendering() = runBlocking {
        val watch = CancelWatch()
        Sidecar.Silent().use { silent ->
            ContextEngineClient.connect(silent.target(), interceptors = listOf(watch)).use { ce ->
                val ref = sessionRef("a", "u", "s")
                assertNull(
                    withTimeoutOrNull(200.milliseconds) {
                        ce.renderContext(ref, RenderFormat.RENDER_FORMAT_OPENAI_CHAT)
                    }
                )
                watch.awaitCancelled()
                val e =
                    assertThrows<ContextEngineException> {
                        runBlocking {
                            ce.renderContext(
                                ref,
                                RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
                                timeout = 300.milliseconds,
                            )
                        }
                    }
                assertEquals(Status.Code.DEADLINE_EXCEEDED, e.code())
                val view = ce.renderedView(ref, RenderFormat.RENDER_FORMAT_OPENAI_CHAT)
                assertNull(withTimeoutOrNull(200.milliseconds) { view.build() })
                watch.awaitCancelled()
            }
        }
    }

    /**
     * The example exits with 0 only when the fake answered every request 200, and prints each
     * answer.
     */
    @Test
    fun theExampleSendsEveryRenderingAndTheFakeAcceptsEachOne() {
        assertEquals(
            listOf(
                "OpenAI chat: Seen 4 messages; the last said: And where do we stay?.",
                "OpenAI responses: Seen 3 messages; the last said: And where do we stay?.",
                "Anthropic: Seen 3 messages; the last said: And where do we stay?.",
                "Anthropic: Seen 5 messages; the last said: Near the river?.",
                "Anthropic, held: 5 items",
            ),
            ExampleRun.lines("dev.contextengine.examples.kotlin.Renderings", fake.environment()),
        )
    }
}
