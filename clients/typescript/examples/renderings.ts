/**
 * One context, three providers' shapes (clients/typescript/README.md, "Renderings"): a session rendered
 * for OpenAI Chat Completions, the OpenAI Responses API and Anthropic Messages, each sent with the
 * provider's own SDK; then a RenderedView that sends only the new items of the next rendering.
 *
 * With a sidecar running (`make run` in the repository root), against any OpenAI-compatible
 * server and any Anthropic one (the tests point them at a local fake of both APIs):
 *
 *   OPENAI_BASE_URL=... ANTHROPIC_BASE_URL=... npx tsx examples/renderings.ts --target 127.0.0.1:50151
 */
import { parseArgs } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { ContextEngineClient, ContextEngineError, RenderFormat } from "../src/index.js";

const APP = "renderings-demo";
const SYSTEM = { parts: [{ text: "You plan trips." }] };

function said(author: string, text: string) {
  const role = author === "user" ? "user" : "model";
  return { author, invocationId: "i1", content: { role, parts: [{ text }] } };
}

export async function renderings(target: string): Promise<void> {
  const ce = new ContextEngineClient(target, { timeoutMs: 5_000 });
  const openai = new OpenAI({
    baseURL: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1",
    apiKey: process.env.OPENAI_API_KEY ?? "-",
  });
  const anthropic = new Anthropic({
    baseURL: process.env.ANTHROPIC_BASE_URL ?? "https://api.anthropic.com",
    apiKey: process.env.ANTHROPIC_API_KEY ?? "-",
  });
  try {
    const { session } = await ce.createSession({ appName: APP, userId: "ann" });
    const address = { appName: APP, userId: "ann", sessionId: session?.id ?? "" };
    await ce.appendEvents({
      ...address,
      events: [
        said("user", "A weekend in Lisbon, please."),
        said("planner", "Friday to Sunday, by train."),
        said("user", "And where do we stay?"),
      ],
    });
    const request = { ...address, agentName: "planner", systemInstruction: SYSTEM };

    // The same context, rendered for each provider's SDK: spread it into the call.
    const chat = await ce.renderContext(request, RenderFormat.OPENAI_CHAT);
    const reply = await openai.chat.completions.create({ model: "gpt-4o", ...chat });
    console.log("OpenAI chat:", reply.choices[0]?.message.content);

    const responses = await ce.renderContext(request, RenderFormat.OPENAI_RESPONSES);
    const answer = await openai.responses.create({ model: "gpt-4o", ...responses });
    console.log("OpenAI responses:", answer.output_text);

    // A view keeps the items of its last rendering: the next one sends only the new items.
    const view = ce.renderedView(request, RenderFormat.ANTHROPIC_MESSAGES);
    for (const question of ["", "Somewhere near the river?"]) {
      if (question) {
        await ce.appendEvent({ ...address, event: said("user", question) });
      }
      const { part, answer: rendered } = await view.build();
      const message = await anthropic.messages.create({
        model: "claude-sonnet-4-5",
        max_tokens: 1024,
        ...part,
      });
      const text = message.content.flatMap((block) => (block.type === "text" ? [block.text] : []));
      const held = rendered.rendered?.baseItemsCount ?? 0;
      console.log(`Anthropic (${held} held, ${part.messages.length - held} new):`, text.join(""));
      await ce.appendEvent({ ...address, event: said("planner", text.join("")) });
    }
  } finally {
    ce.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { target: { type: "string" } } });
  const target = values.target ?? process.env.CONTEXTENGINE_TARGET ?? "127.0.0.1:50151";
  renderings(target).catch((err: unknown) => {
    if (err instanceof ContextEngineError) {
      console.error(`error: ${err.message} (code ${err.code}, reason ${err.reason || "none"})`);
    } else {
      console.error(err);
    }
    process.exitCode = 1;
  });
}
