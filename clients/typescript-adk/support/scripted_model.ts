/**
 * A scripted model for the example, the parity driver and the benchmark: each model call is
 * answered with the next answer of the current script, and every request it received is kept.
 * Answers are `{text}` (one text part) or `{calls: [{id, name, args}]}` (one function-call part
 * each, with exactly those ids); usage metadata: `promptTokenCount` = the request contents' JSON
 * length / 4, `candidatesTokenCount` = 5.
 */
import { BaseLlm, type BaseLlmConnection, type LlmRequest, type LlmResponse } from "@google/adk";
import type { Content } from "@google/genai";

/** One scripted answer. */
export type Answer =
  | { text: string }
  | { calls: { id: string; name: string; args: Record<string, unknown> }[] };

/** A model call as the model received it. */
export interface ReceivedCall {
  contents: Content[];
  request: LlmRequest;
}

/** The scripted model; `script(answers)` sets the answers of the next turn. */
export class ScriptedModel extends BaseLlm {
  readonly calls: ReceivedCall[] = [];
  private answers: Answer[] = [];
  /** Called with each request before it is answered (the driver records the call there). */
  onCall: ((request: LlmRequest) => Promise<void> | void) | undefined;

  constructor(model = "scripted-model") {
    super({ model });
  }

  /** The answers of the next turn, in order. */
  script(answers: Answer[]): void {
    this.answers = [...answers];
  }

  /** How many answers of the current turn are left. */
  get left(): number {
    return this.answers.length;
  }

  override async *generateContentAsync(llmRequest: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const answer = this.answers.shift();
    if (answer === undefined) {
      throw new Error("the scripted model was called with no answer left in the turn");
    }
    this.calls.push({ contents: structuredClone(llmRequest.contents), request: llmRequest });
    await this.onCall?.(llmRequest);
    const parts =
      "text" in answer
        ? [{ text: answer.text }]
        : answer.calls.map((call) => ({
            functionCall: { id: call.id, name: call.name, args: call.args },
          }));
    yield {
      content: { role: "model", parts },
      usageMetadata: {
        promptTokenCount: Math.floor(JSON.stringify(llmRequest.contents).length / 4),
        candidatesTokenCount: 5,
      },
    };
  }

  override connect(): Promise<BaseLlmConnection> {
    return Promise.reject(new Error("the scripted model has no live connection"));
  }
}
