package dev.contextengine.client;

import com.google.protobuf.DescriptorProtos.MethodOptions.IdempotencyLevel;
import dev.contextengine.v1.CompactionServiceGrpc;
import dev.contextengine.v1.ContextServiceGrpc;
import dev.contextengine.v1.ContextToolsServiceGrpc;
import dev.contextengine.v1.MemoryServiceGrpc;
import dev.contextengine.v1.SessionServiceGrpc;
import dev.contextengine.v1.SubscriptionServiceGrpc;
import io.grpc.MethodDescriptor;
import io.grpc.ServiceDescriptor;
import io.grpc.protobuf.ProtoMethodDescriptorSupplier;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Which RPCs may be retried: read from the protos, where each method declares it.
 *
 * <p>Every method of {@code proto/contextengine/v1/*_service.proto} carries the standard {@code
 * idempotency_level} option ({@code NO_SIDE_EFFECTS} for reads, {@code IDEMPOTENT} for writes a
 * repeat leaves as one did). The client retries exactly those that declare one, after {@code
 * UNAVAILABLE}, and no other. The generated grpc-java descriptors hold the option ({@link
 * MethodDescriptor#getSchemaDescriptor()}, a {@link ProtoMethodDescriptorSupplier}), so the rule is
 * written once, in the contract; the Python and TypeScript clients read it the same way, and the
 * Kotlin client calls this one.
 */
public final class Retryability {
  private static final List<ServiceDescriptor> SERVICES =
      List.of(
          SessionServiceGrpc.getServiceDescriptor(),
          ContextServiceGrpc.getServiceDescriptor(),
          SubscriptionServiceGrpc.getServiceDescriptor(),
          CompactionServiceGrpc.getServiceDescriptor(),
          MemoryServiceGrpc.getServiceDescriptor(),
          ContextToolsServiceGrpc.getServiceDescriptor());

  /** Full gRPC method name ("contextengine.v1.SessionService/GetSession") to its level. */
  private static final Map<String, IdempotencyLevel> LEVELS = levels();

  private Retryability() {}

  private static Map<String, IdempotencyLevel> levels() {
    Map<String, IdempotencyLevel> levels = new LinkedHashMap<>();
    for (ServiceDescriptor service : SERVICES) {
      for (MethodDescriptor<?, ?> method : service.getMethods()) {
        levels.put(method.getFullMethodName(), declaredLevel(method));
      }
    }
    return Collections.unmodifiableMap(levels);
  }

  /** The method's declared {@code idempotency_level}, from its proto descriptor. */
  public static IdempotencyLevel declaredLevel(MethodDescriptor<?, ?> method) {
    if (!(method.getSchemaDescriptor() instanceof ProtoMethodDescriptorSupplier supplier)) {
      throw new IllegalArgumentException(
          method.getFullMethodName() + " has no proto descriptor to read its idempotency from");
    }
    return supplier.getMethodDescriptor().getOptions().getIdempotencyLevel();
  }

  /**
   * Whether the RPC may be repeated, as its proto declares. An RPC outside the contract is an error
   * (a wrong descriptor would otherwise silently disable retries).
   */
  public static boolean isRetryable(MethodDescriptor<?, ?> method) {
    IdempotencyLevel level = LEVELS.get(method.getFullMethodName());
    if (level == null) {
      throw new IllegalArgumentException("no such RPC: " + method.getFullMethodName());
    }
    return level != IdempotencyLevel.IDEMPOTENCY_UNKNOWN;
  }

  /** "Service/Method" (e.g. "SessionService/GetSession") of every RPC of the contract, sorted. */
  public static Set<String> allMethods() {
    Set<String> names = new TreeSet<>();
    LEVELS.keySet().forEach(name -> names.add(shortName(name)));
    return Collections.unmodifiableSet(names);
  }

  /** "Service/Method" of every RPC whose proto declares it safe to repeat, sorted. */
  public static Set<String> retryableMethods() {
    Set<String> names = new TreeSet<>();
    LEVELS.forEach(
        (name, level) -> {
          if (level != IdempotencyLevel.IDEMPOTENCY_UNKNOWN) {
            names.add(shortName(name));
          }
        });
    return Collections.unmodifiableSet(names);
  }

  private static String shortName(String fullMethodName) {
    return fullMethodName.substring("contextengine.v1.".length());
  }
}
