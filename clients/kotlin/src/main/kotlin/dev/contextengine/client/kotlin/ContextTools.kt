package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextTools as JavaContextTools
import dev.contextengine.client.SessionRef
import dev.contextengine.v1.CallContextToolResponse
import dev.contextengine.v1.Event
import dev.contextengine.v1.FunctionCall
import dev.contextengine.v1.FunctionResponse
import dev.contextengine.v1.ListContextToolsResponse
import java.util.concurrent.atomic.AtomicReference
import kotlin.time.Duration

/**
 * The context tools of one agent in one session, as `suspend` calls: made by
 * [ContextEngineClient.contextTools]. The engine declares and runs the seven tools, so this only
 * carries the session and the agent: [declarations] gives the tools in a provider's shape, [answer]
 * runs a google-genai style [FunctionCall] and returns the [FunctionResponse] to append, [run] runs
 * a call an OpenAI or Anthropic model made (its name and JSON arguments) and returns the result to
 * send back. Append the call before it runs and its answer after ([callEvent], [answerEvent]): the
 * engine records the answer's edit when it is appended. The app's (or the session's)
 * `ContextToolsConfig.enabled` must be set.
 *
 * ```kotlin
 * val tools = ce.contextTools(session.ref, agentName = "assistant")
 * val declared = tools.declarations(Format.ANTHROPIC) // dev.contextengine.client.ContextTools.Format
 * val result = tools.run("context_hide", mapOf("first" to 2, "last" to 3), callId = "toolu_1", invocationId = "inv-2")
 * ```
 *
 * It is the Java client's [JavaContextTools] ([java]) under the Kotlin client's rules: one deadline
 * per call (the client's, or `timeout`), cancelling the coroutine cancels the RPC;
 * `CallContextTool` is never retried (a call may append a summary), `ListContextTools` is. The
 * declarations are read once and kept (they are the same for every app).
 */
class ContextTools
internal constructor(
    private val ce: ContextEngineClient,
    /** The session. */
    val session: SessionRef,
    /** The agent whose context the tools look at and edit. */
    val agentName: String,
    /** The agent's branch (null: none). */
    val branch: String?,
    /** The agent's isolation scope (null: none). */
    val isolationScope: String?,
) {
    companion object {
        /** The context tools' names. */
        val NAMES: Set<String> = JavaContextTools.NAMES

        /** Whether `name` is a context tool's. */
        fun handles(name: String): Boolean = JavaContextTools.handles(name)

        /** A google-genai style call of `name` with `arguments` (JSON values), id `callId`. */
        fun functionCall(name: String, arguments: Map<String, *>, callId: String): FunctionCall =
            JavaContextTools.functionCall(name, arguments, callId)

        /** A call whose arguments are a JSON object's text (as OpenAI models send them). */
        fun functionCall(name: String, argumentsJson: String, callId: String): FunctionCall =
            JavaContextTools.functionCall(name, argumentsJson, callId)

        /** The model's event that makes `call` (append it before the call runs). */
        fun callEvent(author: String, invocationId: String, call: FunctionCall): Event =
            JavaContextTools.callEvent(author, invocationId, call)

        /** The event that answers a call with `response` (append it after the call ran). */
        fun answerEvent(author: String, invocationId: String, response: FunctionResponse): Event =
            JavaContextTools.answerEvent(author, invocationId, response)
    }

    /** The Java helper underneath: the same session and agent, blocking and future calls. */
    val java: JavaContextTools =
        JavaContextTools(
            ce.java,
            session.appName(),
            session.userId(),
            session.sessionId(),
            agentName,
            branch,
            isolationScope,
        )

    private val listed = AtomicReference<ListContextToolsResponse?>(null)

    /**
     * The tools in a provider's shape, as JSON objects (google-genai `FunctionDeclaration`s by
     * default).
     */
    suspend fun declarations(
        format: JavaContextTools.Format = JavaContextTools.Format.GENAI,
        timeout: Duration? = null,
    ): List<Map<String, Any?>> {
        val known =
            listed.get()
                ?: ce.listContextTools(session.appName(), session.userId(), timeout).also {
                    listed.compareAndSet(null, it)
                }
        return JavaContextTools.declarations(known, format)
    }

    /**
     * The engine's whole answer to a call: the function response, the edits it makes once appended,
     * the refusal.
     */
    suspend fun call(
        call: FunctionCall,
        invocationId: String = "",
        timeout: Duration? = null,
    ): CallContextToolResponse = ce.callContextTool(java.request(call, invocationId), timeout)

    /** The [FunctionResponse] answering `call` (append it in the answer event). */
    suspend fun answer(
        call: FunctionCall,
        invocationId: String = "",
        timeout: Duration? = null,
    ): FunctionResponse = call(call, invocationId, timeout).response

    /**
     * Runs a call an OpenAI model made, its arguments the JSON text it sends (`""`: none), and
     * returns the result to send back (JSON values, whole numbers as `Long`). Arguments that are
     * not a JSON object are an [IllegalArgumentException]; arguments of the wrong shape for the
     * tool are answered to the model (`ok` false).
     */
    suspend fun run(
        name: String,
        arguments: String,
        callId: String = "",
        invocationId: String = "",
        timeout: Duration? = null,
    ): Map<String, Any?> =
        JavaContextTools.json(
            answer(JavaContextTools.functionCall(name, arguments, callId), invocationId, timeout)
                .response
        )

    /** [run] with the arguments as JSON values (an Anthropic `tool_use` block's `input`). */
    suspend fun run(
        name: String,
        arguments: Map<String, Any?>,
        callId: String = "",
        invocationId: String = "",
        timeout: Duration? = null,
    ): Map<String, Any?> =
        JavaContextTools.json(
            answer(JavaContextTools.functionCall(name, arguments, callId), invocationId, timeout)
                .response
        )

    override fun toString(): String = "ContextTools($session, agent $agentName)"
}
