package dev.contextengine.examples.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.kotlin.*
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking

/**
 * The Kotlin guide's first example, verbatim between the markers (ReadmeKtTest checks both agree).
 */
object ReadmeExample {
    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking {
            // README begin
            val target = System.getenv("CONTEXTENGINE_TARGET") ?: "127.0.0.1:50151"
            // timeout: the whole call, retries included
            ContextEngineClient.connect(target, timeout = 5.seconds).use { ce ->
                val session = ce.createSession(appName = "demo", userId = "zoe")

                ce.appendEvent(session.ref, said("user", "inv-1", "Hi!"))
                val context = ce.buildContext(session.ref, agentName = "greeter")
                println("${context.contentsCount} ${context.lastSequence}") // 1 1

                try {
                    ce.getSession(sessionRef("demo", "zoe", "nope"))
                } catch (e: ContextEngineException) {
                    println("${e.code()} ${e.reason()}") // NOT_FOUND SESSION_NOT_FOUND
                }

                // A followed flow: reopened from the last cursor when the connection drops;
                // first() (take, cancelling the coroutine) ends the stream on the server.
                coroutineScope {
                    launch {
                        val next =
                            ce.subscribeEvents(session.ref, afterSequence = 1)
                                .recordedEvents()
                                .first()
                        println(next.event.text) // Again!
                    }
                    ce.appendEvent(session.ref, said("user", "inv-1", "Again!"))
                }
            }
            // README end
        }
    }
}
