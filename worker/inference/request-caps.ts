// Bounded work per inference request, checked before any of it is done (issue #44). Two caps:
//   sequences: prompts × n. A 713-byte completion request (100 prompts × n 128) was 12,800 sequences.
//   answer size: n × (prompt + max_tokens) × (1 + top_logprobs), summed over the prompts: every token an answer
//     can carry (an echoed prompt's, a generated one's, or one of their top_logprobs alternatives). It bounds the
//     answer's bytes before the model runs: `echo` + `logprobs: 20` + `n: 128` on 3 long prompts built a > 512 MB
//     worker→API message and crashed the worker. The prompt counts whether or not it is echoed: an upper bound that
//     is simple to state (with max_tokens left out of a chat request, prompt + max_tokens is the context length).
// Both are refused with OpenAI's 400, naming the cap and the setting that raises it.
import { BadRequestError } from './request-params.js';
import { positiveIntSetting } from '../../src/domain/positive-int-setting.js';

export interface RequestCaps {
  /** HEARTH_MAX_SEQUENCES_PER_REQUEST: prompts × n of one request. */
  maxSequences: number;
  /** HEARTH_MAX_ANSWER_TOKENS: tokens one answer may carry, top_logprobs alternatives included (see above). */
  maxAnswerTokens: number;
}

/** 256 sequences: n's own maximum (128) twice. 2^20 answer tokens: n 128 over a whole 8192-token context, ~60-100 MB of JSON. */
export const DEFAULT_REQUEST_CAPS: RequestCaps = { maxSequences: 256, maxAnswerTokens: 2 ** 20 };

export function requestCapsFrom(env: NodeJS.ProcessEnv = process.env): RequestCaps {
  const read = (name: string, fallback: number) => positiveIntSetting(env, name, fallback);
  return {
    maxSequences: read('HEARTH_MAX_SEQUENCES_PER_REQUEST', DEFAULT_REQUEST_CAPS.maxSequences),
    maxAnswerTokens: read('HEARTH_MAX_ANSWER_TOKENS', DEFAULT_REQUEST_CAPS.maxAnswerTokens),
  };
}

/** Refuses prompts × n above the cap (before anything is tokenized). */
export function checkSequenceCount(prompts: number, n: number, caps: RequestCaps): void {
  const sequences = prompts * n;
  if (sequences > caps.maxSequences)
    throw new BadRequestError(
      `this request asks for ${sequences} sequences (${prompts} prompt${prompts === 1 ? '' : 's'} × n ${n}); the limit is ${caps.maxSequences} per request (HEARTH_MAX_SEQUENCES_PER_REQUEST). Send fewer prompts or a smaller n per request`,
      prompts > 1 ? 'prompt' : 'n',
      'too_many_sequences',
    );
}

/** One prompt as the answer-size cap sees it: its token count and the max_tokens it was given. */
export interface PromptBudget {
  promptTokens: number;
  maxTokens: number;
}

/** The most tokens (top_logprobs alternatives included) an answer can carry: Σ n × (prompt + max_tokens) × (1 + top_logprobs). */
export function answerTokenBound(prompts: readonly PromptBudget[], n: number, topLogprobs: number): number {
  let total = 0;
  for (const p of prompts) total += n * (p.promptTokens + p.maxTokens) * (1 + topLogprobs);
  return total;
}

/** Refuses an answer that could carry more than the cap (after tokenizing, before the model runs). */
export function checkAnswerSize(
  prompts: readonly PromptBudget[], n: number, topLogprobs: number, caps: RequestCaps,
  /** The request's name for the number of logprobs (chat: top_logprobs; completions: logprobs). */
  logprobsParam: 'logprobs' | 'top_logprobs' = 'logprobs',
): void {
  const bound = answerTokenBound(prompts, n, topLogprobs);
  if (bound <= caps.maxAnswerTokens) return;
  const promptTokens = prompts.reduce((a, p) => a + p.promptTokens, 0);
  const maxTokens = prompts.reduce((a, p) => Math.max(a, p.maxTokens), 0);
  const shape =
    prompts.length === 1
      ? `n ${n} × (prompt ${promptTokens} + max_tokens ${maxTokens}) × (1 + top_logprobs ${topLogprobs})`
      : `${prompts.length} prompts of ${promptTokens} tokens in all, n ${n}, max_tokens up to ${maxTokens}, top_logprobs ${topLogprobs}`;
  throw new BadRequestError(
    `this request's answer could hold ${bound} tokens with their logprobs (${shape}); the limit is ${caps.maxAnswerTokens} (HEARTH_MAX_ANSWER_TOKENS). Lower n, max_tokens or the number of logprobs`,
    topLogprobs > 0 ? logprobsParam : n > 1 ? 'n' : 'max_tokens',
    'answer_too_large',
  );
}
