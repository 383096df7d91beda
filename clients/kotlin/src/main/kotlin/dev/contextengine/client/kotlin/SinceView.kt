package dev.contextengine.client.kotlin

import dev.contextengine.client.SinceView as JavaSinceView
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.BuildContextResponse
import kotlin.time.Duration
import kotlin.time.toJavaDuration
import kotlinx.coroutines.future.await

/**
 * What [ContextView] ("contents since") and [RenderedView] ("items since") share, as `suspend`
 * calls: the Java client's [JavaSinceView] ([java]) under the Kotlin client's rules, one deadline
 * per call (the client's, or `timeout`), cancelling the coroutine cancels the RPC. Each build sends
 * [request] with the view's "since" and returns the whole answer, reassembled.
 */
abstract class SinceView<V : JavaSinceView<*>>
internal constructor(
    /** What every build sends (the session, the agent, the view options), before "since". */
    val request: BuildContextRequest,
    /** The Java view underneath: what is held, the bookkeeping. */
    val java: V,
) {
    /** The last answer's digest (`""` before the first build, or after [reset]). */
    val digest: String
        get() = java.digest()

    /** `BuildContext` of [request] with "since"; the whole answer. */
    suspend fun build(timeout: Duration? = null): BuildContextResponse = send(request, timeout)

    /** [build] with this call's changes to the request (e.g. its invocation id, user content). */
    suspend fun build(
        timeout: Duration? = null,
        edit: BuildContextRequest.Builder.() -> Unit,
    ): BuildContextResponse = send(request.toBuilder().apply(edit).build(), timeout)

    /** Forgets the last answer: the next build asks for all of it. */
    fun reset() = java.reset()

    private suspend fun send(
        request: BuildContextRequest,
        timeout: Duration?,
    ): BuildContextResponse {
        // await() cancels the future when the coroutine is cancelled; the view then cancels the
        // call.
        if (timeout == null) return java.buildAsync(request).await()
        require(timeout.isPositive()) { "the timeout must be positive" }
        return java.buildAsync(request, timeout.toJavaDuration()).await()
    }
}
