package dev.contextengine.client;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageOrBuilder;
import com.google.protobuf.Struct;
import com.google.protobuf.util.JsonFormat;
import dev.contextengine.v1.BuildContextRequest;
import dev.contextengine.v1.Content;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.erdtman.jcs.JsonCanonicalizer;
import org.erdtman.jcs.NumberToJSON;

/**
 * The prompt-cache fingerprint, computed in the client: the same lowercase hex SHA-256 the sidecar
 * returns in {@code BuildContextResponse.fingerprint} (docs/design/prompt-cache.md, section 1, is
 * the normative text; every vector of tests/golden/fingerprints/vectors.json is checked by the
 * tests). The digest is taken over the UTF-8 bytes of the RFC 8785 (JCS) canonical JSON of
 *
 * <pre>
 * {"v": 1, "model": ..., "system_instruction": ..., "tools": [...], "tool_config": ...,
 *  "contents": [the first n contents]}
 * </pre>
 *
 * <p>where contents and the system instruction are proto3 JSON with the original (snake_case) field
 * names, tools are normalised (each tool's {@code function_declarations} sorted by name, then the
 * tools sorted by their canonical text), and empty parts are left out.
 *
 * <p>RFC 8785 itself is the RFC co-author's library, {@code
 * io.github.erdtman:java-json-canonicalization} (its canonicalizer and its ECMAScript number
 * formatting), which passes every shared golden vector. What is ours is the edge: a value given as
 * plain Java objects (Map, List, String, Number, Boolean, null) is checked to be JSON (string
 * member names, finite numbers, no lone surrogate, no other type) and written as JSON text for it,
 * and every refusal is a {@link CanonicalizationException}.
 *
 * <pre>{@code
 * BuildContextResponse context = client.buildContext(request);
 * Fingerprint.of(request, context.getContentsList(), context.getCacheableContentsCount())
 *     .equals(context.getFingerprint());
 * }</pre>
 */
public final class Fingerprint {
  private Fingerprint() {}

  /** The {@code "v"} of the fingerprint document. */
  public static final int VERSION = 1;

  private static final Gson GSON = new Gson();

  /** Writes a checked value as JSON text for the canonicalizer (null members kept). */
  private static final Gson WRITER =
      new GsonBuilder().serializeNulls().disableHtmlEscaping().create();

  private static final JsonFormat.Printer PRINTER =
      JsonFormat.printer().preservingProtoFieldNames().omittingInsignificantWhitespace();

  /** The value is not canonicalizable JSON (NaN, an infinity, a lone surrogate, another type). */
  public static final class CanonicalizationException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    CanonicalizationException(String message) {
      super(message);
    }
  }

  /** The RFC 8785 canonical text of a JSON value given as plain Java objects. */
  public static String canonicalize(Object value) {
    Object plain = plain(value);
    // The canonicalizer reads an object or an array: a lone scalar goes in a one-item array,
    // whose canonical text is "[" + the scalar's + "]".
    boolean scalar = !(plain instanceof Map || plain instanceof List);
    String text = WRITER.toJson(scalar ? Collections.singletonList(plain) : plain);
    try {
      String canonical = new JsonCanonicalizer(text).getEncodedString();
      return scalar ? canonical.substring(1, canonical.length() - 1) : canonical;
    } catch (IOException e) {
      throw new CanonicalizationException("not canonicalizable: " + e.getMessage());
    }
  }

  /** The RFC 8785 canonical text of a JSON text. */
  public static String canonicalizeJson(String json) {
    return canonicalize(GSON.fromJson(json, Object.class));
  }

  /** A message as plain JSON (proto3 JSON, original field names). */
  public static Object json(MessageOrBuilder message) {
    try {
      return GSON.fromJson(PRINTER.print(message), Object.class);
    } catch (InvalidProtocolBufferException e) {
      throw new CanonicalizationException("cannot print " + message.getClass() + ": " + e);
    }
  }

  /**
   * {@code value} checked to be JSON, numbers as doubles (what JSON.parse reads), for Gson to write
   * as text: member names are strings, numbers finite, strings without a lone surrogate.
   */
  private static Object plain(Object value) {
    if (value == null || value instanceof Boolean) {
      return value;
    } else if (value instanceof String) {
      checkString((String) value);
      return value;
    } else if (value instanceof Number) {
      double d = ((Number) value).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new CanonicalizationException(d + " is not a JSON number");
      }
      return d;
    } else if (value instanceof List) {
      List<Object> items = new ArrayList<>();
      for (Object item : (List<?>) value) {
        items.add(plain(item));
      }
      return items;
    } else if (value instanceof Map) {
      Map<String, Object> members = new LinkedHashMap<>();
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
        if (!(entry.getKey() instanceof String)) {
          throw new CanonicalizationException("object member names are strings");
        }
        checkString((String) entry.getKey());
        members.put((String) entry.getKey(), plain(entry.getValue()));
      }
      return members;
    }
    throw new CanonicalizationException("a " + value.getClass().getName() + " is not a JSON value");
  }

  private static void checkString(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c)
          && i + 1 < text.length()
          && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw new CanonicalizationException("a string holds a lone surrogate");
      }
    }
  }

  /**
   * The canonical text of a finite number: ECMAScript's {@code Number.prototype.toString} (shortest
   * round-trip digits, exponent form from 1e21 up and below 1e-6), {@code -0} as 0.
   */
  public static String number(double value) {
    if (Double.isNaN(value) || Double.isInfinite(value)) {
      throw new CanonicalizationException(value + " is not a JSON number");
    }
    try {
      return NumberToJSON.serializeNumber(value);
    } catch (IOException e) {
      throw new CanonicalizationException(value + " is not a JSON number: " + e.getMessage());
    }
  }

  private static String declarationName(Object declaration) {
    if (declaration instanceof Map) {
      Object name = ((Map<?, ?>) declaration).get("name");
      if (name instanceof String) {
        return (String) name;
      }
    }
    return "";
  }

  /**
   * Tools in fingerprint order: in each tool a {@code function_declarations} (or {@code
   * functionDeclarations}) list stably sorted by name, then the tools stably sorted by their
   * canonical text. The inputs are not changed.
   */
  public static List<Object> normalizeTools(List<?> tools) {
    List<Map<String, Object>> copies = new ArrayList<>();
    for (Object tool : tools) {
      if (!(tool instanceof Map)) {
        throw new CanonicalizationException("a tool is a JSON object");
      }
      Map<String, Object> copy = new LinkedHashMap<>();
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) tool).entrySet()) {
        copy.put(String.valueOf(entry.getKey()), entry.getValue());
      }
      for (String key : List.of("function_declarations", "functionDeclarations")) {
        Object declarations = copy.get(key);
        if (declarations instanceof List) {
          List<Object> sorted = new ArrayList<>((List<?>) declarations);
          sorted.sort(Comparator.comparing(Fingerprint::declarationName));
          copy.put(key, sorted);
        }
      }
      copies.add(copy);
    }
    List<Object> sorted = new ArrayList<>(copies);
    sorted.sort(Comparator.comparing(Fingerprint::canonicalize));
    return sorted;
  }

  /**
   * The fingerprint document (before canonicalization). {@code tools} and {@code toolConfig} are
   * JSON as plain Java objects (null or empty: left out); {@code systemInstruction} may be null.
   */
  public static Map<String, Object> document(
      String model,
      Content systemInstruction,
      List<?> tools,
      Map<?, ?> toolConfig,
      List<Content> contents,
      int n) {
    Map<String, Object> document = new LinkedHashMap<>();
    document.put("v", VERSION);
    if (model != null && !model.isEmpty()) {
      document.put("model", model);
    }
    if (systemInstruction != null) {
      Object instruction = json(systemInstruction);
      if (instruction instanceof Map && !((Map<?, ?>) instruction).isEmpty()) {
        document.put("system_instruction", instruction);
      }
    }
    if (tools != null && !tools.isEmpty()) {
      document.put("tools", normalizeTools(tools));
    }
    if (toolConfig != null && !toolConfig.isEmpty()) {
      document.put("tool_config", toolConfig);
    }
    int count = Math.min(Math.max(n, 0), contents.size());
    if (count > 0) {
      List<Object> prefix = new ArrayList<>();
      for (Content content : contents.subList(0, count)) {
        prefix.add(json(content));
      }
      document.put("contents", prefix);
    }
    return document;
  }

  /** The fingerprint of these inputs and the first {@code min(n, contents.size())} contents. */
  public static String of(
      String model,
      Content systemInstruction,
      List<?> tools,
      Map<?, ?> toolConfig,
      List<Content> contents,
      int n) {
    return sha256(canonicalize(document(model, systemInstruction, tools, toolConfig, contents, n)));
  }

  /** The fingerprint of a BuildContext request's model, instruction and tools, and contents. */
  public static String of(BuildContextRequest request, List<Content> contents, int n) {
    List<Object> tools = new ArrayList<>();
    for (Struct tool : request.getToolsList()) {
      tools.add(json(tool));
    }
    Map<?, ?> toolConfig =
        request.hasToolConfig() ? (Map<?, ?>) json(request.getToolConfig()) : null;
    return of(
        request.getModel().getModel(),
        request.hasSystemInstruction() ? request.getSystemInstruction() : null,
        tools,
        toolConfig,
        contents,
        n);
  }

  /** Lowercase hex SHA-256 of a text's UTF-8 bytes. */
  public static String sha256(String text) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      return HexFormat.of().formatHex(digest.digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
