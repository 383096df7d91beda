package dev.contextengine.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The one way the JVM tests, benchmarks and tools start {@code contextengine serve} (the Java
 * client's, the Kotlin client's and the ADK Java drop-ins', through this module's test jar),
 * following the readiness protocol of the Python {@code contextengine.testing.sidecar
 * .SidecarProcess}: {@code python -m contextengine serve --listen 127.0.0.1:0 --port-file FILE}
 * from the repository's .venv, ready once the server has written its port to FILE (it does so once
 * it serves); its output in a log file, shown when it exits or does not start in time; stopped with
 * SIGTERM on {@link #close}, or when the JVM exits. Beside it: the server shared by a JVM's tests
 * ($CONTEXTENGINE_TARGET, or one started here), a TCP proxy that can cut connections and change its
 * backend, a server that never answers, and a port where nothing listens.
 */
public final class Sidecar implements AutoCloseable {
  /** The repository's root (the system property {@code contextengine.repo}, or ../..). */
  public static final Path REPO =
      Path.of(System.getProperty("contextengine.repo", "../..")).toAbsolutePath().normalize();

  /** The repository's .venv Python (or the system property {@code contextengine.python}). */
  public static final String PYTHON =
      System.getProperty("contextengine.python", REPO.resolve(".venv/bin/python").toString());

  private static final long START_SECONDS = 60;
  private static String shared;

  private final Process process;
  private final Path log;
  private final Thread stopOnExit;

  /** host:port of the server ({@code 127.0.0.1:PORT}, or the unix: address it listens on). */
  public final String target;

  private Sidecar(Process process, Path log, String target) {
    this.process = process;
    this.log = log;
    this.target = target;
    this.stopOnExit = new Thread(this::stop, "sidecar-stop-on-exit");
    Runtime.getRuntime().addShutdownHook(stopOnExit);
  }

  /** host:port of a server shared by the tests: $CONTEXTENGINE_TARGET or one started here. */
  public static synchronized String shared() {
    if (shared == null) {
      String env = System.getenv("CONTEXTENGINE_TARGET");
      shared = env != null && !env.isBlank() ? env : start(null, List.of()).target;
    }
    return shared;
  }

  /**
   * A new server on a free loopback port, with its own database ({@code db} null: in memory) and
   * {@code args}: more flags of {@code serve} (TLS, tokens, tracing, log format...).
   */
  public static Sidecar start(Path db, List<String> args) {
    return start("127.0.0.1:0", db, args);
  }

  /** The same, listening on {@code listen} (a {@code unix:PATH} socket, say). */
  public static Sidecar start(String listen, Path db, List<String> args) {
    List<String> arguments = new ArrayList<>(List.of("contextengine", "serve"));
    arguments.addAll(List.of("--db", db == null ? ":memory:" : db.toString()));
    arguments.addAll(List.of("--listen", listen));
    arguments.addAll(args);
    return launch(arguments, listen.startsWith("unix:") ? listen : null);
  }

  /**
   * {@code python -m <arguments> --port-file FILE} from the repository's .venv, in the repository:
   * a process that writes its port to FILE once it serves (the sidecar, or a fake of the
   * repository's tests such as {@code tests.fakes.provider_server}), its output in {@link #log()}.
   */
  public static Sidecar startModule(List<String> arguments) {
    return launch(arguments, null);
  }

  /** {@link #startModule}, whose target is {@code unixTarget} when one is given. */
  private static Sidecar launch(List<String> arguments, String unixTarget) {
    try {
      Path dir = Files.createTempDirectory("ce-jvm-test-");
      Path portFile = dir.resolve("port");
      Path log = dir.resolve("server.log");
      List<String> command = new ArrayList<>(List.of(PYTHON, "-m"));
      command.addAll(arguments);
      command.addAll(List.of("--port-file", portFile.toString()));
      Process process =
          new ProcessBuilder(command)
              .directory(REPO.toFile())
              .redirectErrorStream(true)
              .redirectOutput(log.toFile())
              .start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "the server exited with " + process.exitValue() + ":\n" + Files.readString(log));
        }
        if (Files.exists(portFile)) {
          String port = Files.readString(portFile, StandardCharsets.UTF_8).trim();
          if (port.matches("\\d+")) {
            return new Sidecar(process, log, unixTarget != null ? unixTarget : "127.0.0.1:" + port);
          }
        }
        Thread.sleep(50);
      }
      process.destroyForcibly().waitFor();
      throw new IllegalStateException(
          "the server did not start within " + START_SECONDS + " s:\n" + Files.readString(log));
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** What the process has written to stdout and stderr so far. */
  public String log() {
    try {
      return Files.readString(log, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /** SIGTERM (graceful: health NOT_SERVING, streams end with SHUTTING_DOWN) and wait. */
  public void stop() {
    process.destroy();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      stop();
    }
    try {
      Runtime.getRuntime().removeShutdownHook(stopOnExit);
    } catch (IllegalStateException exiting) {
      // the JVM is exiting: the hook runs (or ran) anyway
    }
  }

  /** A fresh app name (the tests share a server). */
  public static String uniqueApp(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** A loopback port nothing listens on (it was bound, then released). */
  public static int closedPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A server that accepts connections and never answers. */
  public static final class Silent implements AutoCloseable {
    final ServerSocket socket;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();

    public Silent() throws IOException {
      socket = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
      Thread thread =
          new Thread(
              () -> {
                try {
                  while (true) {
                    accepted.add(socket.accept());
                  }
                } catch (IOException closed) {
                  // done
                }
              });
      thread.setDaemon(true);
      thread.start();
    }

    public String target() {
      return "127.0.0.1:" + socket.getLocalPort();
    }

    @Override
    public void close() throws IOException {
      socket.close();
      for (Socket s : accepted) {
        s.close();
      }
    }
  }

  /** A TCP proxy to a backend that can cut every connection and be pointed elsewhere. */
  public static final class Proxy implements AutoCloseable {
    private final ServerSocket socket;
    private volatile String backend;
    private final List<Socket> open = new CopyOnWriteArrayList<>();

    public Proxy(String backend) throws IOException {
      this.backend = backend;
      socket = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
      Thread thread = new Thread(this::accept, "proxy-accept");
      thread.setDaemon(true);
      thread.start();
    }

    public String target() {
      return "127.0.0.1:" + socket.getLocalPort();
    }

    public void retarget(String value) {
      backend = value;
    }

    /** Closes every connection now (clients see UNAVAILABLE and reconnect). */
    public void cutAll() {
      for (Socket s : open) {
        try {
          s.close();
        } catch (IOException ignored) {
          // already closed
        }
      }
      open.clear();
    }

    private void accept() {
      try {
        while (true) {
          Socket client = socket.accept();
          String[] hostPort = backend.split(":");
          Socket server = new Socket();
          try {
            server.connect(new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1])), 5000);
          } catch (IOException refused) {
            client.close();
            continue;
          }
          open.add(client);
          open.add(server);
          pump(client, server);
          pump(server, client);
        }
      } catch (IOException closed) {
        // the proxy was closed
      }
    }

    private static void pump(Socket from, Socket to) {
      Thread thread =
          new Thread(
              () -> {
                byte[] buffer = new byte[16384];
                try {
                  var in = from.getInputStream();
                  var out = to.getOutputStream();
                  int n;
                  while ((n = in.read(buffer)) >= 0) {
                    out.write(buffer, 0, n);
                    out.flush();
                  }
                } catch (IOException ignored) {
                  // cut
                } finally {
                  try {
                    from.close();
                    to.close();
                  } catch (IOException ignored) {
                    // already closed
                  }
                }
              },
              "proxy-pump");
      thread.setDaemon(true);
      thread.start();
    }

    @Override
    public void close() throws IOException {
      socket.close();
      cutAll();
    }
  }
}
