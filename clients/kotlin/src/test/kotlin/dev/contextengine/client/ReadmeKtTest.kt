package dev.contextengine.client

import java.nio.file.Files
import java.nio.file.Path
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The README's Kotlin section's blocks are examples/ReadmeExample.kt,
 * examples/ContextViewExample.kt ("contents since"), examples/Renderings.kt and
 * examples/ContextToolsExample.kt, and they run and print what they say (the renderings one in
 * RenderingsKtTest, against the fake providers).
 */
class ReadmeKtTest {
    private val example: Path = Sidecar.REPO.resolve("clients/kotlin/examples/ReadmeExample.kt")
    private val sinceExample: Path = Sidecar.REPO.resolve("clients/kotlin/examples/ContextViewExample.kt")
    private val renderingsExample: Path = Sidecar.REPO.resolve("clients/kotlin/examples/Renderings.kt")
    private val toolsExample: Path = Sidecar.REPO.resolve("clients/kotlin/examples/ContextToolsExample.kt")

    private fun dedent(lines: List<String>): String {
        val indent = lines.filter { it.isNotBlank() }.minOfOrNull { it.length - it.trimStart().length } ?: 0
        return lines.joinToString("\n") { if (it.isBlank()) "" else it.substring(indent) }
    }

    /** The `index`-th ```kotlin block under ## Kotlin. */
    private fun block(index: Int): String {
        val readme = Files.readString(Sidecar.REPO.resolve("README.md"))
        val parts = readme.split("\n## Kotlin\n", limit = 2)
        assertEquals(2, parts.size, "README.md has a ## Kotlin section")
        val section = parts[1].split("\n## ", limit = 2)[0]
        val blocks = Regex("```kotlin\n([\\s\\S]*?)```").findAll(section).toList()
        assertTrue(blocks.size > index, "a ```kotlin block number ${index + 1} under ## Kotlin")
        return blocks[index].groupValues[1].trim()
    }

    /** The lines of an example between its README markers. */
    private fun marked(example: Path): String {
        val lines = Files.readAllLines(example)
        val begin = lines.indexOfFirst { it.trim() == "// README begin" }
        val end = lines.indexOfFirst { it.trim() == "// README end" }
        assertTrue(begin >= 0 && end > begin, "markers in $example")
        return dedent(lines.subList(begin + 1, end)).trim()
    }

    /** What an example prints, run in a JVM of its own against the shared sidecar. */
    private fun run(mainClass: String): List<String> = ExampleRun.lines(mainClass, emptyMap())

    @Test
    fun theReadmeBlockIsTheExample() {
        assertEquals(marked(example), block(0))
    }

    @Test
    fun theExampleRunsAndPrintsWhatItsCommentsSay() {
        assertEquals(listOf("1 1", "NOT_FOUND SESSION_NOT_FOUND", "Again!"), run("dev.contextengine.examples.kotlin.ReadmeExample"))
    }

    @Test
    fun theContentsSinceBlockIsItsExampleAndRuns() {
        assertEquals(marked(sinceExample), block(1))
        assertEquals(listOf("1 2 0"), run("dev.contextengine.examples.kotlin.ContextViewExample"))
    }

    @Test
    fun theRenderingsBlockIsItsExample() {
        assertEquals(marked(renderingsExample), block(2))
    }

    @Test
    fun theContextToolsBlockIsItsExampleAndRuns() {
        val block = generateSequence(0) { it + 1 }.map { block(it) }.first { "ce.contextTools(" in it }
        assertEquals(marked(toolsExample), block)
        assertEquals(listOf("7", "true 1", "true"), run("dev.contextengine.examples.kotlin.ContextToolsExample"))
    }
}
