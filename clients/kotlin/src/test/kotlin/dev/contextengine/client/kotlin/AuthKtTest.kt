package dev.contextengine.client.kotlin

import dev.contextengine.client.ContextEngineException
import dev.contextengine.client.RetryPolicy
import dev.contextengine.client.Sidecar
import io.grpc.Status
import java.nio.file.Files
import java.nio.file.Path
import java.security.MessageDigest
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows

/**
 * `connect(token = ..., tls = Tls(...))` against a real `contextengine serve` started here with
 * mTLS and a hashed token file (certificates made by the repository's tests/auth/certs.py).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AuthKtTest {
    private val writer = "kotlin-writer-token-0123"
    private lateinit var pki: Path
    private lateinit var sidecar: Sidecar

    @BeforeAll
    fun start() {
        pki = Files.createTempDirectory("ce-kotlin-auth-")
        val python =
            System.getProperty(
                "contextengine.python",
                Sidecar.REPO.resolve(".venv/bin/python").toString(),
            )
        val certs =
            ProcessBuilder(python, "-m", "tests.auth.certs", pki.toString())
                .directory(Sidecar.REPO.toFile())
                .inheritIO()
                .start()
        assertTrue(certs.waitFor(60, TimeUnit.SECONDS))
        assertEquals(0, certs.exitValue())
        val sha256 =
            MessageDigest.getInstance("SHA-256")
                .digest(writer.toByteArray(Charsets.US_ASCII))
                .joinToString("") { "%02x".format(it) }
        val tokens = pki.resolve("tokens.json")
        Files.writeString(
            tokens,
            """{"tokens": [{"name": "kotlin", "sha256": "$sha256", "role": "write", "apps": ["kt-app"]}]}""",
        )
        sidecar =
            Sidecar.start(
                null,
                listOf(
                    "--auth-tokens-file",
                    tokens.toString(),
                    "--tls-cert-file",
                    pki.resolve("server.pem").toString(),
                    "--tls-key-file",
                    pki.resolve("server.key").toString(),
                    "--tls-client-ca-file",
                    pki.resolve("ca.pem").toString(),
                ),
            )
    }

    @AfterAll
    fun stop() {
        if (::sidecar.isInitialized) sidecar.close()
    }

    private fun tls() =
        Tls(
            trustCertificates = pki.resolve("ca.pem"),
            certificateChain = pki.resolve("client.pem"),
            privateKey = pki.resolve("client.key"),
        )

    @Test
    fun aTokenOverMutualTls() = runBlocking {
        ContextEngineClient.connect(
                sidecar.target,
                retryPolicy = RetryPolicy.NONE,
                token = writer,
                tls = tls(),
            )
            .use { ce ->
                val session = ce.createSession(appName = "kt-app", userId = "u")
                assertFalse(session.id.isEmpty())
                val denied =
                    assertThrows<ContextEngineException> {
                        ce.createSession(appName = "other-app", userId = "u")
                    }
                assertEquals(Status.Code.PERMISSION_DENIED, denied.code())
                assertEquals("PERMISSION_DENIED", denied.reason())
            }
        ContextEngineClient.connect(sidecar.target, retryPolicy = RetryPolicy.NONE, tls = tls())
            .use { anonymous ->
                val refused =
                    assertThrows<ContextEngineException> {
                        anonymous.createSession(appName = "kt-app", userId = "u")
                    }
                assertEquals(Status.Code.UNAUTHENTICATED, refused.code())
                assertEquals("UNAUTHENTICATED", refused.reason())
            }
        assertThrows<IllegalArgumentException> { Tls(certificateChain = pki.resolve("client.pem")) }
        assertFalse(sidecar.log().contains(writer))
    }
}
