// Logprobs of a prompt's own tokens, for legacy completions with `echo` and `logprobs` (how clients such as
// lm-evaluation-harness score a text): token i under the model's distribution after tokens 0..i-1, read from
// the logits of position i-1 of one forward pass over the whole prompt. The first token has no context, so
// no logprob (null, as OpenAI answers).
import { logSumExp, topK, type TokenLogprob } from './sampler.js';

export interface PromptTokenLogprob {
  id: number;
  /** null for the first token. */
  logprob: number | null;
  /** The `topN` most likely tokens at that position, best first (empty for the first token). */
  topLogprobs: TokenLogprob[];
}

/** @param logits [ids.length × vocab], row p = the logits after token p. */
export function promptLogprobs(logits: Float32Array, ids: readonly number[], vocab: number, topN: number): PromptTokenLogprob[] {
  if (logits.length !== ids.length * vocab) throw new Error(`expected ${ids.length} × ${vocab} logits, got ${logits.length}`);
  return ids.map((id, i) => {
    if (i === 0) return { id, logprob: null, topLogprobs: [] };
    const row = logits.subarray((i - 1) * vocab, i * vocab);
    const z = logSumExp(row);
    return { id, logprob: row[id] - z, topLogprobs: topN > 0 ? topK(row, topN).map((t) => ({ id: t.id, logprob: t.logprob - z })) : [] };
  });
}
