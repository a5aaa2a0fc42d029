// The Responses request → chat request translation (src/services/responses/request.ts): what each input item
// becomes, which fields map where, and the 400s (with the Responses field named) for what cannot be honoured.
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors/domain-errors.js';
import { ResponsesRequest } from '../../src/schemas/responses.js';
import { responseSkeleton, responsesParamOf, translateResponsesRequest } from '../../src/services/responses/request.js';

const req = (extra: Record<string, unknown>) => ResponsesRequest.parse({ model: 'm', input: 'hi', ...extra });

/** The domain error a translation throws (the test fails if it succeeds). */
function refusal(extra: Record<string, unknown>): DomainError {
  try {
    translateResponsesRequest(req(extra));
  } catch (err) {
    if (err instanceof DomainError) return err;
    throw err;
  }
  throw new Error('translated without an error');
}

const weather = { type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true };

describe('translateResponsesRequest: input', () => {
  it('puts instructions first as a system message and a string input as one user message', () => {
    const { chat } = translateResponsesRequest(req({ instructions: 'Be brief.', input: 'Hello' }));
    expect(chat.messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }]);
  });

  it('turns message items (with or without type) and their text parts into chat messages', () => {
    const { chat } = translateResponsesRequest(req({
      input: [
        { role: 'developer', content: 'rules' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }] },
        { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'c', annotations: [] }] },
      ],
    }));
    expect(chat.messages).toEqual([
      { role: 'developer', content: 'rules' },
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'c' }] },
    ]);
  });

  it('joins function_call items to the assistant turn before them and names each function_call_output', () => {
    const { chat } = translateResponsesRequest(req({
      input: [
        { role: 'user', content: 'weather in Paris and Rome?' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Looking.' }] },
        { type: 'function_call', id: 'fc_1', call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' },
        { type: 'function_call', call_id: 'call_b', name: 'get_weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', call_id: 'call_a', output: '21C' },
        { type: 'function_call_output', call_id: 'call_b', output: [{ type: 'input_text', text: '25C' }] },
      ],
    }));
    expect(chat.messages.slice(1)).toEqual([
      {
        role: 'assistant', content: [{ type: 'text', text: 'Looking.' }],
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', name: 'get_weather', content: '21C' },
      { role: 'tool', tool_call_id: 'call_b', name: 'get_weather', content: [{ type: 'text', text: '25C' }] },
    ]);
  });

  it('starts a new assistant turn for a function_call after a user message', () => {
    const { chat } = translateResponsesRequest(req({ input: [{ role: 'user', content: 'x' }, { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }] }));
    expect(chat.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] });
  });

  it('refuses, naming the item: unknown call ids, references, images, other item types, malformed items', () => {
    expect(refusal({ input: [{ type: 'function_call_output', call_id: 'nope', output: 'x' }] })).toMatchObject({ kind: 'invalid', param: 'input[0].call_id' });
    const ref = refusal({ input: [{ role: 'user', content: 'x' }, { type: 'item_reference', id: 'msg_1' }] });
    expect(ref).toMatchObject({ param: 'input[1].type', code: 'unsupported_parameter' });
    expect(ref.message).toMatch(/stateless/);
    expect(refusal({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] })).toMatchObject({ param: 'input[0].content[0].type' });
    expect(refusal({ input: [{ type: 'reasoning', id: 'r', summary: [] }] })).toMatchObject({ param: 'input[0].type' });
    expect(refusal({ input: [{ type: 'function_call', call_id: 'c', arguments: '{}' }] })).toMatchObject({ param: 'input[0].name', code: 'missing_required_parameter' });
    expect(refusal({ input: [{ role: 'wizard', content: 'x' }] })).toMatchObject({ param: 'input[0].role' });
  });

  it('refuses an input with nothing but instructions', () => {
    expect(refusal({ instructions: 'x', input: [{ role: 'system', content: 'y' }] })).toMatchObject({ param: 'input' });
  });
});

describe('translateResponsesRequest: parameters', () => {
  it('maps tools, tool_choice, text.format, sampling and max_output_tokens onto the chat request', () => {
    const { chat, logprobs } = translateResponsesRequest(req({
      tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 'pet', schema: { type: 'object', properties: { a: { type: 'integer' } } }, strict: true } },
      temperature: 0.5, top_p: 0.9, max_output_tokens: 33, seed: 7, top_k: 5, stream: true, reasoning: { effort: 'low' }, user: 'u',
    }));
    expect(chat).toMatchObject({
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weather.parameters, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'pet', schema: { type: 'object', properties: { a: { type: 'integer' } } }, strict: true } },
      temperature: 0.5, top_p: 0.9, max_completion_tokens: 33, seed: 7, top_k: 5, stream: true, reasoning_effort: 'low', user: 'u',
    });
    expect(chat.logprobs).toBeUndefined();
    expect(logprobs).toBe(false);
    expect(translateResponsesRequest(req({ text: { format: { type: 'json_object' } } })).chat.response_format).toEqual({ type: 'json_object' });
    expect(translateResponsesRequest(req({ text: { format: { type: 'text' } } })).chat.response_format).toBeUndefined();
  });

  it('asks the engine for logprobs when include or top_logprobs asks for them', () => {
    const a = translateResponsesRequest(req({ include: ['message.output_text.logprobs'] }));
    expect([a.logprobs, a.chat.logprobs, a.chat.top_logprobs]).toEqual([true, true, 0]);
    const b = translateResponsesRequest(req({ top_logprobs: 3 }));
    expect([b.logprobs, b.chat.top_logprobs]).toEqual([true, 3]);
  });

  it('accepts store: true (OpenAI clients send it) and answers with store: false', () => {
    expect(() => translateResponsesRequest(req({ store: true }))).not.toThrow();
    expect(responseSkeleton(req({ store: true }), 'resp_1', 1).store).toBe(false);
  });

  it('refuses what cannot be honoured with 400 naming the Responses field', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ previous_response_id: 'resp_1' }, 'previous_response_id'],
      [{ conversation: 'conv_1' }, 'conversation'],
      [{ background: true }, 'background'],
      [{ prompt: { id: 'p' } }, 'prompt'],
      [{ truncation: 'auto' }, 'truncation'],
      [{ service_tier: 'flex' }, 'service_tier'],
      [{ text: { verbosity: 'low' } }, 'text.verbosity'],
      [{ reasoning: { summary: 'auto' } }, 'reasoning.summary'],
      [{ include: ['message.output_text.logprobs', 'file_search_call.results'] }, 'include[1]'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ tools: [{ type: 'function' }] }, 'tools[0].name'],
      [{ tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [] } }, 'tool_choice'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [{ tools: [weather], tool_choice: { type: 'function', name: 'other' } }, 'tool_choice.name'],
      [{ text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', not: {} } } } }, 'text.format.schema'],
    ];
    for (const [extra, param] of cases) {
      const err = refusal(extra);
      expect(err.kind, JSON.stringify(extra)).toBe('invalid');
      expect(err.param, JSON.stringify(extra)).toBe(param);
    }
    expect(() => translateResponsesRequest(req({ background: false, truncation: 'disabled', service_tier: 'auto', max_tool_calls: 2 }))).not.toThrow();
  });

  it('the schema refuses unknown fields (OpenAI answers unknown_parameter)', () => {
    expect(ResponsesRequest.safeParse({ model: 'm', input: 'x', n: 2 }).success).toBe(false);
    expect(ResponsesRequest.safeParse({ model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'x' } } }).success).toBe(false);
  });
});

describe('responsesParamOf', () => {
  it('names chat fields as the Responses request does', () => {
    expect(responsesParamOf('messages[3].content')).toBe('input');
    expect(responsesParamOf('max_tokens')).toBe('max_output_tokens');
    expect(responsesParamOf('max_completion_tokens')).toBe('max_output_tokens');
    expect(responsesParamOf('response_format')).toBe('text.format');
    expect(responsesParamOf('response_format.json_schema.schema')).toBe('text.format.schema');
    expect(responsesParamOf('tools[2].function.parameters')).toBe('tools[2].parameters');
    expect(responsesParamOf('tool_choice.function.name')).toBe('tool_choice.name');
    expect(responsesParamOf('logprobs')).toBe('include');
    expect(responsesParamOf('top_logprobs')).toBe('top_logprobs');
    expect(responsesParamOf('temperature')).toBe('temperature');
  });
});
