package dev.contextengine.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The one exception {@link ContextEngineClient} throws (unchecked): the gRPC status code and, when
 * the server sent one, the {@code google.rpc.ErrorInfo} reason, domain and metadata (see {@code
 * proto/contextengine/v1/errors.proto} for every reason and its metadata).
 *
 * <pre>{@code
 * try {
 *   client.getSession(request);
 * } catch (ContextEngineException e) {
 *   if (e.code() == Status.Code.NOT_FOUND && e.reason().equals("SESSION_NOT_FOUND")) { ... }
 * }
 * }</pre>
 */
public final class ContextEngineException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The domain of every reason the engine sends. */
  public static final String DOMAIN = "contextengine.v1";

  private static final Pattern TRANSPORT_LIMIT =
      Pattern.compile("Received message larger than max \\((\\d+) vs\\. (\\d+)\\)");

  private final Status.Code code;
  private final String reason;
  private final String domain;
  private final transient Map<String, String> metadata;
  private final String method;
  private final String detail;
  private final boolean clientSide;

  /**
   * An exception with every part given (clients raise their own with this; the client builds the
   * others from gRPC statuses).
   */
  public ContextEngineException(
      Status.Code code,
      String detail,
      String reason,
      String domain,
      Map<String, String> metadata,
      String method,
      boolean clientSide,
      Throwable cause) {
    super(headline(code, reason, method, detail), cause);
    this.code = Objects.requireNonNull(code, "code");
    this.reason = reason == null ? "" : reason;
    this.domain = domain == null ? "" : domain;
    this.metadata = metadata == null ? Map.of() : Map.copyOf(metadata);
    this.method = method == null ? "" : method;
    this.detail = detail == null ? "" : detail;
    this.clientSide = clientSide;
  }

  private static String headline(Status.Code code, String reason, String method, String detail) {
    StringBuilder text = new StringBuilder();
    if (method != null && !method.isEmpty()) {
      text.append(method).append(": ");
    }
    text.append(code);
    if (reason != null && !reason.isEmpty()) {
      text.append(' ').append(reason);
    }
    return text.append(": ").append(detail == null ? "" : detail).toString();
  }

  /** The gRPC status code, e.g. {@code NOT_FOUND}. */
  public Status.Code code() {
    return code;
  }

  /** {@code ErrorInfo.reason}, e.g. {@code "SESSION_NOT_FOUND"}; {@code ""} when none was sent. */
  public String reason() {
    return reason;
  }

  /**
   * {@code ErrorInfo.domain} ({@code "contextengine.v1"} for the engine's errors) or {@code ""}.
   */
  public String domain() {
    return domain;
  }

  /** {@code ErrorInfo.metadata}, e.g. {@code {field=session_id}}; never null. */
  public Map<String, String> metadata() {
    return metadata == null ? Map.of() : new TreeMap<>(metadata);
  }

  /** The RPC that failed, e.g. {@code "SessionService/GetSession"} ({@code ""} if unknown). */
  public String method() {
    return method;
  }

  /** The status message as sent (without the prefix {@link #getMessage()} adds). */
  public String detail() {
    return detail;
  }

  /**
   * True when the client raised it without an answer from the server (validation, connection,
   * deadline, cancellation).
   */
  public boolean clientSide() {
    return clientSide;
  }

  /**
   * Whether the server refused the id in {@code field} ({@code "session_id"}, ...) before looking
   * anything up: missing ({@code MISSING_FIELD}) or malformed ({@code INVALID_ID}: too long,
   * control characters, surrounding whitespace). Such an id names nothing, so the ADK drop-ins
   * answer a get of it as ADK does a get of a missing session.
   */
  public boolean isInvalidId(String field) {
    return ("MISSING_FIELD".equals(reason) || "INVALID_ID".equals(reason))
        && metadata != null
        && field.equals(metadata.get("field"));
  }

  /** The same error with another message (the client explains connection failures). */
  ContextEngineException withDetail(String newDetail) {
    return new ContextEngineException(
        code, newDetail, reason, domain, metadata, method, clientSide, getCause());
  }

  /** Whatever a gRPC call failed with, as a ContextEngineException. */
  public static ContextEngineException from(Throwable error, String method) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof ContextEngineException) {
      return (ContextEngineException) t;
    }
    if (t instanceof CancellationException) {
      return new ContextEngineException(
          Status.Code.CANCELLED, "the call was cancelled", "", "", Map.of(), method, true, t);
    }
    Status status = Status.fromThrowable(t);
    ErrorInfo info = null;
    com.google.rpc.Status details = null;
    if (t instanceof StatusRuntimeException || t instanceof StatusException) {
      details = StatusProto.fromThrowable(t);
    }
    if (details != null) {
      for (Any any : details.getDetailsList()) {
        if (!any.is(ErrorInfo.class)) {
          continue;
        }
        try {
          ErrorInfo candidate = any.unpack(ErrorInfo.class);
          if (info == null || DOMAIN.equals(candidate.getDomain())) {
            info = candidate;
          }
        } catch (InvalidProtocolBufferException ignored) {
          // a malformed detail is as good as none
        }
      }
    }
    Status.Code code = status.getCode();
    boolean clientSide =
        info == null
            && (code == Status.Code.UNAVAILABLE
                || code == Status.Code.DEADLINE_EXCEEDED
                || code == Status.Code.CANCELLED);
    String description = status.getDescription() == null ? "" : status.getDescription();
    if (info == null && code == Status.Code.RESOURCE_EXHAUSTED) {
      // errors.proto: beyond twice its limit the server's gRPC transport refuses a request from
      // its length prefix, without ErrorInfo; that is REQUEST_TOO_LARGE too.
      Matcher m = TRANSPORT_LIMIT.matcher(description);
      if (m.find()) {
        return new ContextEngineException(
            code,
            description,
            "REQUEST_TOO_LARGE",
            DOMAIN,
            Map.of(
                "request_bytes", m.group(1),
                "transport_limit_bytes", m.group(2),
                "refused_by", "server_transport"),
            method,
            false,
            t);
      }
    }
    return new ContextEngineException(
        code,
        description,
        info == null ? "" : info.getReason(),
        info == null ? "" : info.getDomain(),
        info == null ? Map.of() : info.getMetadataMap(),
        method,
        clientSide,
        t);
  }

  /** An error the client itself finds in {@code method}'s answer (no reason, no metadata). */
  static ContextEngineException clientSide(
      Status.Code code, String detail, String method, Throwable cause) {
    return new ContextEngineException(code, detail, "", "", Map.of(), method, true, cause);
  }

  /** INVALID_ARGUMENT / MISSING_FIELD raised before sending, worded like the server's. */
  static ContextEngineException missingField(String method, String field) {
    return new ContextEngineException(
        Status.Code.INVALID_ARGUMENT,
        field + " is required",
        "MISSING_FIELD",
        DOMAIN,
        Map.of("field", field),
        method,
        true,
        null);
  }
}
