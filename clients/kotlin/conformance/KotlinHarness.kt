package dev.contextengine.conformance

import com.google.protobuf.Message
import dev.contextengine.client.kotlin.ContextEngineClient
import dev.contextengine.client.kotlin.FollowOptions
import dev.contextengine.client.kotlin.sessionRef
import dev.contextengine.v1.CallContextToolRequest
import java.lang.reflect.Method
import kotlin.coroutines.intrinsics.suspendCoroutineUninterceptedOrReturn
import kotlin.time.toKotlinDuration
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull

/**
 * The Kotlin conformance harness: each op of the driver (clients/conformance/driver.py) through
 * [ContextEngineClient] (suspend calls, followed flows), served by the Java harness's JSON-lines
 * loop (the protocol is in clients/conformance/README.md).
 */
class KotlinHarness(target: String) : Harness.Client {
    private val client = ContextEngineClient.connect(target)
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** The client's `suspend fun <rpc>(request, timeout)` (its JVM name has a suffix). */
    private fun method(rpc: String, request: Message): Method {
        val name = rpc.replaceFirstChar { it.lowercase() }
        return ContextEngineClient::class.java.methods.firstOrNull {
            it.name.substringBefore('-') == name &&
                it.parameterCount == 3 &&
                it.parameterTypes[0] == request.javaClass
        } ?: throw UnsupportedOperationException("ContextEngineClient has no method $name")
    }

    override fun call(rpc: String, request: Message, timeout: java.time.Duration): Message =
        runBlocking {
            val t = timeout.toKotlinDuration()
            if (request is CallContextToolRequest) {
                // Through the helper a model loop uses, as every harness does.
                val r = request
                client
                    .contextTools(
                        sessionRef(r.appName, r.userId, r.sessionId),
                        agentName = r.agentName,
                        branch = if (r.hasBranch()) r.branch else null,
                        isolationScope = if (r.hasIsolationScope()) r.isolationScope else null,
                    )
                    .call(r.call, r.invocationId, t)
            } else {
                val m = method(rpc, request)
                suspendCoroutineUninterceptedOrReturn<Any?> {
                    Harness.invoke(m, client, request, t, it)
                }
                    as Message
            }
        }

    override fun open(rpc: String, request: Message): Harness.Frames {
        // The client reopens broken streams by itself; the driver's resume is a new call.
        val name = rpc.replaceFirstChar { it.lowercase() }
        val m =
            ContextEngineClient::class
                .java
                .getMethod(name, request.javaClass, FollowOptions::class.java)
        @Suppress("UNCHECKED_CAST")
        val flow =
            Harness.invoke(m, client, request, FollowOptions(maxFailures = 5)) as Flow<Message>
        val queue = Channel<Result<Message?>>(Channel.UNLIMITED)
        val job = scope.launch {
            val end = runCatching {
                flow.collect { queue.send(Result.success(it)) }
                null
            }
            queue.send(end)
        }
        return object : Harness.Frames {
            override fun poll(timeout: java.time.Duration): Message? = runBlocking {
                val next =
                    withTimeoutOrNull(timeout.toMillis().coerceAtLeast(1)) { queue.receive() }
                        ?: return@runBlocking null
                next.getOrThrow() ?: throw NoSuchElementException("the stream ended")
            }

            override fun close() = job.cancel()
        }
    }

    override fun close() {
        scope.cancel()
        client.close()
    }

    companion object {
        @JvmStatic fun main(args: Array<String>) = Harness { KotlinHarness(it) }.serve()
    }
}
