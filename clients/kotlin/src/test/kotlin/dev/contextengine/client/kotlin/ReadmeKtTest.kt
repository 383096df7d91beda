package dev.contextengine.client.kotlin

import dev.contextengine.client.ExampleRun
import dev.contextengine.client.Guide
import dev.contextengine.client.Sidecar
import java.nio.file.Path
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The Kotlin guide's blocks (clients/kotlin/README.md) are examples/ReadmeExample.kt,
 * examples/ContextViewExample.kt ("contents since"), examples/Renderings.kt and
 * examples/ContextToolsExample.kt and examples/CompactionExample.kt, and they run and print what
 * they say (the renderings one in RenderingsKtTest, against the fake providers).
 */
class ReadmeKtTest {
    private companion object {
        const val GUIDE = "clients/kotlin/README.md"
    }

    private val example: Path = Sidecar.REPO.resolve("clients/kotlin/examples/ReadmeExample.kt")
    private val sinceExample: Path =
        Sidecar.REPO.resolve("clients/kotlin/examples/ContextViewExample.kt")
    private val renderingsExample: Path =
        Sidecar.REPO.resolve("clients/kotlin/examples/Renderings.kt")
    private val toolsExample: Path =
        Sidecar.REPO.resolve("clients/kotlin/examples/ContextToolsExample.kt")
    private val compactionExample: Path =
        Sidecar.REPO.resolve("clients/kotlin/examples/CompactionExample.kt")

    /** The `index`-th ```kotlin block of the guide. */
    private fun block(index: Int): String {
        val blocks = Guide.blocks(GUIDE, "kotlin")
        assertTrue(blocks.size > index, "a ```kotlin block number ${index + 1} in $GUIDE")
        return blocks[index].trim()
    }

    private fun marked(example: Path): String = Guide.marked(example)

    /** What an example prints, run in a JVM of its own against the shared sidecar. */
    private fun run(mainClass: String): List<String> = ExampleRun.lines(mainClass, emptyMap())

    @Test
    fun theGuideHasItsFiveBlocks() {
        assertEquals(5, Guide.blocks(GUIDE, "kotlin").size)
    }

    @Test
    fun theReadmeBlockIsTheExample() {
        assertEquals(marked(example), block(0))
    }

    @Test
    fun theExampleRunsAndPrintsWhatItsCommentsSay() {
        assertEquals(
            listOf("1 1", "NOT_FOUND SESSION_NOT_FOUND", "Again!"),
            run("dev.contextengine.examples.kotlin.ReadmeExample"),
        )
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
        val block =
            generateSequence(0) { it + 1 }.map { block(it) }.first { "ce.contextTools(" in it }
        assertEquals(marked(toolsExample), block)
        assertEquals(
            listOf("7", "true 1", "true"),
            run("dev.contextengine.examples.kotlin.ContextToolsExample"),
        )
    }

    @Test
    fun theCompactionBlockIsItsExampleAndRuns() {
        val block =
            generateSequence(0) { it + 1 }.map { block(it) }.first { "ce.expandSummary" in it }
        assertEquals(marked(compactionExample), block)
        val lines = run("dev.contextengine.examples.kotlin.CompactionExample")
        assertEquals("1", lines.first(), "one content: the summary")
        val summary = lines.subList(1, lines.size - 1).joinToString("\n")
        assertTrue(Regex("TP1351[\\s\\S]*Memmo Alfama").containsMatchIn(summary), summary)
        assertEquals("1 2 3 4", lines.last())
    }
}
