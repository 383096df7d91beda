package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.ContextView as JavaContextView
import dev.contextengine.client.SessionRef
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.BuildContextResponse
import dev.contextengine.v1.ContextSince
import dev.contextengine.v1.Event
import dev.contextengine.v1.EventActions
import dev.contextengine.v1.EventCompaction
import dev.contextengine.v1.RewindSessionRequest
import io.grpc.CallOptions
import io.grpc.Channel
import io.grpc.ClientCall
import io.grpc.ClientInterceptor
import io.grpc.ForwardingClientCall
import io.grpc.ForwardingClientCallListener
import io.grpc.Metadata
import io.grpc.MethodDescriptor
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** Records (base_contents_count, contents sent) of every BuildContext answer received. */
class AnswerSizes : ClientInterceptor {
    val sent = CopyOnWriteArrayList<Pair<Int, Int>>()

    override fun <Q, R> interceptCall(
        method: MethodDescriptor<Q, R>,
        options: CallOptions,
        next: Channel,
    ): ClientCall<Q, R> =
        object :
            ForwardingClientCall.SimpleForwardingClientCall<Q, R>(next.newCall(method, options)) {
            override fun start(listener: Listener<R>, headers: Metadata) {
                super.start(
                    object :
                        ForwardingClientCallListener.SimpleForwardingClientCallListener<R>(
                            listener
                        ) {
                        override fun onMessage(message: R) {
                            if (message is BuildContextResponse)
                                sent.add(message.baseContentsCount to message.contentsCount)
                            super.onMessage(message)
                        }
                    },
                    headers,
                )
            }
        }
}

/** "Contents since" through the suspend API: the raw answers, and [ContextView]'s reassembly. */
class ContextViewKtTest {
    private suspend fun newSession(ce: ContextEngineClient): SessionRef {
        val session = ce.createSession(appName = Sidecar.uniqueApp("kotlin-since"), userId = "u")
        ce.appendEvents(
            session.ref,
            listOf(
                said("user", "i1", "Which museums open on Monday?"),
                said("guide", "i1", "MAAT."),
            ),
        )
        return session.ref
    }

    /** An answer equals a fresh full build, field for field (base 0 included). */
    private suspend fun assertSameAsFull(
        ce: ContextEngineClient,
        ref: SessionRef,
        answer: BuildContextResponse,
    ) {
        val full = ce.buildContext(ref, agentName = "guide")
        assertEquals(0, full.baseContentsCount)
        assertEquals(full, answer)
    }

    @Test
    fun rawAnswersWithSince() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val ref = newSession(ce)
            val full = ce.buildContext(ref, agentName = "guide")
            assertNotEquals("", full.contentsDigest)
            val since =
                ContextSince.newBuilder()
                    .setContentsCount(2)
                    .setContentsDigest(full.contentsDigest)
                    .build()
            val same = ce.buildContext { mergeFrom(ref.buildContext("guide")).setSince(since) }
            assertEquals(2 to 0, same.baseContentsCount to same.contentsCount)
            ce.appendEvent(ref, said("user", "i2", "And on Tuesday?"))
            val next = ce.buildContext { mergeFrom(ref.buildContext("guide")).setSince(since) }
            assertEquals(2, next.baseContentsCount)
            assertEquals(listOf("And on Tuesday?"), next.contentsList.map { it.getParts(0).text })
            assertSameAsFull(ce, ref, JavaContextView.reassemble(full.contentsList, next))
            val negative = runCatching {
                ce.buildContext {
                    mergeFrom(ref.buildContext("guide"))
                        .setSince(since.toBuilder().setContentsCount(-1))
                }
            }
                .exceptionOrNull()
            assertTrue(negative is ContextEngineException, "$negative")
            val e = negative as ContextEngineException
            assertEquals(io.grpc.Status.Code.INVALID_ARGUMENT, e.code())
            assertTrue(e.metadata()["field"].orEmpty().contains("since.contents_count"), "$e")
        }
    }

    @Test
    fun aViewReassemblesThroughAppendsARewindAndACompaction() = runBlocking {
        val sizes = AnswerSizes()
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            ContextEngineClient.connect(Sidecar.shared(), interceptors = listOf(sizes)).use { spied
                ->
                val ref = newSession(ce)
                val view = spied.contextView(ref, agentName = "guide")
                assertEquals(emptyList<Any>(), view.contents)
                val first = view.build()
                assertEquals(2, first.contentsCount)
                assertEquals(first.contentsDigest, view.digest)
                assertSameAsFull(ce, ref, first)
                assertSameAsFull(ce, ref, view.build(timeout = 5.seconds))

                ce.appendEvents(
                    ref,
                    listOf(
                        said("user", "i2", "And on Tuesday?"),
                        said("guide", "i2", "Both are open."),
                    ),
                )
                val grown = view.build { setInvocationId("i2") }
                assertEquals(4, grown.contentsCount)
                assertEquals(grown.contentsList, view.contents)
                assertSameAsFull(ce, ref, grown)

                ce.rewindSession(
                    RewindSessionRequest.newBuilder()
                        .setAppName(ref.appName())
                        .setUserId(ref.userId())
                        .setSessionId(ref.sessionId())
                        .setRewindBeforeInvocationId("i2")
                        .build()
                )
                val rewound = view.build()
                assertEquals(2, rewound.contentsCount)
                assertSameAsFull(ce, ref, rewound)

                // A summary of the first event: the held contents are no longer the prefix.
                val firstEvent = ce.listEvents(ref).getEvents(0)
                val summary =
                    Event.newBuilder()
                        .setAuthor("user")
                        .setActions(
                            EventActions.newBuilder()
                                .setCompaction(
                                    EventCompaction.newBuilder()
                                        .setStartTimestamp(firstEvent.timestamp)
                                        .setEndTimestamp(firstEvent.timestamp)
                                        .setCompactedContent(
                                            SessionRef.text("model", "Asked about Monday.")
                                        )
                                )
                        )
                        .build()
                ce.appendEvent(ref, summary)
                val compacted = view.build()
                assertTrue(
                    compacted.contentsList.any { it.getParts(0).text == "Asked about Monday." },
                    "$compacted",
                )
                assertSameAsFull(ce, ref, compacted)

                view.reset()
                assertEquals("", view.digest)
                assertSameAsFull(ce, ref, view.build())
                val n = compacted.contentsCount
                assertEquals(
                    listOf(0 to 2, 2 to 0, 2 to 2, 0 to 2, 0 to n, 0 to n),
                    sizes.sent.toList(),
                )
            }
        }
    }
}
