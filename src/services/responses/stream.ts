// The engine's chat.completion.chunk stream → the Responses API's event stream (pure), in the order OpenAI
// documents: response.created, response.in_progress; per message item output_item.added,
// content_part.added, output_text.delta…, output_text.done, content_part.done, output_item.done; per
// function call output_item.added, function_call_arguments.delta…, function_call_arguments.done,
// output_item.done; then response.completed (or response.incomplete when cut). Every event carries the
// next sequence_number. Items are opened when their first text or call arrives and closed before the
// next one opens, so no two items are ever open at once.
import type { ChatCompletionChunk, Usage } from '../../protocol/openai.js';
import type { OutputFunctionCall, OutputItem, OutputMessage, OutputTextLogprob, ResponseObject } from '../../schemas/responses.js';
import { eventLogprobs, finishedResponse, newResponsesId, outputLogprobs, outputTextPart, statusOf } from './output.js';

export interface ResponsesStreamEvent {
  type: string;
  sequence_number: number;
  [field: string]: unknown;
}

type ChatFinishReason = NonNullable<ChatCompletionChunk['choices'][number]['finish_reason']>;

interface OpenMessage {
  item: OutputMessage;
  outputIndex: number;
  text: string;
  logprobs: OutputTextLogprob[];
}

interface OpenCall {
  item: OutputFunctionCall;
  outputIndex: number;
  /** The chat stream's index of this call. */
  chatIndex: number;
}

export class ResponseEventStream {
  private sequence = 0;
  private started = false;
  private readonly output: OutputItem[] = [];
  private message: OpenMessage | null = null;
  private call: OpenCall | null = null;
  private readonly seenCalls = new Set<number>();
  /** Logprobs of tokens whose text the chat stream held back (a tool call might begin): they go with the next text. */
  private pendingLogprobs: OutputTextLogprob[] = [];
  private finishReason: ChatFinishReason | null = null;

  constructor(
    private readonly skeleton: ResponseObject,
    private readonly opts: { logprobs: boolean },
  ) {}

  /** response.created and response.in_progress, once (onChunk starts the stream itself). */
  start(): ResponsesStreamEvent[] {
    if (this.started) return [];
    this.started = true;
    const response = { ...this.skeleton, status: 'in_progress' as const };
    return [this.event('response.created', { response }), this.event('response.in_progress', { response })];
  }

  onChunk(chunk: ChatCompletionChunk): ResponsesStreamEvent[] {
    const out = this.start();
    const choice = chunk.choices[0];
    if (!choice) return out; // a usage-only chunk
    const logprobs = this.opts.logprobs ? outputLogprobs(choice.logprobs?.content) : [];
    const text = choice.delta.content ?? '';
    if (text !== '') {
      if (!this.message) out.push(...this.closeCall(), ...this.openMessage());
      const m = this.message!;
      const tokenLogprobs = [...this.pendingLogprobs, ...logprobs];
      this.pendingLogprobs = [];
      m.text += text;
      m.logprobs.push(...tokenLogprobs);
      out.push(this.event('response.output_text.delta', { item_id: m.item.id, output_index: m.outputIndex, content_index: 0, delta: text, logprobs: eventLogprobs(tokenLogprobs) }));
    } else {
      this.pendingLogprobs.push(...logprobs);
    }
    for (const delta of choice.delta.tool_calls ?? []) {
      if (!this.seenCalls.has(delta.index)) {
        this.seenCalls.add(delta.index);
        out.push(...this.closeMessage('completed'), ...this.closeCall(), ...this.openCall(delta.index, delta.id, delta.function.name));
      }
      const call = this.call;
      const args = delta.function.arguments ?? '';
      if (call && call.chatIndex === delta.index && args !== '') {
        call.item.arguments += args;
        out.push(this.event('response.function_call_arguments.delta', { item_id: call.item.id, output_index: call.outputIndex, delta: args }));
      }
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  /** Close what is open and end with the whole response and its usage. */
  finish(usage: Usage | null): ResponsesStreamEvent[] {
    const out = this.start();
    const lastStatus = this.finishReason === 'length' ? 'incomplete' : 'completed';
    // A response always has an output: an answer with no text and no call is an empty message.
    if (!this.message && !this.call && this.output.length === 0) out.push(...this.openMessage());
    out.push(...this.closeMessage(lastStatus), ...this.closeCall(lastStatus));
    const response = this.response(usage);
    out.push(this.event(statusOf(this.finishReason).status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response }));
    return out;
  }

  /** A failure after the stream began: OpenAI's `error` event, then response.failed with what was made. */
  fail(message: string, code: string | null, param: string | null): ResponsesStreamEvent[] {
    const out = this.start();
    // What was open stays as far as it got, marked incomplete (no done events: the stream ends here).
    if (this.message) Object.assign(this.message.item, { status: 'incomplete', content: [outputTextPart(this.message.text, this.message.logprobs)] });
    if (this.call) this.call.item.status = 'incomplete';
    this.message = this.call = null;
    out.push(this.event('error', { code, message, param }));
    const response = { ...this.skeleton, status: 'failed' as const, error: { code: 'server_error', message }, output: [...this.output] };
    out.push(this.event('response.failed', { response }));
    return out;
  }

  /** The final response object (also what a client gets from the SDK's finalResponse()). */
  response(usage: Usage | null): ResponseObject {
    return finishedResponse(this.skeleton, [...this.output], this.finishReason, usage);
  }

  private event(type: string, fields: Record<string, unknown>): ResponsesStreamEvent {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  private openMessage(): ResponsesStreamEvent[] {
    const item: OutputMessage = { id: newResponsesId('msg'), type: 'message', status: 'in_progress', role: 'assistant', content: [] };
    const m: OpenMessage = { item, outputIndex: this.output.length, text: '', logprobs: [] };
    this.message = m;
    this.output.push(item);
    return [
      this.event('response.output_item.added', { output_index: m.outputIndex, item: structuredClone(item) }),
      this.event('response.content_part.added', { item_id: item.id, output_index: m.outputIndex, content_index: 0, part: outputTextPart('', []) }),
    ];
  }

  private closeMessage(status: 'completed' | 'incomplete'): ResponsesStreamEvent[] {
    const m = this.message;
    if (!m) return [];
    this.message = null;
    // Tokens with no text of their own left (the end-of-sequence token) belong to the message: the done event
    // and the final part list every token's logprob, as the whole (non-streamed) answer does.
    m.logprobs.push(...this.pendingLogprobs);
    this.pendingLogprobs = [];
    const part = outputTextPart(m.text, m.logprobs);
    m.item.content = [part];
    m.item.status = status;
    const at = { item_id: m.item.id, output_index: m.outputIndex, content_index: 0 };
    return [
      this.event('response.output_text.done', { ...at, text: m.text, logprobs: eventLogprobs(m.logprobs) }),
      this.event('response.content_part.done', { ...at, part }),
      this.event('response.output_item.done', { output_index: m.outputIndex, item: structuredClone(m.item) }),
    ];
  }

  private openCall(chatIndex: number, callId: string | undefined, name: string | undefined): ResponsesStreamEvent[] {
    const item: OutputFunctionCall = {
      id: newResponsesId('fc'), type: 'function_call', status: 'in_progress', call_id: callId ?? `call_${newResponsesId('fc').slice(3, 27)}`, name: name ?? '', arguments: '',
    };
    this.call = { item, outputIndex: this.output.length, chatIndex };
    this.output.push(item);
    return [this.event('response.output_item.added', { output_index: this.call.outputIndex, item: structuredClone(item) })];
  }

  private closeCall(status: 'completed' | 'incomplete' = 'completed'): ResponsesStreamEvent[] {
    const c = this.call;
    if (!c) return [];
    this.call = null;
    c.item.status = status;
    return [
      this.event('response.function_call_arguments.done', { item_id: c.item.id, output_index: c.outputIndex, arguments: c.item.arguments, name: c.item.name }),
      this.event('response.output_item.done', { output_index: c.outputIndex, item: structuredClone(c.item) }),
    ];
  }
}

/** One event as SSE: OpenAI names each event (`event:`) as well as carrying its type in the data. */
export function sseOf(event: ResponsesStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}
