/**
 * `@contextengine/adk`: `@google/adk` (ADK TypeScript) drop-ins on the contextengine sidecar. See
 * clients/typescript-adk/README.md.
 */
export { Connection, type ConnectionInit } from "./connection.js";
export { ContextEngineContextTools, ContextEngineTool } from "./context_tools.js";
export {
  contentFromProto,
  contentToProto,
  EventConversionError,
  eventFromProto,
  eventToProto,
  msToSeconds,
  secondsToMs,
  sessionFromProto,
  stateToStruct,
} from "./convert.js";
export { SessionAlreadyExistsError, SessionNotFoundError, StaleSessionError } from "./errors.js";
export { ContextEngineMemoryService, entryToAdk, MAX_QUERY_CHARS } from "./memory.js";
export {
  applyCacheDecision,
  ContextEnginePlugin,
  MAX_CONTEXT_VIEWS,
  systemInstructionContent,
} from "./plugin.js";
export { ContextEngineSessionService, lastSequenceOf, paginate } from "./sessions.js";
