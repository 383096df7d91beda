/**
 * The TypeScript conformance harness: each op of the driver (clients/conformance/driver.py) through
 * `ContextEngineClient`, one JSON object per line on stdin and stdout (the protocol is in
 * clients/conformance/README.md). The client's methods are named after the RPCs.
 */
import { createInterface } from "node:readline";
import {
  type DescMessage,
  type DescService,
  fromJson,
  type JsonValue,
  type Message,
  toJson,
} from "@bufbuild/protobuf";
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

type Json = Record<string, unknown>;
const json = { useProtoFieldName: true };
type Call = (request: Message, options: object) => Promise<Message> | AsyncGenerator<Message>;
const SERVICES: DescService[] = [
  SessionService,
  ContextService,
  CompactionService,
  SubscriptionService,
  MemoryService,
  ContextToolsService,
];

function error(err: unknown): Json {
  if (!(err instanceof ContextEngineError)) throw err;
  return { code: err.code, message: err.detail, reason: err.reason, metadata: err.metadata };
}

interface Stream {
  output: DescMessage;
  frames: AsyncGenerator<Message>;
  controller: AbortController;
  pending?: Promise<Json> | undefined;
}

let client: ContextEngineClient | undefined;
const streams = new Map<string, Stream>();

function close(name: string): void {
  const stream = streams.get(name);
  stream?.controller.abort();
  stream?.pending?.catch(() => undefined);
  streams.delete(name);
}

async function next(stream: Stream, ms: number): Promise<Json> {
  stream.pending ??= stream.frames.next().then(
    (r) => (r.done ? { end: true } : { frame: toJson(stream.output, r.value, json) }),
    (err: unknown) => ({ error: error(err) }),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Json>((resolve) => {
    timer = setTimeout(() => resolve({ timeout: true }), Math.max(0, ms));
  });
  const reply = await Promise.race([stream.pending, timeout]);
  clearTimeout(timer);
  if (!("timeout" in reply)) stream.pending = undefined;
  return reply;
}

async function handle(op: Json): Promise<Json> {
  if (op.op === "connect") {
    client = new ContextEngineClient(String(op.target));
    return {};
  }
  if (op.op === "close") {
    close(String(op.stream));
    return {};
  }
  const stream = streams.get(String(op.stream));
  if (op.op === "next" && stream !== undefined) return next(stream, Number(op.timeout_ms));
  if (client === undefined) throw new Error("not connected");
  const [service, rpc] = String(op.method).split("/");
  const desc = SERVICES.find((s) => s.name === service)?.methods.find((m) => m.name === rpc);
  if (desc === undefined) return { fail: `ContextEngineClient has no method for ${op.method}` };
  let request: Message;
  try {
    request = fromJson(desc.input, (op.request ?? {}) as JsonValue);
  } catch (err) {
    return { fail: `request does not parse as ${desc.input.typeName}: ${err}` };
  }
  const call = (client as unknown as Record<string, Call>)[desc.localName]?.bind(client);
  if (call === undefined) return { fail: `ContextEngineClient has no method ${desc.localName}` };
  if (op.op === "open") {
    const controller = new AbortController();
    try {
      // The client reopens broken streams by itself; the driver's resume is a new call.
      const frames = call(request, { signal: controller.signal, maxFailures: 5 });
      const output = desc.output;
      streams.set(String(op.stream), {
        output,
        frames: frames as AsyncGenerator<Message>,
        controller,
      });
      return {};
    } catch (err) {
      return { error: error(err) };
    }
  }
  const options = { timeoutMs: Number(op.timeout_ms) };
  try {
    let response: Message;
    if (rpc === "CallContextTool") {
      // Through the helper a model loop uses, as every harness does.
      const r = request as CallContextToolRequest;
      const tools = client.contextTools({
        appName: r.appName,
        userId: r.userId,
        sessionId: r.sessionId,
        agentName: r.agentName,
        ...(r.branch !== undefined ? { branch: r.branch } : {}),
        ...(r.isolationScope !== undefined ? { isolationScope: r.isolationScope } : {}),
      });
      response = await tools.call(r.call ?? {}, { ...options, invocationId: r.invocationId });
    } else {
      response = await (call(request, options) as Promise<Message>);
    }
    return { response: toJson(desc.output, response, json) };
  } catch (err) {
    return { error: error(err) };
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
for await (const line of lines) {
  let reply: Json;
  try {
    reply = await handle(JSON.parse(line) as Json);
  } catch (err) {
    reply = { fail: `harness: ${err instanceof Error ? err.message : String(err)}` };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
for (const name of [...streams.keys()]) close(name);
client?.close();
