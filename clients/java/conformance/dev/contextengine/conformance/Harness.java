package dev.contextengine.conformance;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.client.ContextEngineClient;
import dev.contextengine.client.ContextEngineException;
import dev.contextengine.client.FollowedStream;
import dev.contextengine.client.StreamOptions;
import dev.contextengine.v1.CallContextToolRequest;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.function.Function;

/**
 * The Java conformance harness: each op of the driver (clients/conformance/driver.py) through
 * {@link ContextEngineClient}, one JSON object per line on stdin and stdout (the protocol is in
 * clients/conformance/README.md). The Kotlin harness serves its client with the same loop.
 */
public final class Harness {
  /** A client as the harness drives it ({@code rpc} is the method's name, e.g. CreateSession). */
  public interface Client extends AutoCloseable {
    Message call(String rpc, Message request, Duration timeout);

    Frames open(String rpc, Message request);

    @Override
    void close();
  }

  /** An open stream: the next frame or null on timeout; NoSuchElementException at its end. */
  public interface Frames {
    Message poll(Duration timeout);

    void close();
  }

  private static final JsonFormat.Printer PRINTER =
      JsonFormat.printer().preservingProtoFieldNames().omittingInsignificantWhitespace();

  private final Function<String, Client> connect;
  private final Map<String, Frames> streams = new HashMap<>();
  private Client client;

  public Harness(Function<String, Client> connect) {
    this.connect = connect;
  }

  /** The request message of an RPC (named {@code <Rpc>Request}) from its proto3 JSON. */
  public static Message request(String rpc, String json) throws ReflectiveOperationException {
    Class<?> type = Class.forName("dev.contextengine.v1." + rpc + "Request");
    Message.Builder builder = (Message.Builder) type.getMethod("newBuilder").invoke(null);
    try {
      JsonFormat.parser().merge(json, builder);
    } catch (InvalidProtocolBufferException | RuntimeException e) {
      throw new IllegalArgumentException(
          "request does not parse as " + type.getSimpleName() + ": " + e.getMessage(), e);
    }
    return builder.build();
  }

  /** Invokes a reflected method, rethrowing what it threw. */
  public static Object invoke(Method method, Object target, Object... args) {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      if (e.getCause() instanceof RuntimeException cause) {
        throw cause;
      }
      throw new IllegalStateException(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  private static JsonObject json(Message message) throws InvalidProtocolBufferException {
    return JsonParser.parseString(PRINTER.print(message)).getAsJsonObject();
  }

  private static JsonObject reply(String key, Object value) {
    JsonObject out = new JsonObject();
    if (value instanceof ContextEngineException e) {
      JsonObject error = new JsonObject();
      error.addProperty("code", e.code().name());
      error.addProperty("message", e.detail());
      error.addProperty("reason", e.reason());
      JsonObject metadata = new JsonObject();
      e.metadata().forEach(metadata::addProperty);
      error.add("metadata", metadata);
      out.add("error", error);
    } else if (value instanceof JsonObject o) {
      out.add(key, o);
    } else if (value != null) {
      out.addProperty(key, String.valueOf(value));
    }
    return out;
  }

  JsonObject handle(JsonObject op) throws Exception {
    String kind = op.get("op").getAsString();
    String stream = op.has("stream") ? op.get("stream").getAsString() : "";
    switch (kind) {
      case "connect" -> client = connect.apply(op.get("target").getAsString());
      case "close" -> {
        Frames frames = streams.remove(stream);
        if (frames != null) {
          frames.close();
        }
      }
      case "next" -> {
        try {
          Message frame =
              streams.get(stream).poll(Duration.ofMillis(op.get("timeout_ms").getAsLong()));
          return frame == null ? reply("timeout", true) : reply("frame", json(frame));
        } catch (NoSuchElementException e) {
          return reply("end", true);
        } catch (ContextEngineException e) {
          return reply("error", e);
        }
      }
      default -> {
        String rpc = op.get("method").getAsString().split("/", 2)[1];
        Message request = request(rpc, op.get("request").toString());
        try {
          if (kind.equals("open")) {
            streams.put(stream, client.open(rpc, request));
            return reply("", null);
          }
          Duration timeout = Duration.ofMillis(op.get("timeout_ms").getAsLong());
          return reply("response", json(client.call(rpc, request, timeout)));
        } catch (ContextEngineException e) {
          return reply("error", e);
        }
      }
    }
    return reply("", null);
  }

  /** Answers every line of stdin on stdout until stdin ends. */
  public void serve() throws IOException {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        JsonObject answer;
        try {
          answer = handle(JsonParser.parseString(line).getAsJsonObject());
        } catch (Exception e) {
          answer = reply("fail", "harness: " + e);
        }
        out.println(answer);
      }
    } finally {
      streams.values().forEach(Frames::close);
      if (client != null) {
        client.close();
      }
    }
  }

  /** The Java client: its methods are named after the RPCs and take the request message. */
  static final class JavaClient implements Client {
    private final ContextEngineClient client;

    JavaClient(String target) {
      client = ContextEngineClient.connect(target);
    }

    private static Method method(String rpc, Class<?>... params) {
      String name = Character.toLowerCase(rpc.charAt(0)) + rpc.substring(1);
      try {
        return ContextEngineClient.class.getMethod(name, params);
      } catch (NoSuchMethodException e) {
        throw new UnsupportedOperationException("ContextEngineClient has no method " + name);
      }
    }

    @Override
    public Message call(String rpc, Message request, Duration timeout) {
      ContextEngineClient timed = client.withTimeout(timeout);
      if (request instanceof CallContextToolRequest r) {
        // Through the helper a model loop uses, as every harness does.
        return timed
            .contextTools(
                r.getAppName(),
                r.getUserId(),
                r.getSessionId(),
                r.getAgentName(),
                r.hasBranch() ? r.getBranch() : null,
                r.hasIsolationScope() ? r.getIsolationScope() : null)
            .call(r.getCall(), r.getInvocationId());
      }
      return (Message) invoke(method(rpc, request.getClass()), timed, request);
    }

    @Override
    public Frames open(String rpc, Message request) {
      // The client reopens broken streams by itself; the driver's resume is a new call.
      Method method = method(rpc, request.getClass(), StreamOptions.class);
      FollowedStream<?> frames =
          (FollowedStream<?>)
              invoke(method, client, request, StreamOptions.DEFAULT.withMaxFailures(5));
      return new Frames() {
        @Override
        public Message poll(Duration timeout) {
          return (Message) frames.poll(timeout);
        }

        @Override
        public void close() {
          frames.close();
        }
      };
    }

    @Override
    public void close() {
      client.close();
    }
  }

  public static void main(String[] args) throws IOException {
    new Harness(JavaClient::new).serve();
  }
}
