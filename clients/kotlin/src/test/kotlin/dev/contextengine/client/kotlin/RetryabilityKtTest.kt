package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.RetryPolicy
import dev.contextengine.client.Retryability
import dev.contextengine.client.Sidecar
import dev.contextengine.v1.AppConfig
import dev.contextengine.v1.SessionConfig
import io.grpc.Status
import java.nio.file.Files
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * The Kotlin client retries exactly the RPCs whose proto declares an `idempotency_level`: the proto
 * text, the descriptors the Java client underneath reads ([Retryability]) and the suspend API's
 * behaviour against a closed port (UNAVAILABLE every time) must agree.
 */
class RetryabilityKtTest {
    private val rpc =
        Regex(
            """rpc (\w+)\([^)]*\) returns \([^)]*\)\s*(;|\{\s*option idempotency_level = """ +
                """(NO_SIDE_EFFECTS|IDEMPOTENT);\s*\})"""
        )

    /** (every RPC, those with an idempotency_level option), from the .proto files' text. */
    private fun declaredInProtoText(): Pair<Set<String>, Set<String>> {
        val every = sortedSetOf<String>()
        val declared = sortedSetOf<String>()
        val dir = Sidecar.REPO.resolve("proto/contextengine/v1")
        Files.list(dir).use { files ->
            for (file in files.filter { it.toString().endsWith("_service.proto") }.toList()) {
                val text = Files.readString(file)
                val service = Regex("(?m)^service (\\w+) \\{").find(text)!!.groupValues[1]
                val found = rpc.findAll(text).toList()
                assertEquals(text.split("rpc ").size - 1, found.size, file.toString())
                for (match in found) {
                    val name = "$service/${match.groupValues[1]}"
                    every.add(name)
                    if (match.groupValues[3].isNotEmpty()) declared.add(name)
                }
            }
        }
        return every to declared
    }

    @Test
    fun theRetrySetIsTheProtosDeclaration() {
        val (every, declared) = declaredInProtoText()
        assertEquals(every, Retryability.allMethods())
        assertEquals(declared, Retryability.retryableMethods())
    }

    @Test
    fun theClientRetriesExactlyTheDeclaredRpcs() = runBlocking {
        val tries = 3
        val attempts = Attempts()
        val policy =
            RetryPolicy(tries, java.time.Duration.ofMillis(1), java.time.Duration.ofMillis(1))
        ContextEngineClient.connect(
                "127.0.0.1:" + Sidecar.closedPort(),
                timeout = 20.seconds,
                retryPolicy = policy,
                interceptors = listOf(attempts),
            )
            .use { down ->
                val s = sessionRef("a", "u", "s")
                val calls: Map<String, suspend () -> Any> =
                    sortedMapOf(
                        "SessionService/CreateSession" to
                            {
                                down.createSession(appName = "a", userId = "u")
                            },
                        "SessionService/GetSession" to { down.getSession(s) },
                        "SessionService/ListSessions" to { down.listSessions { appName = "a" } },
                        "SessionService/DeleteSession" to
                            {
                                down.deleteSession(s, allowMissing = true)
                            },
                        "SessionService/AppendEvent" to
                            {
                                down.appendEvent(s, said("user", "i", "x"))
                            },
                        "SessionService/AppendEvents" to
                            {
                                down.appendEvents {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                    addEvents(said("user", "i", "x"))
                                }
                            },
                        "SessionService/ListEvents" to
                            {
                                down.listEvents {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "SessionService/RewindSession" to
                            {
                                down.rewindSession {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                    rewindBeforeInvocationId = "i"
                                }
                            },
                        "SessionService/GetAppConfig" to { down.getAppConfig { appName = "a" } },
                        "SessionService/UpdateAppConfig" to
                            {
                                down.updateAppConfig {
                                    config = AppConfig.newBuilder().setAppName("a").build()
                                }
                            },
                        "SessionService/GetSessionConfig" to
                            {
                                down.getSessionConfig {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "SessionService/UpdateSessionConfig" to
                            {
                                down.updateSessionConfig {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                    config = SessionConfig.getDefaultInstance()
                                }
                            },
                        "ContextService/BuildContext" to
                            {
                                down.buildContext {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "CompactionService/EndInvocation" to
                            {
                                down.endInvocation {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "CompactionService/Compact" to { down.compact(s) },
                        "CompactionService/PlanCompaction" to
                            {
                                down.planCompaction {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "CompactionService/CommitCompaction" to
                            {
                                down.commitCompaction {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "CompactionService/ExpandSummary" to
                            {
                                down.expandSummary {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                    summarySequence = 1
                                }
                            },
                        "CompactionService/GetCompactionStatus" to
                            {
                                down.getCompactionStatus {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "MemoryService/AddSessionToMemory" to
                            {
                                down.addSessionToMemory {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                        "MemoryService/AddEventsToMemory" to
                            {
                                down.addEventsToMemory {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                    addSequences(1)
                                }
                            },
                        "MemoryService/SearchMemory" to
                            {
                                down.searchMemory {
                                    appName = "a"
                                    userId = "u"
                                    query = "q"
                                }
                            },
                        "MemoryService/DeleteMemory" to
                            {
                                down.deleteMemory {
                                    appName = "a"
                                    userId = "u"
                                }
                            },
                        "ContextToolsService/ListContextTools" to
                            {
                                down.listContextTools { appName = "a" }
                            },
                        "ContextToolsService/CallContextTool" to
                            {
                                down.callContextTool {
                                    appName = "a"
                                    userId = "u"
                                    sessionId = "s"
                                }
                            },
                    )
                // The streams resubscribe by their own policy; GetUserState has no wrapper.
                val unwrapped =
                    setOf(
                        "SubscriptionService/SubscribeEvents",
                        "SubscriptionService/WatchSessionState",
                        "SessionService/GetUserState",
                    )
                assertEquals(Retryability.allMethods() - unwrapped, calls.keys)
                for ((name, call) in calls) {
                    val e = assertThrows<ContextEngineException>(name) { runBlocking { call() } }
                    assertEquals(Status.Code.UNAVAILABLE, e.code(), name)
                }
                assertThrows<ContextEngineException> { runBlocking { down.deleteSession(s) } }
                val expected =
                    calls.keys.associateWith {
                        if (it in Retryability.retryableMethods()) tries else 1
                    } + ("SessionService/DeleteSession" to tries + 1)
                val actual = calls.keys.associateWith { attempts.of(it.substringAfter('/')) }
                assertEquals(expected, actual)
            }
    }
}
