/**
 * The TypeScript conformance runner: executes the shared YAML scenarios through
 * `ContextEngineClient` (so client-side validation, error mapping, retries and followed streams
 * are exercised), with the same rules and the same output as the Python reference runner.
 *
 *   npx tsx conformance/runner.ts --target 127.0.0.1:50151 ../conformance/scenarios
 *
 * Output: one JSON object per line for every step and every scenario, then a closing line
 * `conformance (typescript): N passed, M failed`. Exit status 0 when every scenario passed.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import {
  type DescMessage,
  type DescMethod,
  type DescService,
  fromJson,
  type JsonValue,
  type Message,
  toJson,
} from "@bufbuild/protobuf";
import { parse as parseYaml } from "yaml";
import { ContextEngineClient } from "../src/client.js";
import { ContextEngineError } from "../src/errors.js";
import { CompactionService } from "../src/gen/contextengine/v1/compaction_service_pb.js";
import { ContextService } from "../src/gen/contextengine/v1/context_service_pb.js";
import {
  type CallContextToolRequest,
  ContextToolsService,
} from "../src/gen/contextengine/v1/context_tools_service_pb.js";
import { MemoryService } from "../src/gen/contextengine/v1/memory_service_pb.js";
import { SessionService } from "../src/gen/contextengine/v1/session_service_pb.js";
import { SubscriptionService } from "../src/gen/contextengine/v1/subscription_service_pb.js";
import { lookup, match, ScenarioError, StepFailure, substitute } from "./match.js";

export const RUNNER = "typescript";
const DEFAULT_CALL_TIMEOUT_MS = 10_000;
const DEFAULT_FRAME_TIMEOUT_MS = 5_000;
const DEFAULT_QUIET_MS = 300;
const DEFAULT_POLL_TIMEOUT_MS = 15_000;
const DEFAULT_POLL_INTERVAL_MS = 50;

const SERVICES: Record<string, DescService> = {
  SessionService,
  ContextService,
  CompactionService,
  SubscriptionService,
  MemoryService,
  ContextToolsService,
};

const STEP_KEYS: Record<string, readonly string[]> = {
  call: ["request", "expect", "expect_error", "capture", "timeout_ms"],
  poll: ["request", "until", "capture", "timeout_ms", "interval_ms"],
  subscribe: ["stream", "request"],
  expect_frames: ["frames", "capture", "timeout_ms"],
  expect_no_frames: ["within_ms"],
  expect_stream_error: ["error", "timeout_ms"],
  disconnect: [],
  resume: [],
  sleep_ms: [],
};
const STEP_KINDS = Object.keys(STEP_KEYS);
const COMMON_KEYS = ["name", "note"];
const SCENARIO_KEYS = ["name", "description", "tags", "steps"];

type Json = Record<string, unknown>;
type Step = Record<string, unknown>;

/** One line of the report. */
export interface Result {
  runner: string;
  scenario: string;
  step: number | null;
  status: "pass" | "fail" | "skip";
  message: string;
  ms: number;
  label?: string;
}

export interface Scenario {
  name: string;
  path: string;
  data: unknown;
}

interface Failure {
  code: string;
  reason: string;
  metadata: Record<string, string>;
  message: string;
}

function failureOf(err: unknown): Failure {
  if (err instanceof ContextEngineError) {
    return {
      code: err.code,
      reason: err.reason,
      metadata: { ...err.metadata },
      message: err.detail,
    };
  }
  throw err;
}

function describe(f: Failure): string {
  return `${f.code} ${f.reason}: ${f.message} ${JSON.stringify(f.metadata)}`;
}

function checkError(expected: unknown, got: Failure): void {
  const unknown = Object.keys((expected as Json) ?? {}).filter(
    (k) => !["code", "reason", "metadata"].includes(k),
  );
  if (unknown.length > 0) {
    throw new ScenarioError(`unknown error key(s) ${JSON.stringify(unknown.sort())}`);
  }
  match(expected, { code: got.code, reason: got.reason, metadata: got.metadata }, "error");
}

// --- methods -------------------------------------------------------------------------------------

interface Method {
  name: string;
  desc: DescMethod;
}

function resolve(name: unknown): Method {
  if (typeof name !== "string") {
    throw new ScenarioError(`a method name is a string, not ${JSON.stringify(name)}`);
  }
  const [serviceName, methodName] = name.split("/");
  const service = serviceName === undefined ? undefined : SERVICES[serviceName];
  if (service === undefined) {
    throw new ScenarioError(`unknown service ${JSON.stringify(serviceName)}`);
  }
  const desc = service.methods.find((m) => m.name === methodName);
  if (desc === undefined) {
    throw new ScenarioError(`unknown method ${JSON.stringify(name)}`);
  }
  return { name, desc };
}

function parseRequest(desc: DescMessage, json: unknown): Message {
  try {
    return fromJson(desc, (json ?? {}) as JsonValue);
  } catch (err) {
    throw new ScenarioError(
      `request does not parse as ${desc.typeName}: ${err instanceof Error ? err.message : err}`,
    );
  }
}

function asJson(desc: DescMessage, message: Message): Json {
  return toJson(desc, message, { useProtoFieldName: true }) as Json;
}

type UnaryMethod = (request: Message, options: { timeoutMs: number }) => Promise<Message>;
type StreamMethod = (
  request: Message,
  options: { signal: AbortSignal; maxFailures: number },
) => AsyncGenerator<Message, void, undefined>;

/**
 * RPCs the runner sends through a helper of the client rather than the method named after them
 * (the helper sends every field of the request, so nothing is dropped).
 */
const ADAPTERS: Record<string, (client: ContextEngineClient) => UnaryMethod> = {
  "ContextToolsService/CallContextTool": (client) => (message, options) => {
    const request = message as CallContextToolRequest;
    const tools = client.contextTools({
      appName: request.appName,
      userId: request.userId,
      sessionId: request.sessionId,
      agentName: request.agentName,
      ...(request.branch !== undefined ? { branch: request.branch } : {}),
      ...(request.isolationScope !== undefined ? { isolationScope: request.isolationScope } : {}),
    });
    return tools.call(request.call ?? {}, { ...options, invocationId: request.invocationId });
  },
};

/** The client's method for an RPC: the wrapper's methods are named after the RPCs. */
function clientMethod<T>(client: ContextEngineClient, method: Method): T {
  const fn = (client as unknown as Record<string, unknown>)[method.desc.localName];
  if (typeof fn !== "function") {
    throw new ScenarioError(`ContextEngineClient has no method ${method.desc.localName}`);
  }
  return fn.bind(client) as T;
}

// --- streams -------------------------------------------------------------------------------------

function frameCursor(frame: Json): string {
  for (const kind of ["event", "caught_up", "heartbeat"]) {
    const value = frame[kind] as Json | undefined;
    if (value !== undefined) {
      return String(value.cursor ?? "");
    }
  }
  const batch = frame.events as Json | undefined;
  if (batch !== undefined) {
    const events = (batch.events as Json[] | undefined) ?? [];
    return String(events[events.length - 1]?.cursor ?? "");
  }
  return "";
}

type Next =
  | { kind: "frame"; frame: Json }
  | { kind: "ended" }
  | { kind: "failed"; failure: Failure };

class Stream {
  cursor = "";
  private frames: AsyncGenerator<Message, void, undefined> | undefined;
  private pending: Promise<Next> | undefined;
  private controller: AbortController | undefined;
  private outcome: Next | undefined;

  constructor(
    readonly method: Method,
    readonly request: Json,
  ) {}

  open(client: ContextEngineClient): void {
    this.close();
    this.outcome = undefined;
    this.controller = new AbortController();
    try {
      const call = clientMethod<StreamMethod>(client, this.method);
      // The client reopens broken streams by itself; a scenario's explicit resume is a new call.
      this.frames = call(parseRequest(this.method.desc.input, this.request), {
        signal: this.controller.signal,
        maxFailures: 5,
      });
    } catch (err) {
      this.outcome = { kind: "failed", failure: failureOf(err) };
    }
  }

  /** The next frame, or undefined when nothing came within `timeoutMs`. */
  async next(timeoutMs: number): Promise<Next | undefined> {
    if (this.outcome !== undefined) {
      return this.outcome;
    }
    if (this.frames === undefined) {
      throw new ScenarioError("the stream is not open");
    }
    if (this.pending === undefined) {
      this.pending = this.frames.next().then(
        (r): Next =>
          r.done
            ? { kind: "ended" }
            : { kind: "frame", frame: asJson(this.method.desc.output, r.value) },
        (err: unknown): Next => ({ kind: "failed", failure: failureOf(err) }),
      );
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), Math.max(0, timeoutMs));
    });
    const result = await Promise.race([this.pending, timeout]);
    clearTimeout(timer);
    if (result === undefined) {
      return undefined;
    }
    this.pending = undefined;
    if (result.kind === "frame") {
      this.cursor = frameCursor(result.frame) || this.cursor;
    } else {
      this.outcome = result;
    }
    return result;
  }

  close(): void {
    this.controller?.abort();
    this.pending?.catch(() => undefined);
    this.pending = undefined;
    this.frames = undefined;
  }
}

// --- scenarios -----------------------------------------------------------------------------------

export function loadScenarios(directory: string, only: readonly string[] = []): Scenario[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) {
        walk(path);
      } else if (entry.endsWith(".yaml")) {
        files.push(path);
      }
    }
  };
  walk(directory);
  // Python's sorted(rglob()) orders by the whole path; do the same.
  files.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return files
    .map((path) => ({
      name: relative(directory, path).replace(/\.yaml$/, ""),
      path,
      data: parseYaml(readFileSync(path, "utf8")) as unknown,
    }))
    .filter((s) => only.length === 0 || only.some((o) => s.name.includes(o)));
}

export function checkShape(data: unknown): void {
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new ScenarioError("a scenario is a mapping");
  }
  const scenario = data as Json;
  const unknown = Object.keys(scenario).filter((k) => !SCENARIO_KEYS.includes(k));
  if (unknown.length > 0) {
    throw new ScenarioError(`unknown scenario key(s) ${JSON.stringify(unknown.sort())}`);
  }
  for (const key of ["name", "description", "steps"]) {
    if (!(key in scenario)) {
      throw new ScenarioError(`missing scenario key ${JSON.stringify(key)}`);
    }
  }
  const steps = scenario.steps;
  if (!Array.isArray(steps) || steps.length === 0) {
    throw new ScenarioError("steps must be a non-empty list");
  }
  steps.forEach((step: unknown, i) => {
    if (typeof step !== "object" || step === null || Array.isArray(step)) {
      throw new ScenarioError(`step ${i}: a step is a mapping`);
    }
    const kinds = STEP_KINDS.filter((k) => k in step);
    const [kind] = kinds;
    if (kinds.length !== 1 || kind === undefined) {
      throw new ScenarioError(`step ${i}: exactly one of ${STEP_KINDS.join(", ")} is required`);
    }
    const allowed = [...(STEP_KEYS[kind] ?? []), ...COMMON_KEYS, kind];
    const extra = Object.keys(step).filter((k) => !allowed.includes(k));
    if (extra.length > 0) {
      throw new ScenarioError(
        `step ${i} (${kind}): unknown key(s) ${JSON.stringify(extra.sort())}`,
      );
    }
    if (kind === "call" && "expect" in step && "expect_error" in step) {
      throw new ScenarioError(`step ${i}: expect and expect_error exclude each other`);
    }
    if (kind === "subscribe" && !("stream" in step)) {
      throw new ScenarioError(`step ${i}: subscribe needs a stream name`);
    }
  });
}

function stepKind(step: Step): string {
  const kind = STEP_KINDS.find((k) => k in step);
  if (kind === undefined) {
    throw new ScenarioError("a step without a kind");
  }
  return kind;
}

function stepLabel(step: Step): string {
  const kind = stepKind(step);
  return typeof step.name === "string" && step.name ? step.name : `${kind} ${String(step[kind])}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class Runner {
  constructor(
    private readonly client: ContextEngineClient,
    private readonly emit: (result: Result) => void = () => undefined,
  ) {}

  async run(scenario: Scenario): Promise<boolean> {
    const started = performance.now();
    try {
      checkShape(scenario.data);
    } catch (err) {
      this.report(scenario.name, null, "fail", `malformed: ${(err as Error).message}`, 0);
      return false;
    }
    const runId = randomBytes(4).toString("hex");
    const variables: Record<string, unknown> = { run: runId, app: `conf-${RUNNER}-${runId}` };
    const streams = new Map<string, Stream>();
    const steps = (scenario.data as Json).steps as Step[];
    let ok = true;
    try {
      for (const [i, step] of steps.entries()) {
        const label = stepLabel(step);
        if (!ok) {
          this.report(scenario.name, i, "skip", "", 0, label);
          continue;
        }
        const t0 = performance.now();
        try {
          await this.step(step, variables, streams);
          this.report(scenario.name, i, "pass", "", performance.now() - t0, label);
        } catch (err) {
          if (!(err instanceof StepFailure || err instanceof ScenarioError)) {
            throw err;
          }
          ok = false;
          this.report(scenario.name, i, "fail", err.message, performance.now() - t0, label);
        }
      }
    } finally {
      for (const stream of streams.values()) {
        stream.close();
      }
    }
    this.report(scenario.name, null, ok ? "pass" : "fail", "", performance.now() - started);
    return ok;
  }

  private report(
    scenario: string,
    step: number | null,
    status: Result["status"],
    message: string,
    ms: number,
    label = "",
  ): void {
    const result: Result = {
      runner: RUNNER,
      scenario,
      step,
      status,
      message,
      ms: Math.round(ms * 10) / 10,
    };
    if (label) {
      result.label = label;
    }
    this.emit(result);
  }

  private async unary(method: Method, request: unknown, timeoutMs: number): Promise<Json> {
    if (method.desc.methodKind !== "unary") {
      throw new ScenarioError(`${method.name} is a stream: use subscribe`);
    }
    const adapter = ADAPTERS[method.name];
    const call = adapter ? adapter(this.client) : clientMethod<UnaryMethod>(this.client, method);
    const response = await call(parseRequest(method.desc.input, request), { timeoutMs });
    return asJson(method.desc.output, response);
  }

  private async step(step: Step, variables: Record<string, unknown>, streams: Map<string, Stream>) {
    const kind = stepKind(step);
    switch (kind) {
      case "call":
        return this.call(step, variables);
      case "poll":
        return this.poll(step, variables);
      case "subscribe": {
        const method = resolve(step.subscribe);
        if (method.desc.methodKind !== "server_streaming") {
          throw new ScenarioError(`${method.name} is not a stream`);
        }
        const name = String(step.stream);
        streams.get(name)?.close();
        const stream = new Stream(method, substitute(step.request ?? {}, variables) as Json);
        stream.open(this.client);
        streams.set(name, stream);
        return;
      }
      case "expect_frames":
        return this.expectFrames(step, variables, streamNamed(streams, step.expect_frames));
      case "expect_no_frames":
        return this.expectNoFrames(step, streamNamed(streams, step.expect_no_frames));
      case "expect_stream_error":
        return this.expectStreamError(
          step,
          variables,
          streamNamed(streams, step.expect_stream_error),
        );
      case "disconnect":
        streamNamed(streams, step.disconnect).close();
        return;
      case "resume": {
        const stream = streamNamed(streams, step.resume);
        stream.close();
        if (stream.cursor && stream.method.name.endsWith("/SubscribeEvents")) {
          const scope = stream.request.scope ?? "SUBSCRIPTION_SCOPE_UNSPECIFIED";
          const bySequence = [
            "SUBSCRIPTION_SCOPE_UNSPECIFIED",
            "SUBSCRIPTION_SCOPE_SESSION",
            0,
            1,
          ].includes(scope as string | number);
          stream.request[bySequence ? "after_sequence" : "after_cursor"] = stream.cursor;
        }
        stream.open(this.client);
        return;
      }
      case "sleep_ms":
        await sleep(Number(step.sleep_ms));
        return;
      default:
        throw new ScenarioError(`unknown step kind ${kind}`);
    }
  }

  private async call(step: Step, variables: Record<string, unknown>): Promise<void> {
    const method = resolve(step.call);
    const request = substitute(step.request ?? {}, variables);
    const timeoutMs = Number(step.timeout_ms ?? DEFAULT_CALL_TIMEOUT_MS);
    let data: Json;
    try {
      data = await this.unary(method, request, timeoutMs);
    } catch (err) {
      if (err instanceof ScenarioError) {
        throw err;
      }
      const failure = failureOf(err);
      if (!("expect_error" in step)) {
        throw new StepFailure(`unexpected error: ${describe(failure)}`);
      }
      checkError(substitute(step.expect_error, variables), failure);
      return;
    }
    if ("expect_error" in step) {
      throw new StepFailure(`expected an error, got ${JSON.stringify(data)}`);
    }
    if ("expect" in step) {
      match(substitute(step.expect, variables), data, "response");
    }
    capture(step, variables, data);
  }

  private async poll(step: Step, variables: Record<string, unknown>): Promise<void> {
    const method = resolve(step.poll);
    const request = substitute(step.request ?? {}, variables);
    const until = substitute(step.until ?? {}, variables);
    const timeoutMs = Number(step.timeout_ms ?? DEFAULT_POLL_TIMEOUT_MS);
    const interval = Number(step.interval_ms ?? DEFAULT_POLL_INTERVAL_MS);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let last: Json;
      try {
        last = await this.unary(method, request, DEFAULT_CALL_TIMEOUT_MS);
      } catch (err) {
        if (err instanceof ScenarioError) {
          throw err;
        }
        throw new StepFailure(`unexpected error while polling: ${describe(failureOf(err))}`);
      }
      try {
        match(until, last, "response");
      } catch (err) {
        if (!(err instanceof StepFailure)) {
          throw err;
        }
        if (Date.now() >= deadline) {
          throw new StepFailure(`not reached within ${timeoutMs} ms: ${err.message}`);
        }
        await sleep(interval);
        continue;
      }
      capture(step, variables, last);
      return;
    }
  }

  private async expectFrames(
    step: Step,
    variables: Record<string, unknown>,
    stream: Stream,
  ): Promise<void> {
    const expected = substitute(step.frames ?? [], variables) as unknown[];
    const deadline = Date.now() + Number(step.timeout_ms ?? DEFAULT_FRAME_TIMEOUT_MS);
    const received: Json[] = [];
    for (const [i, exp] of expected.entries()) {
      const wantsHeartbeat = typeof exp === "object" && exp !== null && "heartbeat" in exp;
      const frame = await nextFrame(stream, deadline, wantsHeartbeat, `frame ${i}`);
      try {
        match(exp, frame, `frames[${i}]`);
      } catch (err) {
        if (err instanceof StepFailure) {
          throw new StepFailure(`${err.message} (frame: ${JSON.stringify(frame)})`);
        }
        throw err;
      }
      received.push(frame);
    }
    capture(step, variables, { frames: received });
  }

  private async expectNoFrames(step: Step, stream: Stream): Promise<void> {
    const deadline = Date.now() + Number(step.within_ms ?? DEFAULT_QUIET_MS);
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        return;
      }
      const next = await stream.next(remaining);
      if (next === undefined || next.kind !== "frame") {
        return;
      }
      if (!("heartbeat" in next.frame)) {
        throw new StepFailure(`expected no frame, got ${JSON.stringify(next.frame)}`);
      }
    }
  }

  private async expectStreamError(
    step: Step,
    variables: Record<string, unknown>,
    stream: Stream,
  ): Promise<void> {
    const deadline = Date.now() + Number(step.timeout_ms ?? DEFAULT_FRAME_TIMEOUT_MS);
    const expected = substitute(step.error ?? {}, variables);
    for (;;) {
      const remaining = deadline - Date.now();
      const next = remaining > 0 ? await stream.next(remaining) : undefined;
      if (next === undefined) {
        throw new StepFailure("timed out waiting for the stream to fail");
      }
      if (next.kind === "ended") {
        throw new StepFailure("the stream ended without an error");
      }
      if (next.kind === "failed") {
        checkError(expected, next.failure);
        return;
      }
      if (!("heartbeat" in next.frame)) {
        throw new StepFailure(`expected the stream to fail, got ${JSON.stringify(next.frame)}`);
      }
    }
  }
}

async function nextFrame(
  stream: Stream,
  deadline: number,
  wantsHeartbeat: boolean,
  what: string,
): Promise<Json> {
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      throw new StepFailure(`timed out waiting for ${what}`);
    }
    const next = await stream.next(remaining);
    if (next === undefined) {
      throw new StepFailure(`timed out waiting for ${what}`);
    }
    if (next.kind === "ended") {
      throw new StepFailure(`the stream ended before ${what}`);
    }
    if (next.kind === "failed") {
      throw new StepFailure(`the stream failed before ${what}: ${describe(next.failure)}`);
    }
    if ("heartbeat" in next.frame && !wantsHeartbeat) {
      continue;
    }
    return next.frame;
  }
}

function capture(step: Step, variables: Record<string, unknown>, data: unknown): void {
  const captures = (step.capture ?? {}) as Record<string, string>;
  for (const [name, path] of Object.entries(captures)) {
    variables[name] = lookup(data, path);
  }
}

function streamNamed(streams: Map<string, Stream>, name: unknown): Stream {
  const stream = streams.get(String(name));
  if (stream === undefined) {
    throw new ScenarioError(`no stream named ${JSON.stringify(name)} (subscribe first)`);
  }
  return stream;
}

/** Runs scenarios one after the other on one client; returns [passed, failed]. */
export async function runScenarios(
  target: string,
  scenarios: readonly Scenario[],
  emit: (result: Result) => void,
): Promise<[number, number]> {
  const client = new ContextEngineClient(target);
  try {
    const runner = new Runner(client, emit);
    let passed = 0;
    let failed = 0;
    for (const scenario of scenarios) {
      if (await runner.run(scenario)) {
        passed += 1;
      } else {
        failed += 1;
      }
    }
    return [passed, failed];
  } finally {
    client.close();
  }
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      target: { type: "string" },
      only: { type: "string", multiple: true, default: [] },
      report: { type: "string" },
    },
    allowPositionals: true,
  });
  const [directory] = positionals;
  if (!values.target || directory === undefined) {
    console.error(
      "usage: runner.ts --target HOST:PORT [--only NAME]... [--report FILE] SCENARIO_DIR",
    );
    return 2;
  }
  const scenarios = loadScenarios(directory, values.only ?? []);
  if (scenarios.length === 0) {
    console.error(`no scenarios found in ${directory}`);
    return 2;
  }
  const lines: string[] = [];
  const report = values.report;
  const [passed, failed] = await runScenarios(values.target, scenarios, (result) => {
    const line = JSON.stringify(result);
    if (report === undefined) {
      process.stdout.write(`${line}\n`);
      return;
    }
    lines.push(line);
    if (result.status === "fail" && result.step !== null) {
      process.stdout.write(
        `FAIL ${result.scenario} step ${result.step} (${result.label ?? ""}): ${result.message}\n`,
      );
    }
  });
  if (report !== undefined) {
    mkdirSync(dirname(report), { recursive: true });
    writeFileSync(report, lines.map((l) => `${l}\n`).join(""));
  }
  process.stdout.write(`conformance (${RUNNER}): ${passed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
