// The engine's chat answers and chunks → Responses objects and events (src/services/responses/output.ts and
// stream.ts): items, statuses, usage, logprobs, and the documented event order with sequence numbers.
import { describe, expect, it } from 'vitest';
import type { ChatCompletionChunk, ChatCompletionResponse } from '../../src/protocol/openai.js';
import { ResponseObject, ResponsesRequest, type OutputMessage } from '../../src/schemas/responses.js';
import { responseSkeleton } from '../../src/services/responses/request.js';
import { responseFromChatCompletion } from '../../src/services/responses/output.js';
import { ResponseEventStream, sseOf, type ResponsesStreamEvent } from '../../src/services/responses/stream.js';

const skeleton = () => responseSkeleton(ResponsesRequest.parse({ model: 'm', input: 'hi', max_output_tokens: 9 }), 'resp_x', 100);
const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };

/** A chat logprob entry as the engine writes it: `token_id:<id>` labels, the token's bytes. */
const lp = (id: number, text: string, logprob = -0.5) => ({
  token: `token_id:${id}`, logprob, bytes: [...Buffer.from(text)], top_logprobs: [{ token: `token_id:${id}`, logprob, bytes: [...Buffer.from(text)] }],
});

function completion(message: Partial<ChatCompletionResponse['choices'][number]['message']>, finish: ChatCompletionResponse['choices'][number]['finish_reason'], content = [lp(1, 'He'), lp(2, 'llo')]): ChatCompletionResponse {
  return {
    id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', system_fingerprint: null, usage,
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, logprobs: { content, refusal: null }, finish_reason: finish, stop_reason: null }],
  };
}

describe('responseFromChatCompletion', () => {
  it('gives the text as one completed message item, with usage in the Responses shape', () => {
    const r = responseFromChatCompletion(skeleton(), completion({ content: 'Hello' }, 'stop'), { logprobs: false });
    expect(ResponseObject.parse(r)).toEqual(r);
    expect(r).toMatchObject({ id: 'resp_x', object: 'response', status: 'completed', incomplete_details: null, max_output_tokens: 9, store: false });
    expect(r.output).toEqual([{ id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [], logprobs: [] }] }]);
    expect(r.usage).toEqual({ input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 8 });
  });

  it('writes logprobs with the tokens as text when asked', () => {
    const r = responseFromChatCompletion(skeleton(), completion({ content: 'Hello' }, 'stop'), { logprobs: true });
    const part = (r.output[0] as OutputMessage).content[0];
    expect(part.logprobs.map((l) => l.token)).toEqual(['He', 'llo']);
    expect(part.logprobs[0]).toEqual({ token: 'He', logprob: -0.5, bytes: [72, 101], top_logprobs: [{ token: 'He', logprob: -0.5, bytes: [72, 101] }] });
    // A special token has no bytes: it keeps its label.
    const special = responseFromChatCompletion(skeleton(), completion({ content: '' }, 'stop', [{ token: 'token_id:0', logprob: -1, bytes: [], top_logprobs: [] }]), { logprobs: true });
    expect((special.output[0] as OutputMessage).content[0].logprobs[0].token).toBe('token_id:0');
  });

  it('gives tool calls as function_call items, and no message item when there was no text', () => {
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{"a":1}' } };
    const r = responseFromChatCompletion(skeleton(), completion({ tool_calls: [call] }, 'tool_calls'), { logprobs: false });
    expect(r.status).toBe('completed');
    expect(r.output).toEqual([{ id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', call_id: 'call_1', name: 'f', arguments: '{"a":1}' }]);
    const both = responseFromChatCompletion(skeleton(), completion({ content: 'Sure.', tool_calls: [call] }, 'tool_calls'), { logprobs: false });
    expect(both.output.map((o) => o.type)).toEqual(['message', 'function_call']);
  });

  it('reports an answer cut by the token limit as incomplete, its last item incomplete', () => {
    const r = responseFromChatCompletion(skeleton(), completion({ content: 'Hel' }, 'length'), { logprobs: false });
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.output[0].status).toBe('incomplete');
  });
});

// ---------------------------------------------------------------- streams

function chunk(delta: ChatCompletionChunk['choices'][number]['delta'], extra: Partial<ChatCompletionChunk['choices'][number]> = {}): ChatCompletionChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }] };
}
const text = (t: string, logprobs = [lp(1, t)]) => chunk({ content: t }, { logprobs: { content: logprobs, refusal: null } });

function run(chunks: ChatCompletionChunk[], opts = { logprobs: false }) {
  const stream = new ResponseEventStream(skeleton(), opts);
  const events: ResponsesStreamEvent[] = [];
  for (const c of chunks) events.push(...stream.onChunk(c));
  events.push(...stream.finish(usage));
  return { events, types: events.map((e) => e.type), final: events[events.length - 1].response as ResponseObject };
}

describe('ResponseEventStream', () => {
  it('streams text in the documented order with consecutive sequence numbers, ending with the whole response', () => {
    const { events, types, final } = run([chunk({ role: 'assistant', content: '' }), text('He'), text('llo'), chunk({}, { finish_reason: 'stop' })]);
    expect(types).toEqual([
      'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
      'response.output_text.delta', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
      'response.output_item.done', 'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]).toMatchObject({ response: { id: 'resp_x', status: 'in_progress', output: [] } });
    const itemId = (events[2].item as { id: string }).id;
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: 'message', status: 'in_progress', role: 'assistant', content: [] } });
    expect(events[4]).toMatchObject({ item_id: itemId, output_index: 0, content_index: 0, delta: 'He', logprobs: [] });
    expect(events[6]).toMatchObject({ item_id: itemId, text: 'Hello' });
    expect(events[8]).toMatchObject({ item: { id: itemId, status: 'completed', content: [{ type: 'output_text', text: 'Hello' }] } });
    expect(final).toMatchObject({ status: 'completed', usage: { input_tokens: 5, output_tokens: 3, total_tokens: 8 } });
    expect((final.output[0] as OutputMessage).content[0].text).toBe('Hello');
  });

  it('carries logprobs in deltas and done events when asked, held-back tokens with the next text', () => {
    const { events, final } = run([chunk({ content: '' }, { logprobs: { content: [lp(7, '<')], refusal: null } }), text('Hi'), chunk({}, { finish_reason: 'stop' })], { logprobs: true });
    const delta = events.find((e) => e.type === 'response.output_text.delta')!;
    expect(delta.logprobs).toEqual([{ token: '<', logprob: -0.5, top_logprobs: [{ token: '<', logprob: -0.5 }] }, { token: 'Hi', logprob: -0.5, top_logprobs: [{ token: 'Hi', logprob: -0.5 }] }]);
    expect((events.find((e) => e.type === 'response.output_text.done')!.logprobs as unknown[]).length).toBe(2);
    expect((final.output[0] as OutputMessage).content[0].logprobs.map((l) => l.token)).toEqual(['<', 'Hi']);
  });

  it('keeps the logprobs of a last token with no text (end of sequence) in the done event and the final part', () => {
    const eos = { token: 'token_id:0', logprob: -0.1, bytes: [], top_logprobs: [] };
    const { events, final } = run([text('Hi'), chunk({ content: '' }, { logprobs: { content: [eos], refusal: null } }), chunk({}, { finish_reason: 'stop' })], { logprobs: true });
    expect(events.filter((e) => e.type === 'response.output_text.delta').flatMap((e) => e.logprobs as unknown[])).toHaveLength(1);
    expect((events.find((e) => e.type === 'response.output_text.done')!.logprobs as { token: string }[]).map((l) => l.token)).toEqual(['Hi', 'token_id:0']);
    expect((final.output[0] as OutputMessage).content[0].logprobs).toHaveLength(2);
  });

  it('streams a tool call given whole (one delta) and one given in pieces, closing the text item first', () => {
    const whole = run([text('Ok.'), chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }), chunk({}, { finish_reason: 'tool_calls' })]);
    expect(whole.types.slice(2)).toEqual([
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done', 'response.completed',
    ]);
    expect(whole.events[8]).toMatchObject({ output_index: 1, item: { type: 'function_call', call_id: 'call_1', name: 'f', arguments: '', status: 'in_progress' } });
    expect(whole.final.output[1]).toMatchObject({ type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{"a":1}', status: 'completed' });

    const pieces = run([
      chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'g', arguments: '{}' } }] }),
      chunk({}, { finish_reason: 'tool_calls' }),
    ]);
    expect(pieces.types.slice(2)).toEqual([
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done', 'response.completed',
    ]);
    expect(pieces.events[5]).toMatchObject({ type: 'response.function_call_arguments.done', arguments: '{"a":1}', name: 'f' });
    expect(pieces.final.output.map((o) => o.type === 'function_call' && [o.call_id, o.arguments])).toEqual([['call_1', '{"a":1}'], ['call_2', '{}']]);
  });

  it('ends a cut answer with response.incomplete and an empty answer with an empty message', () => {
    const cut = run([text('Hel'), chunk({}, { finish_reason: 'length' })]);
    expect(cut.types[cut.types.length - 1]).toBe('response.incomplete');
    expect(cut.final).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ status: 'incomplete' }] });
    const empty = run([chunk({ role: 'assistant', content: '' }), chunk({}, { finish_reason: 'stop' })]);
    expect(empty.types).toContain('response.output_item.added');
    expect(empty.final.output).toEqual([expect.objectContaining({ type: 'message', content: [expect.objectContaining({ text: '' })] })]);
  });

  it('fails with an error event and response.failed carrying what was made', () => {
    const stream = new ResponseEventStream(skeleton(), { logprobs: false });
    stream.onChunk(text('Hi'));
    const events = stream.fail('the worker stopped', null, null);
    expect(events.map((e) => e.type)).toEqual(['error', 'response.failed']);
    expect(events[0]).toMatchObject({ message: 'the worker stopped', code: null, param: null, sequence_number: 5 });
    expect(events[1]).toMatchObject({ response: { status: 'failed', error: { code: 'server_error', message: 'the worker stopped' } } });
    expect((events[1].response as ResponseObject).output).toEqual([expect.objectContaining({ status: 'incomplete', content: [expect.objectContaining({ text: 'Hi' })] })]);
  });

  it('writes each event as SSE with its name', () => {
    expect(sseOf({ type: 'response.created', sequence_number: 0 })).toBe('event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n');
  });
});
