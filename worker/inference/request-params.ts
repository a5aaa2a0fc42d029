// OpenAI request fields → engine SamplingParams, with OpenAI's defaults (temperature 1, top_p 1,
// n 1) unless the model's generation_config supplies others (as vLLM does).

import type { ChatCompletionRequest, CompletionRequest } from '../../src/protocol/openai.js';
import { defaultSamplingParams, type SamplingParams } from './sampling-params.js';

/** A request the engine cannot serve as asked (answered 400); `param` names the field at fault, as OpenAI does. */
export class BadRequestError extends Error {
  readonly status = 400;
  constructor(
    message: string,
    readonly param?: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** Fields shared by chat and text completions. */
export function samplingParamsFrom(
  req: ChatCompletionRequest | CompletionRequest,
  opts: { maxTokens: number; topLogprobs: number; vocabSize: number; defaults?: Partial<SamplingParams> },
): SamplingParams {
  const d = defaultSamplingParams(opts.defaults);
  const logitBias = new Map<number, number>();
  for (const [k, v] of Object.entries(req.logit_bias ?? {})) {
    const id = Number(k);
    if (!Number.isInteger(id) || id < 0 || id >= opts.vocabSize) throw new BadRequestError(`logit_bias: token id ${k} is outside the vocabulary (0..${opts.vocabSize - 1})`, 'logit_bias', 'invalid_value');
    logitBias.set(id, v);
  }
  const stop = req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop;
  if (stop.some((s) => s.length === 0)) throw new BadRequestError('stop strings must not be empty', 'stop', 'invalid_value');
  return {
    ...d,
    temperature: req.temperature ?? d.temperature,
    topP: req.top_p ?? d.topP,
    topK: req.top_k ?? d.topK,
    minP: req.min_p ?? d.minP,
    presencePenalty: req.presence_penalty ?? d.presencePenalty,
    frequencyPenalty: req.frequency_penalty ?? d.frequencyPenalty,
    repetitionPenalty: req.repetition_penalty ?? d.repetitionPenalty,
    logitBias,
    seed: req.seed ?? null,
    maxTokens: opts.maxTokens,
    minTokens: req.min_tokens ?? 0,
    stop,
    stopTokenIds: req.stop_token_ids ?? [],
    ignoreEos: req.ignore_eos ?? false,
    includeStopStrInOutput: req.include_stop_str_in_output ?? false,
    skipSpecialTokens: req.skip_special_tokens ?? true,
    topLogprobs: opts.topLogprobs,
  };
}

/**
 * Generation length: the request's limit, else whatever context is left (chat) or 16 (completions). Too long a
 * prompt or too large a limit is refused in OpenAI's words ("This model's maximum context length is N tokens.
 * However, …"): clients recognise context overflow by them (LangChain's ContextOverflowError looks for "maximum
 * context length", and its history trimming reacts to that error).
 */
export function maxTokensFor(
  requested: number | null | undefined,
  promptLength: number,
  maxSequenceLength: number,
  fallback: number | null,
  promptParam: 'messages' | 'prompt' = 'messages',
): number {
  const room = maxSequenceLength - promptLength;
  const limit = `This model's maximum context length is ${maxSequenceLength} tokens.`;
  if (room <= 0)
    throw new BadRequestError(
      `${limit} However, your ${promptParam} resulted in ${promptLength} tokens. Please reduce the length of the ${promptParam}.`,
      promptParam,
      'context_length_exceeded',
    );
  if (requested != null) {
    // vLLM's wording, which holds OpenAI's first sentence too.
    if (requested > room)
      throw new BadRequestError(
        `max_tokens is too large: ${requested}. ${limit.slice(0, -1)} and your request has ${promptLength} input tokens (${requested} > ${maxSequenceLength} - ${promptLength})`,
        'max_tokens',
        'invalid_value',
      );
    return requested;
  }
  return fallback === null ? room : Math.min(fallback, room);
}

/** Generation-config keys a model folder may carry, as sampling defaults. */
export function defaultsFromGenerationConfig(gc: Record<string, unknown>): Partial<SamplingParams> {
  const out: Partial<SamplingParams> = {};
  const num = (k: string) => (typeof gc[k] === 'number' ? (gc[k] as number) : undefined);
  if (num('temperature') !== undefined) out.temperature = num('temperature');
  if (num('top_p') !== undefined) out.topP = num('top_p');
  if (num('top_k') !== undefined) out.topK = num('top_k');
  if (num('min_p') !== undefined) out.minP = num('min_p');
  if (num('repetition_penalty') !== undefined) out.repetitionPenalty = num('repetition_penalty');
  return out;
}
