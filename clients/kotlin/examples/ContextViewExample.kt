package dev.contextengine.examples.kotlin

import dev.contextengine.client.kotlin.*
import kotlinx.coroutines.runBlocking

/**
 * The Kotlin guide's "contents since" example, verbatim between the markers (ReadmeKtTest checks
 * both agree, and runs it).
 */
object ContextViewExample {
    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking {
            val target = System.getenv("CONTEXTENGINE_TARGET") ?: "127.0.0.1:50151"
            ContextEngineClient.connect(target).use { ce ->
                val session = ce.createSession(appName = "demo", userId = "zoe")
                ce.appendEvent(session.ref, said("user", "inv-1", "Hi!"))
                // README begin
                // One view per session and agent view.
                val view = ce.contextView(session.ref, agentName = "greeter")
                val first = view.build()
                ce.appendEvent(session.ref, said("user", "inv-2", "And now?"))
                val next = view.build { setInvocationId("inv-2") } // only the new content was sent
                val counts =
                    "${first.contentsCount} ${next.contentsCount} ${next.baseContentsCount}"
                println(counts) // 1 2 0
                // README end
            }
        }
    }
}
