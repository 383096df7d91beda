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
 * Real servers for the tests: {@code contextengine serve} started from the repository's .venv on
 * port 0 (or $CONTEXTENGINE_TARGET for the shared one), a TCP proxy that can cut connections and
 * change its backend, and a port where nothing answers.
 */
final class Sidecar implements AutoCloseable {
  static final Path REPO =
      Path.of(System.getProperty("contextengine.repo", "../..")).toAbsolutePath().normalize();
  private static final String PYTHON =
      System.getProperty("contextengine.python", REPO.resolve(".venv/bin/python").toString());
  private static String shared;

  final Process process;
  final Path dir;
  final Path log;
  final String target;

  private Sidecar(Process process, Path dir, Path log, String target) {
    this.process = process;
    this.dir = dir;
    this.log = log;
    this.target = target;
  }

  /** host:port of a server shared by the tests: $CONTEXTENGINE_TARGET or one started here. */
  static synchronized String shared() {
    if (shared == null) {
      String env = System.getenv("CONTEXTENGINE_TARGET");
      if (env != null && !env.isBlank()) {
        shared = env;
      } else {
        Sidecar sidecar = start(null, List.of());
        Runtime.getRuntime().addShutdownHook(new Thread(sidecar::close));
        shared = sidecar.target;
      }
    }
    return shared;
  }

  /** A new server on a free port, with its own database ({@code db} null: in memory). */
  static Sidecar start(Path db, List<String> extra) {
    List<String> arguments = new ArrayList<>(List.of("contextengine", "serve"));
    arguments.addAll(List.of("--db", db == null ? ":memory:" : db.toString()));
    arguments.addAll(List.of("--listen", "127.0.0.1:0"));
    arguments.addAll(extra);
    return serve(arguments);
  }

  /**
   * {@code python -m <arguments> --port-file FILE} from the repository's .venv, in the repository:
   * a server that writes its port to FILE once it serves (its output in {@link #log}).
   */
  static Sidecar serve(List<String> arguments) {
    try {
      Path dir = Files.createTempDirectory("ce-java-test-");
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
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "the server exited with " + process.exitValue() + ": " + Files.readString(log));
        }
        if (Files.exists(portFile)) {
          String port = Files.readString(portFile, StandardCharsets.UTF_8).trim();
          if (port.matches("\\d+")) {
            return new Sidecar(process, dir, log, "127.0.0.1:" + port);
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

  String log() {
    try {
      return Files.readString(log, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /** SIGTERM (graceful: health NOT_SERVING, streams end with SHUTTING_DOWN) and wait. */
  void stop() {
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
  }

  static String uniqueApp(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** A loopback port nothing listens on (it was bound, then released). */
  static int closedPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A server that accepts connections and never answers. */
  static final class Silent implements AutoCloseable {
    final ServerSocket socket;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();

    Silent() throws IOException {
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

    String target() {
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
  static final class Proxy implements AutoCloseable {
    private final ServerSocket socket;
    private volatile String backend;
    private final List<Socket> open = new CopyOnWriteArrayList<>();

    Proxy(String backend) throws IOException {
      this.backend = backend;
      socket = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
      Thread thread = new Thread(this::accept, "proxy-accept");
      thread.setDaemon(true);
      thread.start();
    }

    String target() {
      return "127.0.0.1:" + socket.getLocalPort();
    }

    void retarget(String value) {
      backend = value;
    }

    /** Closes every connection now (clients see UNAVAILABLE and reconnect). */
    void cutAll() {
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
