import { describe, expect, it } from 'vitest';
import { ChatCompletionRequest, CompletionRequest, unsupportedParamPath, unsupportedParams } from '../../src/protocol/openai.js';
import { BadRequestError, defaultsFromGenerationConfig, maxTokensFor, samplingParamsFrom } from '../../worker/inference/request-params.js';

const chat = (extra: Record<string, unknown>) => ChatCompletionRequest.parse({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('OpenAI request → sampling params', () => {
  it('maps every sampling field and applies OpenAI defaults', () => {
    const p = samplingParamsFrom(
      chat({ temperature: 0.3, top_p: 0.9, top_k: 5, min_p: 0.1, seed: 11, stop: 'END', presence_penalty: 0.5, frequency_penalty: -0.5, repetition_penalty: 1.2, logit_bias: { '7': -100 }, min_tokens: 2, ignore_eos: true, stop_token_ids: [3] }),
      { maxTokens: 50, topLogprobs: 2, vocabSize: 100 },
    );
    expect(p).toMatchObject({ temperature: 0.3, topP: 0.9, topK: 5, minP: 0.1, seed: 11, stop: ['END'], presencePenalty: 0.5, frequencyPenalty: -0.5, repetitionPenalty: 1.2, minTokens: 2, ignoreEos: true, stopTokenIds: [3], maxTokens: 50, topLogprobs: 2 });
    expect([...p.logitBias]).toEqual([[7, -100]]);
    const d = samplingParamsFrom(chat({}), { maxTokens: 5, topLogprobs: 0, vocabSize: 100 });
    expect(d).toMatchObject({ temperature: 1, topP: 1, topK: 0, seed: null, stop: [], skipSpecialTokens: true });
    const g = samplingParamsFrom(chat({}), { maxTokens: 5, topLogprobs: 0, vocabSize: 100, defaults: defaultsFromGenerationConfig({ temperature: 0.6, top_p: 0.95, top_k: 20 }) });
    expect(g).toMatchObject({ temperature: 0.6, topP: 0.95, topK: 20 });
  });

  it('rejects logit_bias outside the vocabulary', () => {
    expect(() => samplingParamsFrom(chat({ logit_bias: { '100': 1 } }), { maxTokens: 5, topLogprobs: 0, vocabSize: 100 })).toThrow(BadRequestError);
  });

  it('max tokens: the request limit, else the room left; too large is a clear 400', () => {
    expect(maxTokensFor(10, 20, 100, null)).toBe(10);
    expect(maxTokensFor(null, 20, 100, null)).toBe(80);
    expect(maxTokensFor(undefined, 20, 100, 16)).toBe(16);
    expect(() => maxTokensFor(90, 20, 100, null)).toThrow(/maximum context length is 100 tokens/);
    expect(() => maxTokensFor(null, 100, 100, null)).toThrow("This model's maximum context length is 100 tokens. However, your messages resulted in 100 tokens.");
    expect(() => maxTokensFor(null, 120, 100, 16, 'prompt')).toThrow("However, your prompt resulted in 120 tokens.");
  });

  it('names unsupported parameters by the path OpenAI writes as `param`: verbosity, a forced tool\'s unsupported schema', () => {
    expect(unsupportedParams(chat({ verbosity: 'low' }))).toEqual(['verbosity']);
    expect(unsupportedParams(chat({ store: true }))).toEqual(['store']);
    expect(unsupportedParams(chat({ store: false, prediction: { type: 'content', content: 'x' }, service_tier: 'auto' }))).toEqual([]); // no effect on the answer
    const tools = [
      { type: 'function', function: { name: 'ok', parameters: { type: 'object' } } },
      { type: 'function', function: { name: 'bad', parameters: { type: 'object', properties: { s: { type: 'string', format: 'email' } } } } },
    ];
    const forced = unsupportedParams(chat({ tools, tool_choice: 'required' }));
    expect(forced).toEqual(["tools[1].function.parameters: #/properties/s: 'format' is not supported"]);
    expect(unsupportedParamPath(forced[0])).toBe('tools[1].function.parameters');
    expect(unsupportedParams(chat({ tools, tool_choice: { type: 'function', function: { name: 'ok' } } }))).toEqual([]);
    expect(unsupportedParams(chat({ tools, tool_choice: 'auto' }))).toEqual([]);
    expect(unsupportedParamPath('messages[0].content[1].type=image_url')).toBe('messages[0].content[1].type');
    expect(unsupportedParamPath('tool_choice (no tools given)')).toBe('tool_choice');
    expect(unsupportedParamPath('use_beam_search')).toBe('use_beam_search');
  });

  it('names unsupported parameters', () => {
    expect(unsupportedParams(chat({ prompt_logprobs: 2, use_beam_search: true, echo: true, functions: [{}] }))).toEqual(['prompt_logprobs', 'use_beam_search', 'functions', 'echo']);
    expect(unsupportedParams(chat({ tool_choice: 'required' }))).toEqual(['tool_choice (no tools given)']);
    expect(unsupportedParams(CompletionRequest.parse({ model: 'm', prompt: 'x', best_of: 3, suffix: 'y' }))).toEqual(['suffix', 'best_of']);
    expect(unsupportedParams(CompletionRequest.parse({ model: 'm', prompt: [[1, 2]], n: 2, best_of: 2 }))).toEqual([]);
  });

  it('names the field and the code of each refusal, as OpenAI does', () => {
    const opts = { maxTokens: 5, topLogprobs: 0, vocabSize: 100 };
    const refusal = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return { name: (e as Error).constructor.name, message: (e as Error).message, param: (e as BadRequestError).param, code: (e as BadRequestError).code };
      }
      return null;
    };
    // The schema already refuses keys that are not digits; the mapping refuses them too when called directly.
    for (const id of ['100', '-1', '1.5', 'x']) {
      const req = { ...chat({}), logit_bias: { [id]: 1 } } as ReturnType<typeof chat>;
      expect(refusal(() => samplingParamsFrom(req, opts))).toEqual({
        name: 'BadRequestError', message: `logit_bias: token id ${id} is outside the vocabulary (0..99)`, param: 'logit_bias', code: 'invalid_value',
      });
    }
    expect([...samplingParamsFrom(chat({ logit_bias: { '0': 2, '99': -1 } }), opts).logitBias]).toEqual([[0, 2], [99, -1]]);
    expect(refusal(() => samplingParamsFrom(chat({ stop: ['a', ''] }), opts))).toEqual({ name: 'BadRequestError', message: 'stop strings must not be empty', param: 'stop', code: 'invalid_value' });
    expect(refusal(() => maxTokensFor(81, 20, 100, null))).toMatchObject({ param: 'max_tokens', code: 'invalid_value', message: expect.stringContaining('(81 > 100 - 20)') });
    expect(refusal(() => maxTokensFor(1, 100, 100, null))).toEqual({ name: 'BadRequestError', message: "This model's maximum context length is 100 tokens. However, your messages resulted in 100 tokens. Please reduce the length of the messages.", param: 'messages', code: 'context_length_exceeded' });
    // Exactly the room left is allowed.
    expect(maxTokensFor(80, 20, 100, null)).toBe(80);
  });

  it('stop lists and flags: as given, else off', () => {
    const opts = { maxTokens: 5, topLogprobs: 0, vocabSize: 100 };
    expect(samplingParamsFrom(chat({ stop: ['a', 'b'] }), opts).stop).toEqual(['a', 'b']);
    const off = samplingParamsFrom(chat({}), opts);
    expect({ stopTokenIds: off.stopTokenIds, ignoreEos: off.ignoreEos, includeStopStrInOutput: off.includeStopStrInOutput, minTokens: off.minTokens })
      .toEqual({ stopTokenIds: [], ignoreEos: false, includeStopStrInOutput: false, minTokens: 0 });
    const on = samplingParamsFrom(chat({ include_stop_str_in_output: true, skip_special_tokens: false }), opts);
    expect([on.includeStopStrInOutput, on.skipSpecialTokens]).toEqual([true, false]);
  });

  it('generation_config supplies only the sampling numbers it has', () => {
    const all = defaultsFromGenerationConfig({ temperature: 0.6, top_p: 0.9, top_k: 20, min_p: 0.05, repetition_penalty: 1.1, max_length: 99 });
    expect(all).toStrictEqual({ temperature: 0.6, topP: 0.9, topK: 20, minP: 0.05, repetitionPenalty: 1.1 });
    expect(Object.keys(defaultsFromGenerationConfig({ temperature: 0.6 }))).toEqual(['temperature']);
    expect(defaultsFromGenerationConfig({ temperature: '0.6', min_p: null, repetition_penalty: '1.1' })).toStrictEqual({});
    const p = samplingParamsFrom(chat({}), { maxTokens: 5, topLogprobs: 0, vocabSize: 100, defaults: defaultsFromGenerationConfig({ min_p: 0.05, repetition_penalty: 1.1 }) });
    expect([p.minP, p.repetitionPenalty]).toEqual([0.05, 1.1]);
  });
});
