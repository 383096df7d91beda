package dev.contextengine.conformance

import com.google.protobuf.InvalidProtocolBufferException
import com.google.protobuf.Message
import com.google.protobuf.util.JsonFormat
import dev.contextengine.client.ContextEngine
import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.FollowOptions
import dev.contextengine.client.sessionRef
import dev.contextengine.conformance.Match.ScenarioError
import dev.contextengine.conformance.Match.StepFailure
import dev.contextengine.v1.*
import java.io.PrintStream
import java.nio.file.Files
import java.nio.file.Path
import java.security.SecureRandom
import java.util.HexFormat
import kotlin.system.exitProcess
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull

/**
 * The Kotlin conformance runner: the shared YAML scenarios through [ContextEngine] (suspend calls,
 * followed flows), with the Java runner's scenario loading, shape checks and matcher (its test jar)
 * and the same report lines as every runner.
 *
 * ```
 * java -cp ... dev.contextengine.conformance.KotlinRunner --target 127.0.0.1:50151 [--only TEXT]...
 *     [--report FILE] SCENARIO_DIR
 * ```
 */
class KotlinRunner(
    private val client: ContextEngine,
    private val emit: (Map<String, Any?>) -> Unit,
) {
    companion object {
        const val RUNNER = "kotlin"
        private const val DEFAULT_CALL_TIMEOUT_MS = 10_000L
        private const val DEFAULT_FRAME_TIMEOUT_MS = 5_000L
        private const val DEFAULT_QUIET_MS = 300L
        private const val DEFAULT_POLL_TIMEOUT_MS = 15_000L
        private const val DEFAULT_POLL_INTERVAL_MS = 50L
        private val SERVICES =
            setOf(
                "SessionService",
                "ContextService",
                "CompactionService",
                "SubscriptionService",
                "MemoryService",
                "ContextToolsService",
            )
        private val STEP_KINDS =
            listOf(
                "call",
                "poll",
                "subscribe",
                "expect_frames",
                "expect_no_frames",
                "expect_stream_error",
                "disconnect",
                "resume",
                "sleep_ms",
            )
        private val PARSER = JsonFormat.parser()
        private val RANDOM = SecureRandom()

        private class Rpc(
            val builder: () -> Message.Builder,
            val invoke: suspend (ContextEngine, Message, Duration) -> Message,
        )

        private val RPCS: Map<String, Rpc> =
            mapOf(
                "CreateSession" to
                    Rpc({ CreateSessionRequest.newBuilder() }) { ce, r, t ->
                        ce.createSession(r as CreateSessionRequest, t)
                    },
                "GetSession" to
                    Rpc({ GetSessionRequest.newBuilder() }) { ce, r, t ->
                        ce.getSession(r as GetSessionRequest, t)
                    },
                "ListSessions" to
                    Rpc({ ListSessionsRequest.newBuilder() }) { ce, r, t ->
                        ce.listSessions(r as ListSessionsRequest, t)
                    },
                "DeleteSession" to
                    Rpc({ DeleteSessionRequest.newBuilder() }) { ce, r, t ->
                        ce.deleteSession(r as DeleteSessionRequest, t)
                    },
                "AppendEvent" to
                    Rpc({ AppendEventRequest.newBuilder() }) { ce, r, t ->
                        ce.appendEvent(r as AppendEventRequest, t)
                    },
                "AppendEvents" to
                    Rpc({ AppendEventsRequest.newBuilder() }) { ce, r, t ->
                        ce.appendEvents(r as AppendEventsRequest, t)
                    },
                "ListEvents" to
                    Rpc({ ListEventsRequest.newBuilder() }) { ce, r, t ->
                        ce.listEvents(r as ListEventsRequest, t)
                    },
                "RewindSession" to
                    Rpc({ RewindSessionRequest.newBuilder() }) { ce, r, t ->
                        ce.rewindSession(r as RewindSessionRequest, t)
                    },
                "GetAppConfig" to
                    Rpc({ GetAppConfigRequest.newBuilder() }) { ce, r, t ->
                        ce.getAppConfig(r as GetAppConfigRequest, t)
                    },
                "UpdateAppConfig" to
                    Rpc({ UpdateAppConfigRequest.newBuilder() }) { ce, r, t ->
                        ce.updateAppConfig(r as UpdateAppConfigRequest, t)
                    },
                "GetSessionConfig" to
                    Rpc({ GetSessionConfigRequest.newBuilder() }) { ce, r, t ->
                        ce.getSessionConfig(r as GetSessionConfigRequest, t)
                    },
                "UpdateSessionConfig" to
                    Rpc({ UpdateSessionConfigRequest.newBuilder() }) { ce, r, t ->
                        ce.updateSessionConfig(r as UpdateSessionConfigRequest, t)
                    },
                "BuildContext" to
                    Rpc({ BuildContextRequest.newBuilder() }) { ce, r, t ->
                        ce.buildContext(r as BuildContextRequest, t)
                    },
                "EndInvocation" to
                    Rpc({ EndInvocationRequest.newBuilder() }) { ce, r, t ->
                        ce.endInvocation(r as EndInvocationRequest, t)
                    },
                "Compact" to
                    Rpc({ CompactRequest.newBuilder() }) { ce, r, t ->
                        ce.compact(r as CompactRequest, t)
                    },
                "PlanCompaction" to
                    Rpc({ PlanCompactionRequest.newBuilder() }) { ce, r, t ->
                        ce.planCompaction(r as PlanCompactionRequest, t)
                    },
                "CommitCompaction" to
                    Rpc({ CommitCompactionRequest.newBuilder() }) { ce, r, t ->
                        ce.commitCompaction(r as CommitCompactionRequest, t)
                    },
                "ExpandSummary" to
                    Rpc({ ExpandSummaryRequest.newBuilder() }) { ce, r, t ->
                        ce.expandSummary(r as ExpandSummaryRequest, t)
                    },
                "GetCompactionStatus" to
                    Rpc({ GetCompactionStatusRequest.newBuilder() }) { ce, r, t ->
                        ce.getCompactionStatus(r as GetCompactionStatusRequest, t)
                    },
                "AddSessionToMemory" to
                    Rpc({ AddSessionToMemoryRequest.newBuilder() }) { ce, r, t ->
                        ce.addSessionToMemory(r as AddSessionToMemoryRequest, t)
                    },
                "AddEventsToMemory" to
                    Rpc({ AddEventsToMemoryRequest.newBuilder() }) { ce, r, t ->
                        ce.addEventsToMemory(r as AddEventsToMemoryRequest, t)
                    },
                "SearchMemory" to
                    Rpc({ SearchMemoryRequest.newBuilder() }) { ce, r, t ->
                        ce.searchMemory(r as SearchMemoryRequest, t)
                    },
                "DeleteMemory" to
                    Rpc({ DeleteMemoryRequest.newBuilder() }) { ce, r, t ->
                        ce.deleteMemory(r as DeleteMemoryRequest, t)
                    },
                "ListContextTools" to
                    Rpc({ ListContextToolsRequest.newBuilder() }) { ce, r, t ->
                        ce.listContextTools(r as ListContextToolsRequest, t)
                    },
                // Through the helper a model loop uses, as the Python client's runner does.
                "CallContextTool" to
                    Rpc({ CallContextToolRequest.newBuilder() }) { ce, r, t ->
                        val q = r as CallContextToolRequest
                        ce.contextTools(
                                sessionRef(q.appName, q.userId, q.sessionId),
                                agentName = q.agentName,
                                branch = if (q.hasBranch()) q.branch else null,
                                isolationScope =
                                    if (q.hasIsolationScope()) q.isolationScope else null,
                            )
                            .call(q.call, q.invocationId, t)
                    },
            )

        private fun rpc(name: Any?, stream: Boolean): String {
            if (name !is String)
                throw ScenarioError("a method name is a string, not " + Match.show(name))
            val parts = name.split("/", limit = 2)
            if (parts[0] !in SERVICES)
                throw ScenarioError("unknown service " + Match.show(parts[0]))
            if (parts.size < 2) throw ScenarioError("unknown method " + Match.show(name))
            val isStream = parts[1] == "SubscribeEvents" || parts[1] == "WatchSessionState"
            if (isStream != stream)
                throw ScenarioError(
                    name + if (stream) " is not a stream" else " is a stream: use subscribe"
                )
            if (!stream && parts[1] !in RPCS)
                throw ScenarioError("unknown method " + Match.show(name))
            return parts[1]
        }

        private fun <B : Message.Builder> parse(builder: B, json: Any?): Message {
            try {
                PARSER.merge(Match.GSON.toJson(json ?: emptyMap<String, Any>()), builder)
                return builder.build()
            } catch (e: InvalidProtocolBufferException) {
                throw ScenarioError(
                    "request does not parse as " + builder.descriptorForType.name + ": " + e.message
                )
            } catch (e: RuntimeException) {
                throw ScenarioError(
                    "request does not parse as " + builder.descriptorForType.name + ": " + e.message
                )
            }
        }

        private fun millis(value: Any?, fallback: Long): Long =
            (value as Number?)?.toLong() ?: fallback

        @Suppress("UNCHECKED_CAST")
        private fun map(value: Any?): Map<String, Any?> = value as Map<String, Any?>

        @Suppress("UNCHECKED_CAST") private fun list(value: Any?): List<Any?> = value as List<Any?>

        private fun stepKind(step: Map<String, Any?>): String =
            STEP_KINDS.firstOrNull { step.containsKey(it) }
                ?: throw ScenarioError("a step without a kind")

        private fun stepLabel(step: Map<String, Any?>): String {
            val kind = stepKind(step)
            val name = step["name"]
            return if (name is String && name.isNotEmpty()) name else "$kind ${step[kind]}"
        }

        /** Runs scenarios one after the other on one client; returns (passed, failed). */
        fun runScenarios(
            target: String,
            scenarios: List<Runner.Scenario>,
            emit: (Map<String, Any?>) -> Unit,
        ): Pair<Int, Int> =
            ContextEngine.connect(target).use { client ->
                val runner = KotlinRunner(client, emit)
                var passed = 0
                var failed = 0
                try {
                    runBlocking {
                        for (scenario in scenarios) {
                            if (runner.run(scenario)) passed += 1 else failed += 1
                        }
                    }
                } finally {
                    runner.shutdown()
                }
                passed to failed
            }

        @JvmStatic
        fun main(args: Array<String>) {
            var target: String? = null
            var report: String? = null
            var directory: String? = null
            val only = mutableListOf<String>()
            var i = 0
            while (i < args.size) {
                when (args[i]) {
                    "--target" -> target = args[++i]
                    "--report" -> report = args[++i]
                    "--only" -> only.add(args[++i])
                    else -> directory = args[i]
                }
                i += 1
            }
            val out = PrintStream(System.out, true, Charsets.UTF_8)
            if (target == null || directory == null) {
                System.err.println(
                    "usage: KotlinRunner --target HOST:PORT [--only NAME]... [--report FILE] SCENARIO_DIR"
                )
                exitProcess(2)
            }
            val scenarios = Runner.loadScenarios(Path.of(directory), only)
            if (scenarios.isEmpty()) {
                System.err.println("no scenarios found in $directory")
                exitProcess(2)
            }
            val lines = mutableListOf<String>()
            val (passed, failed) =
                runScenarios(target, scenarios) { result ->
                    val line = Match.GSON.toJson(result)
                    if (report == null) {
                        out.println(line)
                    } else {
                        lines.add(line)
                        if (result["status"] == "fail" && result["step"] != null) {
                            out.println(
                                "FAIL ${result["scenario"]} step ${result["step"]} (${result["label"] ?: ""}): ${result["message"]}"
                            )
                        }
                    }
                }
            if (report != null) {
                val path = Path.of(report)
                path.parent?.let { Files.createDirectories(it) }
                Files.writeString(path, lines.joinToString("") { it + "\n" })
            }
            out.println("conformance ($RUNNER): $passed passed, $failed failed")
            exitProcess(if (failed == 0) 0 else 1)
        }
    }

    private data class Failure(
        val code: String,
        val reason: String,
        val metadata: Map<String, String>,
        val message: String,
    ) {
        fun describe(): String = "$code $reason: $message " + Match.GSON.toJson(metadata)

        companion object {
            fun of(e: ContextEngineException) =
                Failure(e.code().name, e.reason(), e.metadata(), e.detail())
        }
    }

    /** What waiting on a stream gave: a frame, its normal end, or its failure. */
    private data class Next(
        val frame: Map<String, Any?>?,
        val ended: Boolean,
        val failure: Failure?,
    )

    /**
     * A scenario's stream: the client's followed flow collected into a queue by its own coroutine.
     */
    private inner class ScenarioStream(
        val methodName: String,
        val request: MutableMap<String, Any?>,
    ) {
        val rpcName = rpc(methodName, true)
        var cursor = ""
        private var job: Job? = null
        private var queue = Channel<Next>(Channel.UNLIMITED)
        private var outcome: Next? = null

        fun open() {
            close()
            outcome = null
            val flow: Flow<Message> =
                if (rpcName == "SubscribeEvents") {
                    client.subscribeEvents(
                        parse(SubscribeEventsRequest.newBuilder(), request)
                            as SubscribeEventsRequest,
                        FollowOptions(maxFailures = 5),
                    )
                } else {
                    client.watchSessionState(
                        parse(WatchSessionStateRequest.newBuilder(), request)
                            as WatchSessionStateRequest,
                        FollowOptions(maxFailures = 5),
                    )
                }
            val q = Channel<Next>(Channel.UNLIMITED)
            queue = q
            job = streams.launch {
                try {
                    flow.collect { q.send(Next(Runner.asJson(it), false, null)) }
                    q.send(Next(null, true, null))
                } catch (e: ContextEngineException) {
                    q.send(Next(null, false, Failure.of(e)))
                }
            }
        }

        /** The next frame, or null when nothing came within `timeoutMs`. */
        suspend fun next(timeoutMs: Long): Next? {
            outcome?.let {
                return it
            }
            if (job == null) throw ScenarioError("the stream is not open")
            val next =
                withTimeoutOrNull(maxOf(1, timeoutMs).milliseconds) { queue.receive() }
                    ?: return null
            if (next.frame == null) {
                outcome = next
                return next
            }
            val c = Runner.frameCursor(next.frame)
            if (c.isNotEmpty()) cursor = c
            return next
        }

        fun close() {
            job?.cancel()
            job = null
        }
    }

    private val streams = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    private fun report(
        scenario: String,
        step: Int?,
        status: String,
        message: String,
        ms: Double,
        label: String,
    ) {
        val result =
            linkedMapOf<String, Any?>(
                "runner" to RUNNER,
                "scenario" to scenario,
                "step" to step,
                "status" to status,
                "message" to message,
            )
        val rounded = Math.round(ms * 10) / 10.0
        result["ms"] = if (rounded == Math.rint(rounded)) rounded.toLong() else rounded
        if (label.isNotEmpty()) result["label"] = label
        emit(result)
    }

    private fun elapsed(t0: Long): Double = (System.nanoTime() - t0) / 1e6

    /** Runs one scenario; true when every step passed. */
    suspend fun run(scenario: Runner.Scenario): Boolean {
        val started = System.nanoTime()
        try {
            Runner.checkShape(scenario.data())
        } catch (e: ScenarioError) {
            report(scenario.name(), null, "fail", "malformed: " + e.message, 0.0, "")
            return false
        }
        val bytes = ByteArray(4).also { RANDOM.nextBytes(it) }
        val runId = HexFormat.of().formatHex(bytes)
        val variables = hashMapOf<String, Any?>("run" to runId, "app" to "conf-$RUNNER-$runId")
        val open = hashMapOf<String, ScenarioStream>()
        val steps = list(map(scenario.data())["steps"])
        var ok = true
        try {
            for ((i, raw) in steps.withIndex()) {
                val step = map(raw)
                val label = stepLabel(step)
                if (!ok) {
                    report(scenario.name(), i, "skip", "", 0.0, label)
                    continue
                }
                val t0 = System.nanoTime()
                try {
                    step(step, variables, open)
                    report(scenario.name(), i, "pass", "", elapsed(t0), label)
                } catch (e: StepFailure) {
                    ok = false
                    report(scenario.name(), i, "fail", e.message ?: "", elapsed(t0), label)
                } catch (e: ScenarioError) {
                    ok = false
                    report(scenario.name(), i, "fail", e.message ?: "", elapsed(t0), label)
                }
            }
        } finally {
            open.values.forEach { it.close() }
        }
        report(scenario.name(), null, if (ok) "pass" else "fail", "", elapsed(started), "")
        return ok
    }

    private suspend fun unary(name: Any?, request: Any?, timeoutMs: Long): Map<String, Any?> {
        val rpc = RPCS.getValue(rpc(name, false))
        val message = parse(rpc.builder(), request)
        return Runner.asJson(rpc.invoke(client, message, timeoutMs.milliseconds))
    }

    private suspend fun step(
        step: Map<String, Any?>,
        variables: MutableMap<String, Any?>,
        open: MutableMap<String, ScenarioStream>,
    ) {
        when (val kind = stepKind(step)) {
            "call" -> call(step, variables)
            "poll" -> poll(step, variables)
            "subscribe" -> {
                val name = step["stream"].toString()
                open[name]?.close()
                val request =
                    Match.substitute(step["request"] ?: emptyMap<String, Any>(), variables)
                val stream =
                    ScenarioStream(
                        step["subscribe"] as? String
                            ?: throw ScenarioError("a method name is a string"),
                        LinkedHashMap(map(request)),
                    )
                stream.open()
                open[name] = stream
            }
            "expect_frames" ->
                expectFrames(step, variables, streamNamed(open, step["expect_frames"]))
            "expect_no_frames" -> expectNoFrames(step, streamNamed(open, step["expect_no_frames"]))
            "expect_stream_error" ->
                expectStreamError(step, variables, streamNamed(open, step["expect_stream_error"]))
            "disconnect" -> streamNamed(open, step["disconnect"]).close()
            "resume" -> {
                val stream = streamNamed(open, step["resume"])
                stream.close()
                if (stream.cursor.isNotEmpty() && stream.methodName.endsWith("/SubscribeEvents")) {
                    val scope = stream.request["scope"] ?: "SUBSCRIPTION_SCOPE_UNSPECIFIED"
                    val bySequence =
                        scope == "SUBSCRIPTION_SCOPE_UNSPECIFIED" ||
                            scope == "SUBSCRIPTION_SCOPE_SESSION" ||
                            (scope is Number && scope.toInt() <= 1)
                    stream.request[if (bySequence) "after_sequence" else "after_cursor"] =
                        stream.cursor
                }
                stream.open()
            }
            "sleep_ms" -> delay(millis(step["sleep_ms"], 0))
            else -> throw ScenarioError("unknown step kind $kind")
        }
    }

    private suspend fun call(step: Map<String, Any?>, variables: MutableMap<String, Any?>) {
        val request = Match.substitute(step["request"] ?: emptyMap<String, Any>(), variables)
        val timeoutMs = millis(step["timeout_ms"], DEFAULT_CALL_TIMEOUT_MS)
        val data =
            try {
                unary(step["call"], request, timeoutMs)
            } catch (e: ContextEngineException) {
                val failure = Failure.of(e)
                if (!step.containsKey("expect_error"))
                    throw StepFailure("unexpected error: " + failure.describe())
                checkError(Match.substitute(step["expect_error"], variables), failure)
                return
            }
        if (step.containsKey("expect_error"))
            throw StepFailure("expected an error, got " + Match.show(data))
        if (step.containsKey("expect"))
            Match.match(Match.substitute(step["expect"], variables), data, "response")
        capture(step, variables, data)
    }

    private suspend fun poll(step: Map<String, Any?>, variables: MutableMap<String, Any?>) {
        val request = Match.substitute(step["request"] ?: emptyMap<String, Any>(), variables)
        val until = Match.substitute(step["until"] ?: emptyMap<String, Any>(), variables)
        val timeoutMs = millis(step["timeout_ms"], DEFAULT_POLL_TIMEOUT_MS)
        val interval = millis(step["interval_ms"], DEFAULT_POLL_INTERVAL_MS)
        val deadline = System.currentTimeMillis() + timeoutMs
        while (true) {
            val last =
                try {
                    unary(step["poll"], request, DEFAULT_CALL_TIMEOUT_MS)
                } catch (e: ContextEngineException) {
                    throw StepFailure("unexpected error while polling: " + Failure.of(e).describe())
                }
            try {
                Match.match(until, last, "response")
            } catch (e: StepFailure) {
                if (System.currentTimeMillis() >= deadline)
                    throw StepFailure("not reached within $timeoutMs ms: " + e.message)
                delay(interval)
                continue
            }
            capture(step, variables, last)
            return
        }
    }

    private suspend fun expectFrames(
        step: Map<String, Any?>,
        variables: MutableMap<String, Any?>,
        stream: ScenarioStream,
    ) {
        val expected = list(Match.substitute(step["frames"] ?: emptyList<Any>(), variables))
        val deadline =
            System.currentTimeMillis() + millis(step["timeout_ms"], DEFAULT_FRAME_TIMEOUT_MS)
        val received = mutableListOf<Any?>()
        for ((i, exp) in expected.withIndex()) {
            val wantsHeartbeat = exp is Map<*, *> && exp.containsKey("heartbeat")
            val frame = nextFrame(stream, deadline, wantsHeartbeat, "frame $i")
            try {
                Match.match(exp, frame, "frames[$i]")
            } catch (e: StepFailure) {
                throw StepFailure(e.message + " (frame: " + Match.show(frame) + ")")
            }
            received.add(frame)
        }
        capture(step, variables, mapOf("frames" to received))
    }

    private suspend fun expectNoFrames(step: Map<String, Any?>, stream: ScenarioStream) {
        val deadline = System.currentTimeMillis() + millis(step["within_ms"], DEFAULT_QUIET_MS)
        while (true) {
            val remaining = deadline - System.currentTimeMillis()
            if (remaining <= 0) return
            val next = stream.next(remaining)
            if (next?.frame == null) return
            if (!next.frame.containsKey("heartbeat"))
                throw StepFailure("expected no frame, got " + Match.show(next.frame))
        }
    }

    private suspend fun expectStreamError(
        step: Map<String, Any?>,
        variables: MutableMap<String, Any?>,
        stream: ScenarioStream,
    ) {
        val deadline =
            System.currentTimeMillis() + millis(step["timeout_ms"], DEFAULT_FRAME_TIMEOUT_MS)
        val expected = Match.substitute(step["error"] ?: emptyMap<String, Any>(), variables)
        while (true) {
            val remaining = deadline - System.currentTimeMillis()
            val next =
                (if (remaining > 0) stream.next(remaining) else null)
                    ?: throw StepFailure("timed out waiting for the stream to fail")
            if (next.ended) throw StepFailure("the stream ended without an error")
            if (next.failure != null) {
                checkError(expected, next.failure)
                return
            }
            if (next.frame?.containsKey("heartbeat") != true)
                throw StepFailure("expected the stream to fail, got " + Match.show(next.frame))
        }
    }

    private suspend fun nextFrame(
        stream: ScenarioStream,
        deadline: Long,
        wantsHeartbeat: Boolean,
        what: String,
    ): Map<String, Any?> {
        while (true) {
            val remaining = deadline - System.currentTimeMillis()
            if (remaining <= 0) throw StepFailure("timed out waiting for $what")
            val next = stream.next(remaining) ?: throw StepFailure("timed out waiting for $what")
            if (next.ended) throw StepFailure("the stream ended before $what")
            if (next.failure != null)
                throw StepFailure("the stream failed before $what: " + next.failure.describe())
            val frame = next.frame ?: continue
            if (frame.containsKey("heartbeat") && !wantsHeartbeat) continue
            return frame
        }
    }

    private fun checkError(expected: Any?, got: Failure) {
        val exp = if (expected == null) emptyMap() else map(expected)
        val unknown = exp.keys.filter { it !in listOf("code", "reason", "metadata") }.sorted()
        if (unknown.isNotEmpty()) throw ScenarioError("unknown error key(s) " + Match.show(unknown))
        val actual =
            linkedMapOf<String, Any?>(
                "code" to got.code,
                "reason" to got.reason,
                "metadata" to LinkedHashMap<String, Any?>(got.metadata),
            )
        Match.match(expected, actual, "error")
    }

    private fun capture(step: Map<String, Any?>, variables: MutableMap<String, Any?>, data: Any?) {
        val captures = step["capture"] ?: return
        for ((key, value) in map(captures)) variables[key] = Match.lookup(data, value.toString())
    }

    private fun streamNamed(open: Map<String, ScenarioStream>, name: Any?): ScenarioStream =
        open[name.toString()]
            ?: throw ScenarioError("no stream named " + Match.show(name) + " (subscribe first)")

    /** Stops every stream coroutine. */
    fun shutdown() = streams.cancel()
}
