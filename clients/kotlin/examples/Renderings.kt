package dev.contextengine.examples.kotlin

import com.google.gson.JsonObject
import com.google.gson.JsonParser
import dev.contextengine.client.kotlin.*
import dev.contextengine.v1.Content
import dev.contextengine.v1.Part
import dev.contextengine.v1.RenderFormat
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import kotlinx.coroutines.future.await
import kotlinx.coroutines.runBlocking

/**
 * The Kotlin guide's "Renderings" example: one session's context rendered for OpenAI Chat
 * Completions, the OpenAI Responses API and Anthropic Messages, each sent with plain [HttpClient]
 * to the provider (verbatim between the markers; ReadmeKtTest checks both agree, RenderingsKtTest
 * runs it against a local fake of both APIs).
 *
 * With a sidecar running (`make run`): set `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` and the API
 * keys (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), or point the URLs at any compatible server.
 */
object Renderings {
    private val env: Map<String, String> = System.getenv()
    private val openAiBaseUrl = env["OPENAI_BASE_URL"] ?: "https://api.openai.com/v1"
    private val anthropicBaseUrl = env["ANTHROPIC_BASE_URL"] ?: "https://api.anthropic.com"
    private val http: HttpClient = HttpClient.newHttpClient()

    /**
     * POSTs [body] as JSON with [headers]; the answer's JSON, or IllegalStateException naming the
     * status.
     */
    suspend fun post(
        url: String,
        body: JsonObject,
        headers: Map<String, String> = emptyMap(),
    ): JsonObject {
        val request =
            HttpRequest.newBuilder(URI.create(url))
                .header("content-type", "application/json")
                .apply { headers.forEach { (name, value) -> header(name, value) } }
                .POST(HttpRequest.BodyPublishers.ofString(body.toString()))
                .build()
        val answer = http.sendAsync(request, HttpResponse.BodyHandlers.ofString()).await()
        check(answer.statusCode() == 200) {
            "HTTP ${answer.statusCode()} from $url: ${answer.body()}"
        }
        return JsonParser.parseString(answer.body()).asJsonObject
    }

    /** POSTs an OpenAI request (Chat Completions or Responses: [path]). */
    suspend fun openAi(path: String, body: JsonObject): JsonObject =
        post(
            openAiBaseUrl + path,
            body,
            mapOf("authorization" to "Bearer " + (env["OPENAI_API_KEY"] ?: "-")),
        )

    /** POSTs an Anthropic Messages request. */
    suspend fun anthropic(body: JsonObject): JsonObject =
        post(
            "$anthropicBaseUrl/v1/messages",
            body,
            mapOf(
                "x-api-key" to (env["ANTHROPIC_API_KEY"] ?: "-"),
                "anthropic-version" to "2023-06-01",
            ),
        )

    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking {
            ContextEngineClient.connect(env["CONTEXTENGINE_TARGET"] ?: "127.0.0.1:50151").use { ce
                ->
                val session = ce.createSession(appName = "renderings-demo", userId = "ann")
                ce.appendEvent(session.ref, said("user", "i1", "A weekend in Lisbon, please."))
                ce.appendEvent(session.ref, said("planner", "i1", "Friday to Sunday, by train."))
                ce.appendEvent(session.ref, said("user", "i2", "And where do we stay?"))
                // README begin
                val system =
                    Content.newBuilder()
                        .addParts(Part.newBuilder().setText("You plan trips."))
                        .build()

                // The same context as each provider's request part (a Gson JsonObject): add the
                // model, send it.
                val chat =
                    ce.renderContext(
                        session.ref,
                        RenderFormat.RENDER_FORMAT_OPENAI_CHAT,
                        agentName = "planner",
                        systemInstruction = system,
                    )
                chat.addProperty("model", "gpt-4o")
                val completion = openAi("/chat/completions", chat)
                println(
                    "OpenAI chat: " +
                        completion["choices"]
                            .asJsonArray[0]
                            .asJsonObject["message"]
                            .asJsonObject["content"]
                            .asString
                )

                val input =
                    ce.renderContext(
                        session.ref,
                        RenderFormat.RENDER_FORMAT_OPENAI_RESPONSES,
                        agentName = "planner",
                        systemInstruction = system,
                    )
                input.addProperty("model", "gpt-4o")
                val response = openAi("/responses", input)
                val output =
                    response["output"]
                        .asJsonArray[0]
                        .asJsonObject["content"]
                        .asJsonArray[0]
                        .asJsonObject
                println("OpenAI responses: " + output["text"].asString)

                // A view follows the session: every build after the first sends only the new items.
                val claude =
                    ce.renderedView(
                        session.ref,
                        RenderFormat.RENDER_FORMAT_ANTHROPIC_MESSAGES,
                        agentName = "planner",
                        systemInstruction = system,
                    )
                for (question in listOf("Near the river?", "For two nights?")) {
                    val messages = claude.requestPart()
                    messages.addProperty("model", "claude-sonnet-4-5")
                    messages.addProperty("max_tokens", 1024)
                    val answer =
                        anthropic(messages)["content"].asJsonArray[0].asJsonObject["text"].asString
                    println("Anthropic: $answer")
                    ce.appendEvent(session.ref, said("planner", "i2", answer))
                    ce.appendEvent(session.ref, said("user", "i3", question)) // the next turn
                }
                println("Anthropic, held: ${claude.items.size} items")
                // README end
            }
        }
    }
}
