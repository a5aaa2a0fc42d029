// The pure translation between Anthropic's Messages API and the chat-completions machinery (src/api/anthropic/*)
// and Anthropic's error shape (src/api/errors.ts).
import { describe, expect, it } from 'vitest';
import { chatRequestOf, promptOf } from '../../src/api/anthropic/to-chat.js';
import { AnthropicEventStream, formatEvent, messageOf, stopReasonOf, toolInput, type MessageMeta } from '../../src/api/anthropic/from-chat.js';
import { anthropicErrorType, anthropicValidationBody, errorBody, errorStyleOfUrl } from '../../src/api/errors.js';
import { MessageCreateRequest } from '../../src/schemas/anthropic.js';
import { ChatCompletionRequest, type ChatCompletionChunk, type ChatCompletionResponse } from '../../src/protocol/openai.js';
import { DomainError } from '../../src/errors/domain-errors.js';

const req = (body: Record<string, unknown>) => MessageCreateRequest.parse({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], ...body });
const tool = { name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };

function refusal(body: Record<string, unknown>): DomainError {
  try {
    chatRequestOf(req(body));
  } catch (err) {
    if (err instanceof DomainError) return err;
    throw err;
  }
  throw new Error('translated');
}

describe('Anthropic request → chat request', () => {
  it('maps system, sampling, stop sequences and max_tokens; the result is a valid chat request', () => {
    const chat = chatRequestOf(req({ system: [{ type: 'text', text: 'A' }, { type: 'text', text: 'B' }], temperature: 0.5, top_p: 0.9, top_k: 7, stop_sequences: ['END'] }));
    expect(chat).toEqual({
      model: 'm', max_tokens: 10, temperature: 0.5, top_p: 0.9, top_k: 7, stop: ['END'],
      messages: [{ role: 'system', content: 'A\nB' }, { role: 'user', content: 'hi' }],
    });
    expect(ChatCompletionRequest.safeParse(chat).success).toBe(true);
    expect(chatRequestOf(req({ system: 'S', stream: true }))).toMatchObject({ stream: true, return_token_ids: true, messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'hi' }] });
  });

  it('turns tool_use blocks into tool_calls and tool_result blocks into tool messages, in block order', () => {
    const chat = chatRequestOf(req({
      tools: [tool],
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }, { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } }] },
        { role: 'user', content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'cold' },
          { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'warm' }, { type: 'text', text: 'dry' }], is_error: true },
          { type: 'text', text: 'thanks' },
        ] },
      ],
    }));
    expect(chat.messages).toEqual([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: 'Let me look.', tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        { id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
      ] },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'cold' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: warm\ndry' },
      { role: 'user', content: 'thanks' },
    ]);
    expect(chat.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'weather', parameters: tool.input_schema } }]);
    const onlyCall = chatRequestOf(req({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't' }] }] }));
    expect((onlyCall.messages as unknown[])[1]).toMatchObject({ role: 'assistant', content: null });
    expect((onlyCall.messages as unknown[])[2]).toEqual({ role: 'tool', tool_call_id: 't', content: '' });
    expect(ChatCompletionRequest.safeParse(chat).success).toBe(true);
  });

  it('maps tool_choice auto / any / tool / none and disable_parallel_tool_use', () => {
    expect(chatRequestOf(req({ tools: [tool], tool_choice: { type: 'auto' } })).tool_choice).toBe('auto');
    expect(chatRequestOf(req({ tools: [tool], tool_choice: { type: 'any', disable_parallel_tool_use: true } }))).toMatchObject({ tool_choice: 'required', parallel_tool_calls: false });
    expect(chatRequestOf(req({ tools: [tool], tool_choice: { type: 'tool', name: 'get_weather' } })).tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(chatRequestOf(req({ tools: [tool], tool_choice: { type: 'none' } })).tool_choice).toBe('none');
    expect(chatRequestOf(req({ tools: [tool] })).tool_choice).toBeUndefined();
  });

  it('maps output_config.format json_schema to response_format', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    expect(chatRequestOf(req({ output_config: { format: { type: 'json_schema', schema } } })).response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema, strict: true } });
  });

  it('refuses what it cannot serve, naming the field', () => {
    expect(refusal({ thinking: { type: 'enabled', budget_tokens: 1024 } })).toMatchObject({ kind: 'invalid', param: 'thinking' });
    expect(chatRequestOf(req({ thinking: { type: 'disabled' } }))).toBeTruthy();
    expect(refusal({ tools: [{ ...tool, type: 'bash_20250124' }] }).message).toContain('server tools ("bash_20250124") are not supported');
    expect(refusal({ messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }).message).toBe('messages.0.content.0: image blocks are not supported by this server (text, tool_use and tool_result are)');
    expect(refusal({ messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'prefill' }] }).message).toContain('the last message must be a user message');
    expect(refusal({ tools: [tool], tool_choice: { type: 'tool', name: 'nope' } }).message).toBe('tool_choice.name: no tool named "nope" in tools');
    expect(refusal({ tool_choice: { type: 'any' } }).message).toBe('tool_choice: type "any" needs tools');
    expect(refusal({ messages: [{ role: 'assistant', content: [{ type: 'tool_result', tool_use_id: 'x' }] }, { role: 'user', content: 'x' }] }).message).toContain('tool_result blocks belong in user messages');
    expect(refusal({ mcp_servers: [{}] }).param).toBe('mcp_servers');
    expect(refusal({ seed: 3 }).message).toBe('seed: Extra inputs are not permitted');
    expect(chatRequestOf(req({ metadata: { user_id: 'u' }, service_tier: 'auto', cache_control: { type: 'ephemeral' } }))).not.toHaveProperty('metadata');
    expect(refusal({ output_config: { effort: 'high' } }).param).toBe('output_config.effort');
    expect(MessageCreateRequest.safeParse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'video' }] }] }).success).toBe(false);
  });

  it('count_tokens takes the prompt half only', () => {
    expect(promptOf({ model: 'm', messages: [{ role: 'user', content: 'x' }], system: 's' })).toEqual({ model: 'm', messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'x' }] });
  });
});

const meta: MessageMeta = { id: 'msg_1', model: 'm', maxTokens: 10, stopSequences: ['END'] };

function chatResponse(message: Record<string, unknown>, finish: string, stopReason: string | number | null, usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 }): ChatCompletionResponse {
  return {
    id: 'chatcmpl-1', object: 'chat.completion', created: 0, model: 'm', system_fingerprint: null, usage,
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, logprobs: { content: null, refusal: null }, finish_reason: finish, stop_reason: stopReason }],
  } as ChatCompletionResponse;
}

describe('chat result → Anthropic message', () => {
  it('text and tool calls become blocks; usage and ids as Anthropic has them', () => {
    const m = messageOf(chatResponse({ content: 'Sure.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, 'tool_calls', null), meta);
    expect(m).toMatchObject({
      id: 'msg_1', type: 'message', role: 'assistant', model: 'm', stop_reason: 'tool_use', stop_sequence: null,
      content: [{ type: 'text', text: 'Sure.', citations: null }, { type: 'tool_use', id: 'call_1', name: 'f', input: { a: 1 }, caller: { type: 'direct' } }],
      usage: { input_tokens: 5, output_tokens: 3, service_tier: 'standard' },
    });
    expect(messageOf(chatResponse({ content: '' }, 'stop', null), meta).content).toEqual([]);
  });

  it('stop reasons: stop sequence, end turn, max tokens, context window, tool use', () => {
    expect(stopReasonOf('stop', 'END', 3, meta)).toEqual({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    expect(stopReasonOf('stop', null, 3, meta)).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
    expect(stopReasonOf('stop', 7, 3, meta).stop_reason).toBe('end_turn'); // a stop token id, not a sequence
    expect(stopReasonOf('length', null, 10, meta).stop_reason).toBe('max_tokens');
    expect(stopReasonOf('length', null, 4, meta).stop_reason).toBe('model_context_window_exceeded');
    expect(stopReasonOf('tool_calls', null, 4, meta).stop_reason).toBe('tool_use');
  });

  it('a tool call whose arguments are not a JSON object keeps its text as the input', () => {
    expect(toolInput('{"a": [1')).toBe('{"a": [1');
    expect(toolInput('[1]')).toBe('[1]');
    expect(toolInput('{"a":2}')).toEqual({ a: 2 });
  });
});

const chunk = (delta: Record<string, unknown>, extra: Partial<ChatCompletionChunk['choices'][0]> = {}, top: Partial<ChatCompletionChunk> = {}): ChatCompletionChunk =>
  ({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }], ...top }) as ChatCompletionChunk;

describe('chat chunks → Anthropic events', () => {
  it('message_start with the prompt tokens and a ping, text deltas, tool calls with streamed arguments, closing events', () => {
    const s = new AnthropicEventStream(meta);
    const events = [
      ...s.onChunk(chunk({ role: 'assistant', content: '' }, {}, { prompt_token_ids: [1, 2, 3, 4, 5] })),
      ...s.onChunk(chunk({ content: 'Hel' })),
      ...s.onChunk(chunk({ content: 'lo' })),
      ...s.onChunk(chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] })),
      ...s.onChunk(chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] })),
      ...s.onChunk(chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'g', arguments: '{}' } }] })),
      ...s.onChunk(chunk({}, { finish_reason: 'tool_calls', stop_reason: null })),
      ...s.end({ prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 }),
    ];
    expect(events.map((e) => e.data)).toEqual([
      { type: 'message_start', message: expect.objectContaining({ id: 'msg_1', content: [], stop_reason: null, usage: expect.objectContaining({ input_tokens: 5, output_tokens: 0 }) }) },
      { type: 'ping' },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '', citations: null } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'call_1', name: 'f', input: {}, caller: { type: 'direct' } } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a"' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: ':1}' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'call_2', name: 'g', input: {}, caller: { type: 'direct' } } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{}' } },
      { type: 'content_block_stop', index: 2 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null, stop_details: null, container: null }, usage: expect.objectContaining({ input_tokens: 5, output_tokens: 9 }) },
      { type: 'message_stop' },
    ]);
    expect(events.every((e) => e.event === e.data.type)).toBe(true);
    expect(formatEvent(events[1])).toBe('event: ping\ndata: {"type":"ping"}\n\n');
  });

  it('a stream that produced nothing still starts and ends the message; a stop sequence is named', () => {
    const s = new AnthropicEventStream(meta);
    s.onChunk({ ...chunk({}, { finish_reason: 'stop', stop_reason: 'END' }) });
    const events = s.end({ prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 });
    expect(events.map((e) => e.event)).toEqual(['message_delta', 'message_stop']);
    expect(events[0].data.delta).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    const empty = new AnthropicEventStream(meta).end({ prompt_tokens: 2, completion_tokens: 0, total_tokens: 2 });
    expect(empty.map((e) => e.event)).toEqual(['message_start', 'ping', 'message_delta', 'message_stop']);
  });
});

describe("Anthropic's error shape", () => {
  it('types follow the status; bodies are {type:"error", error:{type,message}}', () => {
    expect([400, 401, 403, 404, 413, 429, 500, 501, 503].map(anthropicErrorType)).toEqual([
      'invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'api_error', 'overloaded_error',
    ]);
    expect(errorBody('anthropic', 'nope', { status: 404 })).toEqual({ type: 'error', error: { type: 'not_found_error', message: 'nope' } });
    expect(anthropicValidationBody([{ loc: ['body', 'messages', 0, 'content'], msg: 'Field required', type: 'missing' }, { loc: ['body', 'x'], msg: 'y', type: 'z' }])).toEqual({
      type: 'error', error: { type: 'invalid_request_error', message: 'messages.0.content: Field required (and 1 more problem)' },
    });
    expect(errorStyleOfUrl('/v1/messages')).toBe('anthropic');
    expect(errorStyleOfUrl('/v1/messages/count_tokens?beta=true')).toBe('anthropic');
    expect(errorStyleOfUrl('/v1/messagesx')).toBe('openai');
  });
});
