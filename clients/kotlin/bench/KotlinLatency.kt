package dev.contextengine.bench

import dev.contextengine.client.kotlin.ContextEngineClient
import dev.contextengine.client.kotlin.ref
import java.util.Locale
import java.util.UUID
import kotlin.math.ceil
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.runBlocking

/**
 * Latency of AppendEvent and BuildContext from the Kotlin client, one suspend call at a time, in
 * the agent-loop pattern of the Java program (clients/java/bench Latency, whose events it sends): a
 * prefilled session, then per iteration one appended event and one context.
 *
 * ```
 * java -cp ... dev.contextengine.bench.KotlinLatency --target 127.0.0.1:50151 [--iterations 500]
 *     [--prefill 40] [--warmup 50] [--json]
 * ```
 */
object KotlinLatency {
    private suspend fun runSession(
        ce: ContextEngineClient,
        app: String,
        iterations: Int,
        prefill: Int,
        append: MutableList<Double>,
        build: MutableList<Double>,
    ) {
        val ref = ce.createSession(appName = app, userId = "bench").ref
        ce.appendEvents(ref, (0 until prefill).map { Latency.turn(it) })
        for (i in 0 until iterations) {
            var t0 = System.nanoTime()
            ce.appendEvent(ref, Latency.turn(prefill + i))
            append.add((System.nanoTime() - t0) / 1e6)
            t0 = System.nanoTime()
            val context = ce.buildContext(ref, agentName = "assistant")
            build.add((System.nanoTime() - t0) / 1e6)
            check(context.lastSequence == (prefill + i + 1).toLong()) {
                "the context reflects sequence ${context.lastSequence}, not ${prefill + i + 1}"
            }
        }
    }

    private fun percentile(values: List<Double>, p: Double): Double {
        val sorted = values.sorted()
        return sorted[minOf(sorted.size - 1, maxOf(0, ceil(p * sorted.size).toInt() - 1))]
    }

    private fun json(values: List<Double>): String =
        values.joinToString(",", "[", "]") { String.format(Locale.ROOT, "%.4f", it) }

    @JvmStatic
    fun main(args: Array<String>) {
        var target = "127.0.0.1:50151"
        var iterations = 500
        var prefill = 40
        var warmup = 50
        var asJson = false
        var i = 0
        while (i < args.size) {
            when (args[i]) {
                "--target" -> target = args[++i]
                "--iterations" -> iterations = args[++i].toInt()
                "--prefill" -> prefill = args[++i].toInt()
                "--warmup" -> warmup = args[++i].toInt()
                "--json" -> asJson = true
                else -> throw IllegalArgumentException("unknown argument ${args[i]}")
            }
            i += 1
        }
        val app = "bench-kotlin-" + UUID.randomUUID().toString().substring(0, 8)
        val append = mutableListOf<Double>()
        val build = mutableListOf<Double>()
        ContextEngineClient.connect(target, timeout = 10.seconds).use { ce ->
            runBlocking {
                runSession(ce, app, warmup, prefill, mutableListOf(), mutableListOf())
                runSession(ce, app, iterations, prefill, append, build)
            }
        }
        if (asJson) {
            println(
                """{"client":"kotlin","iterations":$iterations,"prefill":$prefill,"append_ms":${json(append)},"build_context_ms":${json(build)}}"""
            )
        } else {
            println(
                String.format(
                    Locale.ROOT,
                    "kotlin: AppendEvent p50 %.2f ms p99 %.2f ms; BuildContext p50 %.2f ms p99 %.2f ms (%d iterations)",
                    percentile(append, 0.5),
                    percentile(append, 0.99),
                    percentile(build, 0.5),
                    percentile(build, 0.99),
                    iterations,
                )
            )
        }
    }
}
