package dev.contextengine.adk;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A real sidecar for the tests and the tools: {@code $CONTEXTENGINE_TARGET} (scripts/with_server.py
 * sets it), or {@code contextengine serve} started from the repository's .venv on a free port.
 */
public final class TestSidecar implements AutoCloseable {
  static final Path REPO =
      Path.of(System.getProperty("contextengine.repo", "../..")).toAbsolutePath().normalize();
  private static final String PYTHON =
      System.getProperty("contextengine.python", REPO.resolve(".venv/bin/python").toString());
  private static String shared;

  private final Process process;

  /** host:port of the server. */
  public final String target;

  private TestSidecar(Process process, String target) {
    this.process = process;
    this.target = target;
  }

  /** A server shared by everything in this JVM: $CONTEXTENGINE_TARGET or one started here. */
  public static synchronized String shared() {
    if (shared == null) {
      String env = System.getenv("CONTEXTENGINE_TARGET");
      if (env != null && !env.isBlank()) {
        shared = env;
      } else {
        TestSidecar sidecar = start();
        Runtime.getRuntime().addShutdownHook(new Thread(sidecar::close));
        shared = sidecar.target;
      }
    }
    return shared;
  }

  /** A new server of its own (in memory) on a free port. */
  public static TestSidecar start() {
    try {
      Path dir = Files.createTempDirectory("ce-java-adk-");
      Path port = dir.resolve("port");
      Process process =
          new ProcessBuilder(
                  List.of(
                      PYTHON,
                      "-m",
                      "contextengine",
                      "serve",
                      "--db",
                      ":memory:",
                      "--listen",
                      "127.0.0.1:0",
                      "--port-file",
                      port.toString()))
              .directory(REPO.toFile())
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("server.log").toFile())
              .start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "the server exited: " + Files.readString(dir.resolve("server.log")));
        }
        if (Files.exists(port)) {
          String text = Files.readString(port, StandardCharsets.UTF_8).trim();
          if (text.matches("\\d+")) {
            return new TestSidecar(process, "127.0.0.1:" + text);
          }
        }
        Thread.sleep(50);
      }
      process.destroyForcibly();
      throw new IllegalStateException("the server did not start within 60 s");
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A fresh app name (tests share the server). */
  public static String uniqueApp(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** A loopback port nothing listens on. */
  public static int closedPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** SIGTERM, then wait. */
  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
