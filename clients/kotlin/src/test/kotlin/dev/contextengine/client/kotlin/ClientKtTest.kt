package dev.contextengine.client.kotlin

import com.google.protobuf.util.JsonFormat
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.RetryPolicy
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.GetSessionRequest
import io.grpc.CallOptions
import io.grpc.Channel
import io.grpc.ClientCall
import io.grpc.ClientInterceptor
import io.grpc.MethodDescriptor
import io.grpc.Status
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** Counts the attempts of each RPC (by method name). */
class Attempts : ClientInterceptor {
    private val counts = ConcurrentHashMap<String, AtomicInteger>()

    fun of(method: String): Int = counts[method]?.get() ?: 0

    override fun <Q, R> interceptCall(
        method: MethodDescriptor<Q, R>,
        options: CallOptions,
        next: Channel,
    ): ClientCall<Q, R> {
        counts.computeIfAbsent(method.bareMethodName ?: "") { AtomicInteger() }.incrementAndGet()
        return next.newCall(method, options)
    }
}

/** The suspend API against real sidecars: round trips, errors, validation, retries, deadlines. */
class ClientKtTest {
    private suspend fun newSession(ce: ContextEngineClient) =
        ce.createSession(
            appName = Sidecar.uniqueApp("kotlin-client"),
            userId = "u",
            state = mapOf("plan" to "a", "n" to 2),
        )

    @Test
    fun namedParametersRoundTrip() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val session = newSession(ce)
            assertEquals(mapOf("plan" to "a", "n" to 2.0), session.state.toMap())
            val appended = ce.appendEvent(session.ref, said("user", "inv-1", "hello"))
            assertTrue(appended.stored)
            assertEquals(1, appended.event.sequence)
            // A retry of the same event (same id) is a duplicate, not a second event.
            val again = ce.appendEvent(session.ref, appended.event)
            assertTrue(again.duplicate)
            ce.appendEvents(session.ref, (1..3).map { said("agent", "inv-1", "step $it") })
            assertEquals(
                listOf(2L, 3L, 4L),
                ce.events(session.ref, afterSequence = 1, pageSize = 2).toList().map {
                    it.sequence
                },
            )
            assertEquals(
                listOf("step 3"),
                ce.getSession(session.ref, numRecentEvents = 1).eventsList.map { it.text },
            )
            // Concurrent calls on one client, structured: all complete or all fail.
            val contexts =
                (1..4)
                    .map { async { ce.buildContext(session.ref, agentName = "agent") } }
                    .awaitAll()
            assertEquals(1, contexts.map { it.fingerprint }.toSet().size)
            // The builder form for everything else.
            val listed = ce.listSessions { setAppName(session.appName).setUserId("u") }
            assertEquals(listOf(session.id), listed.sessionsList.map { it.id })
            ce.deleteSession(session.ref)
            ce.deleteSession(session.ref, allowMissing = true)
        }
    }

    @Test
    fun theClientFingerprintIsTheSidecars() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val app = Sidecar.uniqueApp("kotlin-cache")
            ce.updateAppConfig {
                JsonFormat.parser()
                    .merge(
                        """{"config": {"app_name": "$app", "context_cache_config": {"cache_intervals": 5, "ttl_seconds": 600}}}""",
                        this,
                    )
            }
            val ref = ce.createSession(appName = app, userId = "erin").ref
            val base =
                BuildContextRequest.newBuilder()
                    .also {
                        JsonFormat.parser()
                            .merge(
                                """{"model": {"provider": "MODEL_PROVIDER_GEMINI", "model": "gemini-2.0-flash"},
                       "system_instruction": {"parts": [{"text": "You report the weather."}]},
                       "tools": [{"function_declarations": [{"name": "b"}, {"name": "a"}]}, {"google_search": {}}]}""",
                                it,
                            )
                    }
                    .mergeFrom(ref.buildContext("forecaster"))
                    .build()
            var withPrefix = 0
            for (invocation in 1..3) {
                val id = "i$invocation"
                ce.appendEvent(
                    ref,
                    said("user", id, "Weather in city $invocation? café 漢字 \uD83D\uDE00"),
                )
                val request = base.toBuilder().setInvocationId(id).build()
                val context = ce.buildContext(request)
                assertTrue(context.fingerprint.isNotEmpty())
                assertEquals(
                    context.fingerprint,
                    context.clientFingerprint(request),
                    "invocation $invocation",
                )
                if (context.cacheableContentsCount > 0) withPrefix += 1
                ce.appendEvent(ref, said("forecaster", id, "Sunny, ${20 + invocation} C."))
            }
            assertTrue(withPrefix > 0, "some contexts had a cacheable prefix")
        }
    }

    @Test
    fun serverErrorsCarryCodeReasonAndMetadata() = runBlocking {
        ContextEngineClient.connect(Sidecar.shared()).use { ce ->
            val e =
                assertThrows<ContextEngineException> {
                    runBlocking {
                        ce.getSession(sessionRef(Sidecar.uniqueApp("kotlin-missing"), "u", "nope"))
                    }
                }
            assertEquals(Status.Code.NOT_FOUND, e.code())
            assertEquals("SESSION_NOT_FOUND", e.reason())
            assertEquals(ContextEngineException.DOMAIN, e.domain())
            assertEquals("SessionService/GetSession", e.method())
            assertTrue(!e.clientSide())
            val created = newSession(ce)
            val exists =
                assertThrows<ContextEngineException> {
                    runBlocking {
                        ce.createSession(
                            appName = created.appName,
                            userId = "u",
                            sessionId = created.id,
                        )
                    }
                }
            assertEquals(Status.Code.ALREADY_EXISTS, exists.code())
            assertEquals("SESSION_ALREADY_EXISTS", exists.reason())
        }
    }

    @Test
    fun missingIdsAreRejectedBeforeSending() = runBlocking {
        val attempts = Attempts()
        ContextEngineClient.connect(Sidecar.shared(), interceptors = listOf(attempts)).use { ce ->
            val e =
                assertThrows<ContextEngineException> {
                    runBlocking { ce.getSession(sessionRef("app", "u", "")) }
                }
            assertEquals(Status.Code.INVALID_ARGUMENT, e.code())
            assertEquals("MISSING_FIELD", e.reason())
            assertEquals(mapOf("field" to "session_id"), e.metadata())
            assertTrue(e.clientSide())
            val noAuthor =
                assertThrows<ContextEngineException> {
                    runBlocking { ce.appendEvent(sessionRef("app", "u", "s"), said("", "i", "x")) }
                }
            assertEquals(mapOf("field" to "event.author"), noAuthor.metadata())
            val stream =
                assertThrows<ContextEngineException> {
                    runBlocking { ce.subscribeEvents(sessionRef("app", "", "s")).toList() }
                }
            assertEquals(mapOf("field" to "user_id"), stream.metadata())
            assertEquals(
                0,
                attempts.of("GetSession") +
                    attempts.of("AppendEvent") +
                    attempts.of("SubscribeEvents"),
            )
        }
    }

    @Test
    fun aSidecarThatIsDownFailsFastAndOnlySafeCallsAreRetried() = runBlocking {
        val target = "127.0.0.1:" + Sidecar.closedPort()
        val attempts = Attempts()
        ContextEngineClient.connect(target, interceptors = listOf(attempts)).use { down ->
            val ref = sessionRef("a", "u", "s")
            val mark = TimeSource.Monotonic.markNow()
            val e = assertThrows<ContextEngineException> { runBlocking { down.getSession(ref) } }
            assertEquals(Status.Code.UNAVAILABLE, e.code())
            assertTrue(e.clientSide())
            assertTrue(
                e.message!!.contains("cannot reach the contextengine sidecar at $target"),
                e.message,
            )
            assertTrue(mark.elapsedNow() < 5.seconds, "failed after ${mark.elapsedNow()}")
            assertEquals(4, attempts.of("GetSession"), "a read is retried")
            assertThrows<ContextEngineException> {
                runBlocking { down.createSession(appName = "a", userId = "u") }
            }
            assertEquals(1, attempts.of("CreateSession"), "a create is never retried")
            assertThrows<ContextEngineException> { runBlocking { down.compact(ref) } }
            assertEquals(1, attempts.of("Compact"))
            assertThrows<ContextEngineException> { runBlocking { down.deleteSession(ref) } }
            assertEquals(1, attempts.of("DeleteSession"))
            assertThrows<ContextEngineException> {
                runBlocking { down.deleteSession(ref, allowMissing = true) }
            }
            assertEquals(
                5,
                attempts.of("DeleteSession"),
                "allow_missing makes a delete safe to retry",
            )
            assertThrows<ContextEngineException> {
                runBlocking { down.appendEvent(ref, said("user", "i", "x")) }
            }
            assertEquals(4, attempts.of("AppendEvent"), "an append (its id given first) is retried")
        }
    }

    @Test
    fun oneDeadlineCoversTheRetries() = runBlocking {
        val many =
            RetryPolicy(1000, java.time.Duration.ofMillis(100), java.time.Duration.ofMillis(100))
        val attempts = Attempts()
        ContextEngineClient.connect(
                "127.0.0.1:" + Sidecar.closedPort(),
                timeout = 800.milliseconds,
                retryPolicy = many,
                interceptors = listOf(attempts),
            )
            .use { down ->
                val mark = TimeSource.Monotonic.markNow()
                val e =
                    assertThrows<ContextEngineException> {
                        runBlocking {
                            down.getSession(
                                GetSessionRequest.newBuilder()
                                    .setAppName("a")
                                    .setUserId("u")
                                    .setSessionId("s")
                                    .build()
                            )
                        }
                    }
                val elapsed = mark.elapsedNow()
                assertTrue(
                    e.code() == Status.Code.UNAVAILABLE ||
                        e.code() == Status.Code.DEADLINE_EXCEEDED,
                    e.toString(),
                )
                assertTrue(elapsed < 3.seconds, "after $elapsed")
                assertTrue(
                    attempts.of("GetSession") in 2..19,
                    "attempts: ${attempts.of("GetSession")}",
                )
            }
    }

    @Test
    fun aHungServerMeetsTheDeadlineAndWithTimeoutCancelsTheCall() = runBlocking {
        Sidecar.Silent().use { silent ->
            ContextEngineClient.connect(silent.target(), timeout = 700.milliseconds).use { hung ->
                val ref = sessionRef("a", "u", "s")
                val mark = TimeSource.Monotonic.markNow()
                val e =
                    assertThrows<ContextEngineException> { runBlocking { hung.getSession(ref) } }
                assertEquals(Status.Code.DEADLINE_EXCEEDED, e.code())
                assertTrue(
                    mark.elapsedNow() in 650.milliseconds..3.seconds,
                    "after ${mark.elapsedNow()}",
                )
                // A per-call deadline.
                val m1 = TimeSource.Monotonic.markNow()
                assertThrows<ContextEngineException> {
                    runBlocking { hung.getSession(ref, timeout = 200.milliseconds) }
                }
                assertTrue(m1.elapsedNow() < 650.milliseconds, "after ${m1.elapsedNow()}")
                // The coroutine's own timeout cancels the RPC (TimeoutCancellationException, not
                // ours).
                val m2 = TimeSource.Monotonic.markNow()
                assertThrows<TimeoutCancellationException> {
                    runBlocking { withTimeout(150.milliseconds) { hung.getSession(ref) } }
                }
                assertTrue(m2.elapsedNow() < 650.milliseconds, "after ${m2.elapsedNow()}")
                // So does cancelling the caller's job.
                val job = launch { hung.getSession(ref, timeout = 30.seconds) }
                delay(100)
                val m3 = TimeSource.Monotonic.markNow()
                job.cancel()
                job.join()
                assertTrue(m3.elapsedNow() < 1.seconds)
            }
        }
    }
}
