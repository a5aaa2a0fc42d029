// Chat-completions results → Anthropic Messages results. Pure: `messageOf` turns a whole chat completion into a
// Message; `AnthropicEventStream` turns the chat chunks of a streamed request into Anthropic's server-sent events
// (message_start, ping, content_block_start / _delta / _stop with text_delta or input_json_delta, message_delta,
// message_stop), whatever way the chunks split the text and the tool calls' arguments.
import type { ChatCompletionChunk, ChatCompletionResponse, Usage } from '../../protocol/openai.js';
import type { AnthropicMessage, ResponseContentBlock, StopReason } from '../../schemas/anthropic.js';

/** What a result needs from its request: the model name the client gave, its max_tokens and stop sequences. */
export interface MessageMeta {
  id: string;
  model: string;
  maxTokens: number;
  stopSequences: readonly string[];
}

/**
 * Anthropic's stop reason for a chat finish: a matched stop sequence (the chat's stop_reason is the string) →
 * stop_sequence; other stops → end_turn; length → max_tokens when the output reached max_tokens, else the context
 * ran out (model_context_window_exceeded); tool calls → tool_use.
 */
export function stopReasonOf(finish: string | null, chatStopReason: string | number | null | undefined, outputTokens: number, meta: MessageMeta): { stop_reason: StopReason; stop_sequence: string | null } {
  if (finish === 'tool_calls') return { stop_reason: 'tool_use', stop_sequence: null };
  if (finish === 'length') return { stop_reason: outputTokens >= meta.maxTokens ? 'max_tokens' : 'model_context_window_exceeded', stop_sequence: null };
  if (typeof chatStopReason === 'string' && meta.stopSequences.includes(chatStopReason)) return { stop_reason: 'stop_sequence', stop_sequence: chatStopReason };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/** A tool call's arguments as the block's input: the JSON object, or the text as generated when it is not one (a call cut by max_tokens). */
export function toolInput(args: string): unknown {
  try {
    const v: unknown = JSON.parse(args);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : args;
  } catch {
    return args;
  }
}

export function usageOf(inputTokens: number, outputTokens: number): AnthropicMessage['usage'] {
  return {
    input_tokens: inputTokens, output_tokens: outputTokens,
    cache_creation_input_tokens: null, cache_read_input_tokens: null, cache_creation: null, server_tool_use: null, output_tokens_details: null, inference_geo: null,
    service_tier: 'standard',
  };
}

export function messageOf(chat: ChatCompletionResponse, meta: MessageMeta): AnthropicMessage {
  const choice = chat.choices[0];
  const content: ResponseContentBlock[] = [];
  if (choice.message.content) content.push({ type: 'text', text: choice.message.content, citations: null });
  for (const call of choice.message.tool_calls ?? [])
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: toolInput(call.function.arguments), caller: { type: 'direct' } });
  return {
    id: meta.id, type: 'message', role: 'assistant', model: meta.model, content,
    ...stopReasonOf(choice.finish_reason, choice.stop_reason, chat.usage.completion_tokens, meta),
    stop_details: null, container: null, diagnostics: null,
    usage: usageOf(chat.usage.prompt_tokens, chat.usage.completion_tokens),
  };
}

/** One server-sent event: its name and data object. */
export interface AnthropicEvent {
  event: string;
  data: Record<string, unknown>;
}

/** `event: …` and `data: …` lines of one event, as Anthropic sends them. */
export function formatEvent(e: AnthropicEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

const event = (name: string, data: Record<string, unknown>): AnthropicEvent => ({ event: name, data: { type: name, ...data } });

/** Turns a streamed chat request's chunks (choice 0) into Anthropic's events. */
export class AnthropicEventStream {
  private started = false;
  /** Index of the open content block, -1 when none is open. */
  private open = -1;
  private openKind: 'text' | 'tool_use' | null = null;
  private blocks = 0;
  private finish: string | null = null;
  private chatStopReason: string | number | null = null;

  constructor(private readonly meta: MessageMeta) {}

  /** message_start (input tokens: the prompt's token ids in the first chunk) and a ping, once. */
  private start(promptTokens: number): AnthropicEvent[] {
    if (this.started) return [];
    this.started = true;
    const message = {
      id: this.meta.id, type: 'message', role: 'assistant', model: this.meta.model, content: [],
      stop_reason: null, stop_sequence: null, stop_details: null, container: null, diagnostics: null, usage: usageOf(promptTokens, 0),
    };
    return [event('message_start', { message }), event('ping', {})];
  }

  private openBlock(kind: 'text' | 'tool_use', block: Record<string, unknown>): AnthropicEvent[] {
    const out = this.closeBlock();
    this.open = this.blocks++;
    this.openKind = kind;
    out.push(event('content_block_start', { index: this.open, content_block: block }));
    return out;
  }

  private closeBlock(): AnthropicEvent[] {
    if (this.open < 0) return [];
    const out = [event('content_block_stop', { index: this.open })];
    this.open = -1;
    this.openKind = null;
    return out;
  }

  onChunk(chunk: ChatCompletionChunk): AnthropicEvent[] {
    const out = this.start(chunk.prompt_token_ids?.length ?? 0);
    const choice = chunk.choices.find((c) => c.index === 0);
    if (!choice) return out;
    const text = choice.delta.content;
    if (text) {
      if (this.openKind !== 'text') out.push(...this.openBlock('text', { type: 'text', text: '', citations: null }));
      out.push(event('content_block_delta', { index: this.open, delta: { type: 'text_delta', text } }));
    }
    for (const call of choice.delta.tool_calls ?? []) {
      // A delta with an id starts a call; later deltas of that call carry only more arguments.
      if (call.id) out.push(...this.openBlock('tool_use', { type: 'tool_use', id: call.id, name: call.function.name ?? '', input: {}, caller: { type: 'direct' } }));
      const args = call.function.arguments;
      if (args && this.openKind === 'tool_use') out.push(event('content_block_delta', { index: this.open, delta: { type: 'input_json_delta', partial_json: args } }));
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.chatStopReason = choice.stop_reason ?? null;
    }
    return out;
  }

  /** After the last chunk: close the open block, then message_delta (stop reason, usage) and message_stop. */
  end(usage: Usage): AnthropicEvent[] {
    const out = [...this.start(usage.prompt_tokens), ...this.closeBlock()];
    const delta = { ...stopReasonOf(this.finish, this.chatStopReason, usage.completion_tokens, this.meta), stop_details: null, container: null };
    const deltaUsage = {
      input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens,
      cache_creation_input_tokens: null, cache_read_input_tokens: null, server_tool_use: null, output_tokens_details: null,
    };
    out.push(event('message_delta', { delta, usage: deltaUsage }), event('message_stop', {}));
    return out;
  }
}
