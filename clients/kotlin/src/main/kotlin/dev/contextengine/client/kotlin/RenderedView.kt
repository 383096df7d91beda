package dev.contextengine.client.kotlin

import com.google.gson.JsonObject
import dev.contextengine.client.RenderedView as JavaRenderedView
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.RenderFormat
import kotlin.time.Duration

/**
 * "Items since" for one agent's view of a session rendered for a provider, as `suspend` calls: made
 * by [ContextEngineClient.renderedView], it sends [request] rendered as [format] with
 * `render.since` set to the whole items of its last rendering, and returns every answer reassembled
 * (the whole rendering, `baseItemsCount` 0), while only the items after the ones the sidecar still
 * recognises as the first ones cross the wire.
 *
 * ```kotlin
 * val view = ce.renderedView(session.ref, RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES, agentName = "planner")
 * val part = view.requestPart()                      // all the items
 * ce.appendEvent(session.ref, said("user", "i2", "And then?"))
 * val next = view.requestPart()                      // all of them, only the new ones sent
 * ```
 *
 * It is the Java client's [JavaRenderedView] ([java]) under the Kotlin client's rules (see
 * [SinceView]). It holds one rendering's items (the last one received); a failed call leaves them
 * as they were.
 */
class RenderedView
internal constructor(ce: ContextEngineClient, request: BuildContextRequest, format: RenderFormat) :
    SinceView<JavaRenderedView>(request, JavaRenderedView(ce.java, format)) {
    /** The format every build asks for (the request's own `render` is replaced). */
    val format: RenderFormat
        get() = java.format()

    /**
     * The whole items of the last rendering, as JSON texts (empty before the first build, or after
     * [reset]).
     */
    val items: List<String>
        get() = java.items()

    /** [build]'s whole rendering as the provider's request part ([requestPart]). */
    suspend fun requestPart(
        timeout: Duration? = null,
        edit: BuildContextRequest.Builder.() -> Unit = {},
    ): JsonObject = build(timeout, edit).rendered.requestPart()
}
