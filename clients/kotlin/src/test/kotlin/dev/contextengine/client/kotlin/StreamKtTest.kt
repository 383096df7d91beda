package dev.contextengine.client.kotlin

import com.google.protobuf.Struct
import com.google.protobuf.Value
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.EventActions
import dev.contextengine.v1.SubscribeEventsResponse
import dev.contextengine.v1.WatchSessionStateResponse
import io.grpc.Status
import java.nio.file.Files
import java.util.Collections
import kotlin.random.Random
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * The followed flows against real sidecars: resume exactly once, cancellation seen by the server.
 */
class StreamKtTest {
    private val wait = 60.seconds

    private suspend fun newSession(ce: ContextEngineClient) =
        ce.createSession(appName = Sidecar.uniqueApp("kotlin-stream"), userId = "u")

    /** Waits until the server's log says a SubscribeEvents stream was cancelled. */
    private suspend fun awaitCancelledOnServer(own: Sidecar) {
        withTimeout(10.seconds) {
            while (!own.log().contains("SubscribeEvents code=CANCELLED")) delay(50)
        }
    }

    @Test
    fun everyEventOnceInOrderWhileTheConnectionIsCutAtRandom() = runBlocking {
        val total = 120
        val random = Random(16)
        Sidecar.Proxy(Sidecar.shared()).use { proxy ->
            ContextEngineClient.connect(Sidecar.shared()).use { direct ->
                ContextEngineClient.connect(proxy.target()).use { cut ->
                    val ref = newSession(direct).ref
                    repeat(total / 2) { direct.appendEvent(ref, said("user", "i", "before $it")) }
                    val reconnects =
                        Collections.synchronizedList(mutableListOf<ContextEngineException>())
                    // The live events go out only after the first cut, so the stream cannot be
                    // read to its end before any cut (a loaded machine delays the cutter).
                    val firstCut = CompletableDeferred<Unit>()
                    val writer =
                        launch(Dispatchers.Default) {
                            firstCut.await()
                            for (i in total / 2 until total) direct.appendEvent(
                                ref,
                                said("user", "i", "live $i"),
                            )
                        }
                    val cutter =
                        launch(Dispatchers.Default) {
                            repeat(6) {
                                delay(50L + random.nextInt(250))
                                proxy.cutAll()
                                firstCut.complete(Unit)
                            }
                        }
                    val seen =
                        withTimeout(wait) {
                            cut.subscribeEvents(
                                    ref,
                                    options =
                                        FollowOptions(
                                            maxFailures = 50,
                                            onReconnect = { e, _ -> reconnects.add(e) },
                                        ),
                                )
                                .recordedEvents()
                                .map { it.event.sequence }
                                .take(total)
                                .toList()
                        }
                    writer.join()
                    cutter.join()
                    assertEquals((1L..total).toList(), seen, "every event once, in order")
                    assertTrue(reconnects.isNotEmpty(), "the stream was reopened")
                }
            }
        }
    }

    @Test
    fun resumesAfterTheServerShutsDownAndAnotherTakesOver() = runBlocking {
        val db = Files.createTempDirectory("ce-kotlin-restart-").resolve("ce.db")
        val first = Sidecar.start(db, listOf())
        try {
            Sidecar.Proxy(first.target).use { proxy ->
                ContextEngineClient.connect(proxy.target(), timeout = 20.seconds).use { ce ->
                    val ref = newSession(ce).ref
                    repeat(5) { ce.appendEvent(ref, said("user", "i", "m$it")) }
                    val reconnects =
                        Collections.synchronizedList(mutableListOf<ContextEngineException>())
                    val seen = Collections.synchronizedList(mutableListOf<Long>())
                    val follower =
                        launch(Dispatchers.Default) {
                            ce.subscribeEvents(
                                    ref,
                                    options =
                                        FollowOptions(
                                            maxFailures = 100,
                                            onReconnect = { e, _ -> reconnects.add(e) },
                                        ),
                                )
                                .recordedEvents()
                                .take(10)
                                .collect { seen.add(it.event.sequence) }
                        }
                    withTimeout(wait) { while (seen.size < 5) delay(20) }
                    withContext(Dispatchers.IO) {
                        first.stop()
                    } // SIGTERM: streams end with UNAVAILABLE (SHUTTING_DOWN)
                    Sidecar.start(db, listOf()).use { second ->
                        proxy.retarget(second.target)
                        ContextEngineClient.connect(second.target).use { direct ->
                            repeat(5) { direct.appendEvent(ref, said("user", "i", "m${it + 5}")) }
                        }
                        withTimeout(wait) { follower.join() }
                        assertEquals(
                            (1L..10L).toList(),
                            seen.toList(),
                            "exactly the rest after the restart",
                        )
                        assertTrue(
                            reconnects.any { it.code() == Status.Code.UNAVAILABLE },
                            reconnects.toString(),
                        )
                    }
                }
            }
        } finally {
            first.close()
        }
    }

    @Test
    fun aLaggedSubscriberResumesFromItsCursor() = runBlocking {
        Sidecar.start(null, listOf("--subscriber-buffer-bytes", "4096")).use { small ->
            ContextEngineClient.connect(small.target, timeout = 20.seconds).use { ce ->
                val ref = newSession(ce).ref
                val reconnects =
                    Collections.synchronizedList(mutableListOf<ContextEngineException>())
                val total = 400
                val filler = "x".repeat(8000)
                val seen =
                    withTimeout(wait) {
                        var caughtUp = false
                        ce.subscribeEvents(
                                ref,
                                options =
                                    FollowOptions(
                                        maxFailures = 100,
                                        onReconnect = { e, _ -> reconnects.add(e) },
                                    ),
                            )
                            .map { frame ->
                                if (
                                    !caughtUp &&
                                        frame.frameCase ==
                                            SubscribeEventsResponse.FrameCase.CAUGHT_UP
                                ) {
                                    caughtUp = true
                                    // Far more than the HTTP/2 windows hold while nothing is read:
                                    // the
                                    // server's 4 KiB buffer for this subscriber overflows.
                                    repeat(total / 50) { b ->
                                        ce.appendEvents(
                                            ref,
                                            (0 until 50).map {
                                                said("user", "i", filler + (b * 50 + it))
                                            },
                                        )
                                    }
                                }
                                frame
                            }
                            .recordedEvents()
                            .map { it.event.sequence }
                            .take(total)
                            .toList()
                    }
                assertEquals((1L..total).toList(), seen)
                assertTrue(
                    reconnects.any { it.reason() == "SUBSCRIBER_LAGGED" },
                    "lagged: $reconnects",
                )
            }
        }
    }

    @Test
    fun takeAndFirstCancelTheStreamOnTheServer() = runBlocking {
        Sidecar.start(null, listOf()).use { own ->
            ContextEngineClient.connect(own.target, timeout = 20.seconds).use { ce ->
                val ref = newSession(ce).ref
                val frame = ce.subscribeEvents(ref).first()
                assertEquals(SubscribeEventsResponse.FrameCase.CAUGHT_UP, frame.frameCase)
                awaitCancelledOnServer(own)
                // The connection still works.
                assertEquals(0, ce.getSession(ref).lastSequence)
            }
        }
    }

    @Test
    fun cancellingTheCollectorCancelsTheStreamOnTheServer() = runBlocking {
        Sidecar.start(null, listOf()).use { own ->
            ContextEngineClient.connect(own.target, timeout = 20.seconds).use { ce ->
                val ref = newSession(ce).ref
                val frames = Collections.synchronizedList(mutableListOf<SubscribeEventsResponse>())
                val job =
                    launch(Dispatchers.Default, start = CoroutineStart.UNDISPATCHED) {
                        ce.subscribeEvents(ref).collect { frames.add(it) }
                    }
                withTimeout(wait) { while (frames.isEmpty()) delay(20) }
                assertTrue(!own.log().contains("SubscribeEvents code=CANCELLED"))
                job.cancel()
                job.join()
                awaitCancelledOnServer(own)
            }
        }
    }

    @Test
    fun withTimeoutAroundACollectionCancelsTheStreamOnTheServer() = runBlocking {
        Sidecar.start(null, listOf()).use { own ->
            ContextEngineClient.connect(own.target, timeout = 20.seconds).use { ce ->
                val ref = newSession(ce).ref
                val frames = Collections.synchronizedList(mutableListOf<SubscribeEventsResponse>())
                assertThrows<kotlinx.coroutines.TimeoutCancellationException> {
                    runBlocking {
                        withTimeout(1500.milliseconds) {
                            ce.subscribeEvents(ref).collect { frames.add(it) }
                        }
                    }
                }
                assertEquals(SubscribeEventsResponse.FrameCase.CAUGHT_UP, frames.first().frameCase)
                awaitCancelledOnServer(own)
            }
        }
    }

    @Test
    fun aSubscriptionToAClosedPortFailsAfterMaxFailures() = runBlocking {
        ContextEngineClient.connect("127.0.0.1:" + Sidecar.closedPort()).use { down ->
            var reconnects = 0
            val mark = TimeSource.Monotonic.markNow()
            val e =
                assertThrows<ContextEngineException> {
                    runBlocking {
                        down
                            .subscribeEvents(
                                sessionRef("a", "u", "s"),
                                options =
                                    FollowOptions(
                                        maxFailures = 3,
                                        onReconnect = { _, _ -> reconnects += 1 },
                                    ),
                            )
                            .toList()
                    }
                }
            assertEquals(Status.Code.UNAVAILABLE, e.code())
            assertEquals(2, reconnects)
            assertTrue(mark.elapsedNow() < 5.seconds)
        }
    }

    @Test
    fun aNonResumableErrorFailsTheFlowAtOnce() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val e =
                assertThrows<ContextEngineException> {
                    runBlocking {
                        ce.subscribeEvents(
                                sessionRef(Sidecar.uniqueApp("kotlin-none"), "u", "nope")
                            )
                            .toList()
                    }
                }
            assertEquals(Status.Code.NOT_FOUND, e.code())
            assertEquals("SESSION_NOT_FOUND", e.reason())
        }
    }

    @Test
    fun aSilentStreamIsReopenedAfterTheIdleTimeout() = runBlocking {
        Sidecar.Silent().use { silent ->
            ContextEngineClient.connect(silent.target()).use { hung ->
                var reconnects = 0
                val e =
                    assertThrows<ContextEngineException> {
                        runBlocking {
                            hung
                                .subscribeEvents(
                                    sessionRef("a", "u", "s"),
                                    options =
                                        FollowOptions(
                                            maxFailures = 2,
                                            idleTimeout = 300.milliseconds,
                                            onReconnect = { _, _ -> reconnects += 1 },
                                        ),
                                )
                                .toList()
                        }
                    }
                assertEquals(Status.Code.DEADLINE_EXCEEDED, e.code())
                assertEquals(1, reconnects)
            }
        }
    }

    @Test
    fun watchSessionStateSnapshotDeltaAndANewSnapshotAfterACut() = runBlocking {
        Sidecar.Proxy(Sidecar.shared()).use { proxy ->
            ContextEngineClient.connect(Sidecar.shared()).use { direct ->
                ContextEngineClient.connect(proxy.target()).use { cut ->
                    val ref = newSession(direct).ref
                    val kinds =
                        withTimeout(wait) {
                            cut.watchSessionState(ref)
                                .take(3)
                                .map { frame ->
                                    when (frame.frameCase) {
                                        WatchSessionStateResponse.FrameCase.SNAPSHOT ->
                                            if (frame.snapshot.state.fieldsCount == 0) {
                                                direct.appendEvent(
                                                    ref,
                                                    said("agent", "i", "set")
                                                        .toBuilder()
                                                        .setActions(
                                                            EventActions.newBuilder()
                                                                .setStateDelta(
                                                                    Struct.newBuilder()
                                                                        .putFields(
                                                                            "k",
                                                                            Value.newBuilder()
                                                                                .setNumberValue(1.0)
                                                                                .build(),
                                                                        )
                                                                )
                                                        )
                                                        .build(),
                                                )
                                            } else {
                                                assertEquals(
                                                    mapOf("k" to 1.0),
                                                    frame.snapshot.state.toMap(),
                                                )
                                            }
                                        WatchSessionStateResponse.FrameCase.DELTA -> proxy.cutAll()
                                        else -> {}
                                    }
                                    frame.frameCase
                                }
                                .toList()
                        }
                    assertEquals(
                        listOf(
                            WatchSessionStateResponse.FrameCase.SNAPSHOT,
                            WatchSessionStateResponse.FrameCase.DELTA,
                            WatchSessionStateResponse.FrameCase.SNAPSHOT,
                        ),
                        kinds,
                    )
                }
            }
        }
    }
}
