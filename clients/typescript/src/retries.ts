/**
 * Which RPCs may be retried: read from the protos, where each method declares it.
 *
 * Every method of `proto/contextengine/v1/*_service.proto` carries the standard
 * `idempotency_level` option (NO_SIDE_EFFECTS for reads, IDEMPOTENT for writes a repeat leaves as
 * one did); the client retries exactly those that declare one, after UNAVAILABLE, and no other.
 * The generated service descriptors hold it (`DescMethod.idempotency`), so the rule is written
 * once, in the contract, and the Python, Java and Kotlin clients read it the same way.
 */
import type { DescService } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { CompactionService } from "./gen/contextengine/v1/compaction_service_pb.js";
import { ContextService } from "./gen/contextengine/v1/context_service_pb.js";
import { ContextToolsService } from "./gen/contextengine/v1/context_tools_service_pb.js";
import { MemoryService } from "./gen/contextengine/v1/memory_service_pb.js";
import { SessionService } from "./gen/contextengine/v1/session_service_pb.js";
import { SubscriptionService } from "./gen/contextengine/v1/subscription_service_pb.js";

const SERVICES: readonly DescService[] = [
  SessionService,
  ContextService,
  SubscriptionService,
  CompactionService,
  MemoryService,
  ContextToolsService,
];

const METHODS = SERVICES.flatMap((service) =>
  service.methods.map((m) => ({ name: `${service.name}/${m.name}`, idempotency: m.idempotency })),
);

/** "Service/Method" (e.g. "SessionService/GetSession") of every RPC of the contract. */
export const ALL_METHODS: ReadonlySet<string> = new Set(METHODS.map((m) => m.name));

/** "Service/Method" of every RPC whose proto declares it safe to repeat. */
export const RETRYABLE_METHODS: ReadonlySet<string> = new Set(
  METHODS.filter((m) => m.idempotency !== MethodOptions_IdempotencyLevel.IDEMPOTENCY_UNKNOWN).map(
    (m) => m.name,
  ),
);

/**
 * Whether `method` ("Service/Method") may be repeated, as its proto declares. Throws for a name
 * that is no RPC of the contract (a typo would otherwise silently disable retries).
 */
export function isRetryable(method: string): boolean {
  if (!ALL_METHODS.has(method)) {
    throw new Error(`no such RPC: ${method}`);
  }
  return RETRYABLE_METHODS.has(method);
}
