package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextView as JavaContextView
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.Content

/**
 * "Contents since" for one agent's view of a session, as `suspend` calls: made by
 * [ContextEngineClient.contextView], it sends [request] with `since` set to the whole contents of
 * its last answer, and returns every answer reassembled (the whole contents, `baseContentsCount`
 * 0), while only the contents after the ones the sidecar still recognises as the answer's first
 * contents cross the wire (all of them after a rewind, a compaction or another change of the
 * prefix).
 *
 * ```kotlin
 * val view = ce.contextView(session.ref, agentName = "greeter")
 * val context = view.build()                          // all the contents
 * ce.appendEvent(session.ref, said("user", "inv-2", "And then?"))
 * val next = view.build { setInvocationId("inv-2") }  // all of them, only the new one sent
 * ```
 *
 * It is the Java client's [JavaContextView] ([java]) under the Kotlin client's rules: one deadline
 * per call (the client's, or `timeout`), cancelling the coroutine cancels the RPC. It holds one
 * answer's contents (the last one received); a failed call leaves them as they were; concurrent
 * builds are fine (each reassembles against what was held when it was sent).
 */
class ContextView internal constructor(ce: ContextEngineClient, request: BuildContextRequest) :
    SinceView<JavaContextView>(request, JavaContextView(ce.java)) {
    /** The whole contents of the last answer (empty before the first build, or after [reset]). */
    val contents: List<Content>
        get() = java.contents()
}
