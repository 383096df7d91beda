package dev.contextengine.examples.kotlin

import com.google.protobuf.Struct
import com.google.protobuf.Value
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.Fingerprint
import dev.contextengine.client.kotlin.ContextEngineClient
import dev.contextengine.client.kotlin.recordedEvents
import dev.contextengine.client.kotlin.ref
import dev.contextengine.client.kotlin.said
import dev.contextengine.client.kotlin.toMap
import dev.contextengine.v1.Content
import dev.contextengine.v1.Event
import dev.contextengine.v1.FunctionCall
import dev.contextengine.v1.FunctionResponse
import dev.contextengine.v1.ModelIdentity
import dev.contextengine.v1.ModelProvider
import dev.contextengine.v1.Part
import dev.contextengine.v1.UsageMetadata
import java.util.UUID
import kotlin.system.exitProcess
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.onEach
import kotlinx.coroutines.flow.takeWhile
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking

/**
 * An agent loop around a fake model, the way a Kotlin agent uses the sidecar (the loop of
 * clients/typescript/examples/agent_loop.ts), with a subscriber coroutine following the session
 * while the agent runs:
 *
 * 1. append the user's message,
 * 2. build the context and "call the model" with it,
 * 3. append the model's tool call, run the tool, append its result, build the context again,
 * 4. append the model's answer, end the invocation (the engine may compact in the background),
 * 5. print what the subscriber saw and the context the next model call would get.
 *
 * Run it against a sidecar (`make run`): `make kotlin-example`.
 */
object AgentLoop {
    const val APP = "example-agent-loop"
    const val AGENT = "calculator"
    val MODEL: ModelIdentity =
        ModelIdentity.newBuilder()
            .setProvider(ModelProvider.MODEL_PROVIDER_GEMINI)
            .setModel("fake-model-1")
            .build()
    private val PRODUCT = Regex("""(\d+)\s*\*\s*(\d+)""")

    /** The tools the fake model may call. */
    private val TOOLS: Map<String, (Struct) -> Struct> =
        mapOf(
            "multiply" to
                { args ->
                    Struct.newBuilder()
                        .putFields(
                            "result",
                            number(
                                args.getFieldsOrThrow("a").numberValue *
                                    args.getFieldsOrThrow("b").numberValue
                            ),
                        )
                        .build()
                }
        )

    /** What the fake model said, and how many prompt tokens it saw. */
    data class Reply(val parts: List<Part>, val promptTokens: Int)

    private fun text(text: String): Part = Part.newBuilder().setText(text).build()

    private fun number(value: Double): Value = Value.newBuilder().setNumberValue(value).build()

    /**
     * The fake model: calls multiply for a question about a product, then answers with its result.
     */
    fun fakeModel(contents: List<Content>): Reply {
        val promptTokens = contents.toString().length / 4
        val last = contents.lastOrNull() ?: Content.getDefaultInstance()
        last.partsList
            .firstOrNull { it.hasFunctionResponse() }
            ?.let { part ->
                val result = part.functionResponse.response.getFieldsOrThrow("result").numberValue
                return Reply(
                    listOf(text("17 * 23 = " + Fingerprint.canonicalize(result))),
                    promptTokens,
                )
            }
        val question = last.partsList.firstOrNull { it.hasText() }?.text ?: ""
        val factors =
            PRODUCT.find(question)
                ?: return Reply(listOf(text("I can only multiply.")), promptTokens)
        val args =
            Struct.newBuilder()
                .putFields("a", number(factors.groupValues[1].toDouble()))
                .putFields("b", number(factors.groupValues[2].toDouble()))
                .build()
        val call =
            FunctionCall.newBuilder()
                .setId("call-" + UUID.randomUUID())
                .setName("multiply")
                .setArgs(args)
                .build()
        return Reply(listOf(Part.newBuilder().setFunctionCall(call).build()), promptTokens)
    }

    /** The model's final answer: its text, no tool call. */
    private fun isAnswer(event: Event): Boolean =
        event.author == AGENT &&
            event.content.role == "model" &&
            event.content.partsList.none(Part::hasFunctionCall)

    /** One line per content: text, calls and results (JSON with sorted keys). */
    fun render(content: Content): String =
        content.partsList.joinToString(" + ") { part ->
            when {
                part.hasFunctionCall() ->
                    "call ${part.functionCall.name}(${Fingerprint.canonicalize(part.functionCall.args.toMap())})"
                part.hasFunctionResponse() ->
                    "${part.functionResponse.name} -> ${Fingerprint.canonicalize(part.functionResponse.response.toMap())}"
                else -> part.text.replace("\n", " ")
            }
        }

    /** Runs the loop for one question; returns the final context's contents. */
    suspend fun agentLoop(target: String, question: String): List<Content> =
        ContextEngineClient.connect(target, timeout = 5.seconds).use { ce ->
            val session = ce.createSession(appName = APP, userId = "ada").ref
            val invocationId = "inv-" + UUID.randomUUID()
            val contextRequest = session.buildContext(AGENT).toBuilder().setModel(MODEL).build()
            coroutineScope {
                // A subscriber following the session while the agent runs (a UI, a logger...):
                // it stops by itself at the answer's event; cancelling it would end the stream.
                val following = CompletableDeferred<Unit>()
                val seen = launch {
                    val events =
                        ce.subscribeEvents(session)
                            .onEach { if (it.hasCaughtUp()) following.complete(Unit) }
                            .recordedEvents()
                            .takeWhile { !isAnswer(it.event) }
                            .toList()
                    println("subscriber saw ${events.size + 1} events, the last one the answer")
                }
                following.await()

                // 1. The user's message (the client gives it an id, so a retried append is not a
                // duplicate).
                ce.appendEvent(session, said("user", invocationId, question))

                for (turn in 0 until 4) {
                    // 2. The context for this model call, then the (fake) model call itself.
                    val context = ce.buildContext(contextRequest)
                    val reply = fakeModel(context.contentsList)
                    val answer =
                        Event.newBuilder()
                            .setAuthor(AGENT)
                            .setInvocationId(invocationId)
                            .setContent(
                                Content.newBuilder().setRole("model").addAllParts(reply.parts)
                            )
                            .setUsageMetadata(
                                UsageMetadata.newBuilder().setPromptTokenCount(reply.promptTokens)
                            )
                            .build()
                    // Nobody else wrote in between: the append is conditional on the context's
                    // sequence.
                    ce.appendEvent(session, answer, expectedLastSequence = context.lastSequence)
                    val calls = reply.parts.filter { it.hasFunctionCall() }.map { it.functionCall }
                    if (calls.isEmpty()) break
                    // 3. Run the tools and record their results.
                    ce.appendEvents(
                        session,
                        calls.map { call ->
                            val response =
                                TOOLS[call.name]?.invoke(call.args) ?: Struct.getDefaultInstance()
                            val result =
                                FunctionResponse.newBuilder()
                                    .setId(call.id)
                                    .setName(call.name)
                                    .setResponse(response)
                            Event.newBuilder()
                                .setAuthor(AGENT)
                                .setInvocationId(invocationId)
                                .setContent(
                                    Content.newBuilder()
                                        .setRole("user")
                                        .addParts(Part.newBuilder().setFunctionResponse(result))
                                )
                                .build()
                        },
                    )
                }

                // 4. The invocation is over: the engine decides in the background whether to
                // compact.
                ce.endInvocation(session, invocationId)
                seen.join()
            }

            // 5. What the next model call would see.
            val context = ce.buildContext(contextRequest)
            println(
                "context for $AGENT in session ${session.sessionId()}: ${context.contentsCount} contents, " +
                    "${context.tokenEstimate.tokens} tokens (${context.tokenEstimate.counter}), last sequence ${context.lastSequence}"
            )
            for (content in context.contentsList) println(
                "  " + content.role.padEnd(5) + " | " + render(content)
            )
            context.contentsList
        }

    @JvmStatic
    fun main(args: Array<String>) {
        var target = System.getenv("CONTEXTENGINE_TARGET") ?: "127.0.0.1:50151"
        var question = "What is 17 * 23?"
        var i = 0
        while (i + 1 < args.size) {
            when (args[i]) {
                "--target" -> target = args[++i]
                "--question" -> question = args[++i]
            }
            i += 1
        }
        try {
            runBlocking { agentLoop(target, question) }
        } catch (e: ContextEngineException) {
            System.err.println(
                "error: ${e.message} (code ${e.code()}, reason ${e.reason().ifEmpty { "none" }})"
            )
            exitProcess(1)
        }
    }
}
