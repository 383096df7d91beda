/** The contextengine TypeScript client. See clients/typescript/README.md for a tour. */
export {
  type BuildContextInit,
  type BuildContextOptions,
  baseUrlOf,
  bearerToken,
  type CallOptions,
  ContextEngineClient,
  type ContextEngineClientOptions,
  eventsOf,
  frameCursor,
  type Init,
  type StreamOptions,
  type TlsOptions,
} from "./client.js";
export {
  CONTEXT_TOOL_NAMES,
  type ContextToolCallOptions,
  type ContextToolRunOptions,
  ContextTools,
  type ContextToolsInit,
  type FunctionCallInit,
  genaiDeclaration,
  type ToolFormat,
  toolArguments,
} from "./context_tools.js";
export { ContextView, type ContextViewInit, reassemble } from "./context_view.js";
export {
  ContextEngineError,
  type ContextEngineErrorInit,
  ERROR_DOMAIN,
  hasReason,
  STATUS_CODES,
  type StatusCode,
  statusCodeName,
  toContextEngineError,
} from "./errors.js";
export {
  CanonicalizationError,
  type ContentInit,
  canonicalize,
  canonicalNumber,
  compareUtf16,
  contentJson,
  FINGERPRINT_VERSION,
  type FingerprintInput,
  type FingerprintParts,
  fingerprint,
  fingerprintDocument,
  normalizeTools,
} from "./fingerprint.js";
export * from "./gen/contextengine/v1/compaction_service_pb.js";
export * from "./gen/contextengine/v1/config_pb.js";
export * from "./gen/contextengine/v1/content_pb.js";
export * from "./gen/contextengine/v1/context_service_pb.js";
export * from "./gen/contextengine/v1/context_tools_service_pb.js";
export * from "./gen/contextengine/v1/errors_pb.js";
export * from "./gen/contextengine/v1/event_pb.js";
export * from "./gen/contextengine/v1/memory_pb.js";
export * from "./gen/contextengine/v1/memory_service_pb.js";
export * from "./gen/contextengine/v1/session_pb.js";
export * from "./gen/contextengine/v1/session_service_pb.js";
export * from "./gen/contextengine/v1/subscription_service_pb.js";
export { type ErrorInfo, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
export {
  type AnthropicMessageParam,
  type AnthropicMessagesPart,
  type AnthropicSystemParam,
  isRenderableFormat,
  type OpenAIChatPart,
  type OpenAIResponsesPart,
  partItems,
  type RenderableFormat,
  type RenderedItem,
  type RenderedItemOf,
  type RenderedItems,
  type RequestPart,
  type RequestPartOf,
  type RequestParts,
  requestPart,
} from "./rendered.js";
export { RenderedView, type RenderedViewInit, type Rendering } from "./rendered_view.js";
export { isResumable } from "./resume.js";
export { traceContext } from "./tracing.js";
