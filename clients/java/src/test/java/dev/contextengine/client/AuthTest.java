package dev.contextengine.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.contextengine.v1.CreateSessionRequest;
import dev.contextengine.v1.GetSessionRequest;
import io.grpc.Status;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client against a real {@code contextengine serve} started here with mTLS and a hashed token
 * file (certificates made by the repository's tests/auth/certs.py): {@code token}, {@code
 * trustCertificates}, {@code clientCertificate}, and the UNAUTHENTICATED / PERMISSION_DENIED errors
 * with their ErrorInfo reasons.
 */
class AuthTest {
  private static final String WRITER = "java-writer-token-0123";
  private static Path pki;
  private static Sidecar sidecar;

  @BeforeAll
  static void start() throws IOException, InterruptedException, NoSuchAlgorithmException {
    pki = Files.createTempDirectory("ce-java-auth-");
    Process certs =
        new ProcessBuilder(Sidecar.PYTHON, "-m", "tests.auth.certs", pki.toString())
            .directory(Sidecar.REPO.toFile())
            .inheritIO()
            .start();
    assertTrue(certs.waitFor(60, TimeUnit.SECONDS));
    assertEquals(0, certs.exitValue());
    String sha256 =
        String.format(
            "%064x",
            new BigInteger(
                1,
                MessageDigest.getInstance("SHA-256")
                    .digest(WRITER.getBytes(StandardCharsets.US_ASCII))));
    Path tokens = pki.resolve("tokens.toml");
    Files.writeString(
        tokens,
        "[[tokens]]\nname = \"java\"\nsha256 = \""
            + sha256
            + "\"\nrole = \"write\"\napps = [\"java-app\"]\n");
    sidecar =
        Sidecar.start(
            null,
            List.of(
                "--auth-tokens-file", tokens.toString(),
                "--tls-cert-file", pki.resolve("server.pem").toString(),
                "--tls-key-file", pki.resolve("server.key").toString(),
                "--tls-client-ca-file", pki.resolve("ca.pem").toString()));
  }

  @AfterAll
  static void stop() {
    if (sidecar != null) {
      sidecar.close();
    }
  }

  private static ContextEngineClient.Builder mtls() {
    return ContextEngineClient.builder()
        .target(sidecar.target)
        .timeout(Duration.ofSeconds(10))
        .retryPolicy(RetryPolicy.NONE)
        .trustCertificates(pki.resolve("ca.pem"))
        .clientCertificate(pki.resolve("client.pem"), pki.resolve("client.key"));
  }

  private static ContextEngineException refused(ContextEngineClient.Builder builder, String app) {
    try (ContextEngineClient client = builder.build()) {
      return assertThrows(
          ContextEngineException.class,
          () ->
              client.createSession(
                  CreateSessionRequest.newBuilder().setAppName(app).setUserId("u").build()));
    }
  }

  @Test
  void aTokenOverMutualTlsAndTheRefusalsAroundIt() {
    try (ContextEngineClient ce = mtls().token(WRITER).build()) {
      String id =
          ce.createSession(
                  CreateSessionRequest.newBuilder().setAppName("java-app").setUserId("u").build())
              .getSession()
              .getId();
      assertFalse(id.isEmpty());
      assertEquals(
          id,
          ce.getSession(
                  GetSessionRequest.newBuilder()
                      .setAppName("java-app")
                      .setUserId("u")
                      .setSessionId(id)
                      .build())
              .getSession()
              .getId());
    }
    ContextEngineException denied = refused(mtls().token(WRITER), "other-app");
    assertEquals(Status.Code.PERMISSION_DENIED, denied.code());
    assertEquals("PERMISSION_DENIED", denied.reason());
    assertEquals("other-app", denied.metadata().get("app_name"));
    ContextEngineException anonymous = refused(mtls(), "java-app");
    assertEquals(Status.Code.UNAUTHENTICATED, anonymous.code());
    assertEquals("UNAUTHENTICATED", anonymous.reason());
    assertEquals("TOKEN_INVALID", refused(mtls().token("nope"), "java-app").reason());
    ContextEngineException noClientCertificate =
        refused(
            ContextEngineClient.builder()
                .target(sidecar.target)
                .retryPolicy(RetryPolicy.NONE)
                .trustCertificates(pki.resolve("ca.pem"))
                .token(WRITER),
            "java-app");
    assertEquals(Status.Code.UNAVAILABLE, noClientCertificate.code());
    assertFalse(sidecar.log().contains(WRITER));
  }

  @Test
  void badOptionsAreRefusedUpFront() {
    assertThrows(IllegalArgumentException.class, () -> ContextEngineClient.builder().token("a b"));
    assertFalse(new BearerToken(WRITER).toString().contains(WRITER));
  }
}
