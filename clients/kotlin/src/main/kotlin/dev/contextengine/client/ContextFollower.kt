package dev.contextengine.client

import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.BuildContextResponse
import dev.contextengine.v1.Content
import kotlin.time.Duration
import kotlin.time.toJavaDuration
import kotlinx.coroutines.future.await

/**
 * "Contents since" for one agent's view of a session, as `suspend` calls: made by
 * [ContextEngine.contextView], it sends [request] with `since` set to the whole contents of its
 * last answer, and returns every answer reassembled (the whole contents, `baseContentsCount` 0),
 * while only the contents after the ones the sidecar still recognises as the answer's first
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
 * It is the Java client's [ContextView] ([java]) under the Kotlin client's rules: one deadline
 * per call (the client's, or `timeout`), cancelling the coroutine cancels the RPC. It holds one
 * answer's contents (the last one received); a failed call leaves them as they were; concurrent
 * builds are fine (each reassembles against what was held when it was sent).
 */
class ContextFollower internal constructor(
    private val ce: ContextEngine,
    /** What every build sends (the session, the agent, the view options), before `since`. */
    val request: BuildContextRequest,
) {
    /** The Java view underneath: what is held ([ContextView.contents], [ContextView.digest]). */
    val java: ContextView = ContextView(ce.java)

    /** The whole contents of the last answer (empty before the first build, or after [reset]). */
    val contents: List<Content> get() = java.contents()

    /** The last answer's `contentsDigest` (`""` before the first build, or after [reset]). */
    val digest: String get() = java.digest()

    /** `BuildContext` of [request] with `since`; the answer with the whole contents. */
    suspend fun build(timeout: Duration? = null): BuildContextResponse = send(request, timeout)

    /** [build] with this call's changes to the request (e.g. its invocation id, user content). */
    suspend fun build(timeout: Duration? = null, edit: BuildContextRequest.Builder.() -> Unit): BuildContextResponse =
        send(request.toBuilder().apply(edit).build(), timeout)

    /** Forgets the last answer: the next build asks for all the contents. */
    fun reset() = java.reset()

    private suspend fun send(request: BuildContextRequest, timeout: Duration?): BuildContextResponse {
        // await() cancels the future when the coroutine is cancelled; the view then cancels the call.
        if (timeout == null) return java.buildAsync(request).await()
        require(timeout.isPositive()) { "the timeout must be positive" }
        return java.buildAsync(request, timeout.toJavaDuration()).await()
    }
}
