package dev.contextengine.client.kotlin

import com.google.gson.JsonElement
import com.google.gson.JsonObject
import dev.contextengine.client.RequestPart
import dev.contextengine.client.SessionRef
import dev.contextengine.v1.BuildContextRequest
import dev.contextengine.v1.Content
import dev.contextengine.v1.ModelIdentity
import dev.contextengine.v1.RenderFormat
import dev.contextengine.v1.RenderedContext
import kotlin.time.Duration
import kotlinx.coroutines.future.await

/**
 * This rendering as the provider's own request part, a Gson [JsonObject] ([RequestPart]):
 * `messages` (OpenAI Chat Completions), `input` and `instructions` (Responses API), `messages` and
 * `system` (Anthropic Messages). [held]: the items of an earlier part, when `baseItemsCount` says
 * some come first. IllegalArgumentException for no rendering, too few held items, or an item that
 * is not JSON.
 */
fun RenderedContext.requestPart(held: List<JsonElement> = emptyList()): JsonObject =
    RequestPart.of(this, held)

/**
 * The context for an agent's next model call as a provider's request part: [request] sent with
 * `render` set to the whole rendering of [format] (the Java client's `renderContext`: an answer
 * without the rendering, from a sidecar older than renderings, is `UNIMPLEMENTED`). Add the `model`
 * (and Anthropic's `max_tokens`, tools, ...) and send its `toString()` as the body.
 */
suspend fun ContextEngineClient.renderContext(
    request: BuildContextRequest,
    format: RenderFormat,
    timeout: Duration? = null,
): JsonObject {
    val client = if (timeout == null) this else this.withTimeout(timeout)
    // await() cancels the future when the coroutine is cancelled; the client then cancels the call.
    return client.java.renderContextAsync(request, format).await()
}

/** [renderContext] of `agentName`'s view of a session, with its system instruction and model. */
suspend fun ContextEngineClient.renderContext(
    session: SessionRef,
    format: RenderFormat,
    agentName: String = "",
    systemInstruction: Content? = null,
    model: ModelIdentity? = null,
    timeout: Duration? = null,
): JsonObject =
    renderContext(viewRequest(session, agentName, systemInstruction, model), format, timeout)

/**
 * A [RenderedView] of `agentName`'s view of a session rendered as [format] ("items since"): its
 * `build()` returns the whole rendering while only the new items cross the wire.
 */
fun ContextEngineClient.renderedView(
    session: SessionRef,
    format: RenderFormat,
    agentName: String = "",
    systemInstruction: Content? = null,
    model: ModelIdentity? = null,
): RenderedView = renderedView(viewRequest(session, agentName, systemInstruction, model), format)

/** A [RenderedView] of the view `request` describes (its `render` is the view's to set). */
fun ContextEngineClient.renderedView(
    request: BuildContextRequest,
    format: RenderFormat,
): RenderedView = RenderedView(this, request, format)

private fun viewRequest(
    session: SessionRef,
    agentName: String,
    systemInstruction: Content?,
    model: ModelIdentity?,
): BuildContextRequest =
    session
        .buildContext(agentName)
        .toBuilder()
        .also { b ->
            if (systemInstruction != null) b.setSystemInstruction(systemInstruction)
            if (model != null) b.setModel(model)
        }
        .build()
