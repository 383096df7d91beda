package dev.contextengine.client

import java.nio.file.Files
import java.nio.file.Path
import java.util.concurrent.TimeUnit
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The README's Kotlin section is examples/ReadmeExample.kt, and it runs and prints what it says. */
class ReadmeKtTest {
    private val example: Path = Sidecar.REPO.resolve("clients/kotlin/examples/ReadmeExample.kt")

    private fun dedent(lines: List<String>): String {
        val indent = lines.filter { it.isNotBlank() }.minOfOrNull { it.length - it.trimStart().length } ?: 0
        return lines.joinToString("\n") { if (it.isBlank()) "" else it.substring(indent) }
    }

    @Test
    fun theReadmeBlockIsTheExample() {
        val readme = Files.readString(Sidecar.REPO.resolve("README.md"))
        val parts = readme.split("\n## Kotlin\n", limit = 2)
        assertEquals(2, parts.size, "README.md has a ## Kotlin section")
        val section = parts[1].split("\n## ", limit = 2)[0]
        val block = Regex("```kotlin\n([\\s\\S]*?)```").find(section)
        assertTrue(block != null, "a ```kotlin block under ## Kotlin")
        val lines = Files.readAllLines(example)
        val begin = lines.indexOfFirst { it.trim() == "// README begin" }
        val end = lines.indexOfFirst { it.trim() == "// README end" }
        assertTrue(begin >= 0 && end > begin, "markers in $example")
        assertEquals(dedent(lines.subList(begin + 1, end)).trim(), block!!.groupValues[1].trim())
    }

    @Test
    fun theExampleRunsAndPrintsWhatItsCommentsSay() {
        val builder = ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp",
            System.getProperty("java.class.path"),
            "dev.contextengine.examples.kotlin.ReadmeExample",
        )
        builder.environment()["CONTEXTENGINE_TARGET"] = Sidecar.shared()
        builder.redirectErrorStream(true)
        val process = builder.start()
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "the example finished")
        val out = String(process.inputStream.readAllBytes(), Charsets.UTF_8)
        assertEquals(0, process.exitValue(), out)
        assertEquals(listOf("1 1", "NOT_FOUND SESSION_NOT_FOUND", "Again!"), out.trim().split("\n"))
    }
}
