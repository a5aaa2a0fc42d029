// Turns one row of logits into the next token. Pure: everything it needs is passed in, and the
// only state it touches is the sequence's own seeded RNG, so a seed reproduces the output.
//
// Processing order follows vLLM v1:
//   allowed-token mask (JSON constraint) → min_tokens block → logit_bias → repetition /
//   frequency / presence penalties → [greedy: argmax] → temperature → min_p → top_k → top_p → sample.
// Reported logprobs ("processed", vLLM's processed_logprobs) are log-softmax of the final
// logits the token was drawn from; for greedy decoding the logits after penalties at temperature 1.
// 'raw' mode reports log-softmax of the model's untouched logits instead.

import type { Rng } from './rng.js';
import { GREEDY_EPS, type SamplingParams } from './sampling-params.js';

export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface SampleResult {
  tokenId: number;
  logprob: number;
  /** The `params.topLogprobs` most likely tokens, best first. */
  topLogprobs: TokenLogprob[];
}

export interface SampleContext {
  promptIds: readonly number[];
  outputIds: readonly number[];
  /** Tokens allowed by a grammar (1 = allowed); null = all. */
  allowed?: Uint8Array | null;
  /** Tokens that may not be sampled now (EOS before min_tokens). */
  blocked?: readonly number[];
  logprobsMode?: 'processed' | 'raw';
  /** log Σ exp(logits) as the model computed it (NaN or absent: computed here). */
  logSumExp?: number;
}

export function sampleToken(logits: Float32Array, params: SamplingParams, ctx: SampleContext, rng: Rng): SampleResult {
  const modelLogZ = ctx.logSumExp !== undefined && Number.isFinite(ctx.logSumExp) ? ctx.logSumExp : undefined;
  const raw = ctx.logprobsMode === 'raw';
  // Greedy on logits nothing changes (the common case in RL rollouts and evals): no copy of the
  // vocabulary, and the model's own log Z.
  if (params.temperature < GREEDY_EPS && !ctx.allowed && !ctx.blocked?.length && params.logitBias.size === 0 && !penalized(params))
    return finish(argmax(logits), logits, params.topLogprobs, modelLogZ);
  const x = new Float64Array(logits); // typed-array copy; Float64Array.from iterates (10× slower at 150k)
  applyMasks(x, ctx);
  for (const [id, bias] of params.logitBias) if (id >= 0 && id < x.length) x[id] += bias;
  applyPenalties(x, params, ctx);

  if (params.temperature < GREEDY_EPS) {
    const tokenId = argmax(x);
    return raw ? finish(tokenId, logits, params.topLogprobs, modelLogZ) : finish(tokenId, x, params.topLogprobs);
  }

  for (let i = 0; i < x.length; i++) x[i] /= params.temperature;
  if (params.minP > 0) applyMinP(x, params.minP);
  if (params.topK > 0 && params.topK < x.length) applyTopK(x, params.topK);
  if (params.topP < 1) applyTopP(x, params.topP);

  const { tokenId, logZ } = draw(x, rng);
  return raw ? finish(tokenId, logits, params.topLogprobs, modelLogZ) : finish(tokenId, x, params.topLogprobs, logZ);
}

function penalized(params: SamplingParams): boolean {
  return params.repetitionPenalty !== 1 || params.frequencyPenalty !== 0 || params.presencePenalty !== 0;
}

/** Logprobs of the chosen token and the top alternatives under log-softmax(x) (logZ if known). */
function finish(tokenId: number, x: Float32Array | Float64Array, topN: number, logZ?: number): SampleResult {
  const z = logZ ?? logSumExp(x);
  return {
    tokenId,
    logprob: x[tokenId] - z,
    topLogprobs: topN > 0 ? topK(x, topN).map((t) => ({ id: t.id, logprob: t.logprob - z })) : [],
  };
}

function applyMasks(x: Float64Array, ctx: SampleContext): void {
  if (!ctx.allowed && !ctx.blocked) return;
  if (ctx.allowed) {
    for (let i = 0; i < x.length; i++) if (!ctx.allowed[i]) x[i] = -Infinity;
  }
  if (ctx.blocked) for (const id of ctx.blocked) if (id >= 0 && id < x.length) x[id] = -Infinity;
  if (x[argmax(x)] === -Infinity) throw new Error('no token is allowed at this position (constraint and blocked tokens exclude the whole vocabulary)');
}

/**
 * Repetition penalty (CTRL paper, as in HF/vLLM): divide positive logits, multiply negative ones,
 * for every token seen in prompt or output. Frequency/presence (OpenAI): subtract per output occurrence.
 */
export function applyPenalties(x: Float64Array, params: SamplingParams, ctx: Pick<SampleContext, 'promptIds' | 'outputIds'>): void {
  if (params.repetitionPenalty !== 1) {
    const seen = new Set<number>(ctx.promptIds);
    for (const id of ctx.outputIds) seen.add(id);
    for (const id of seen) {
      if (id < 0 || id >= x.length) continue;
      x[id] = x[id] > 0 ? x[id] / params.repetitionPenalty : x[id] * params.repetitionPenalty;
    }
  }
  if (params.frequencyPenalty !== 0 || params.presencePenalty !== 0) {
    const counts = new Map<number, number>();
    for (const id of ctx.outputIds) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const [id, n] of counts) {
      if (id < 0 || id >= x.length) continue;
      x[id] -= params.frequencyPenalty * n + params.presencePenalty;
    }
  }
}

/** Drops tokens whose probability is below minP × the top probability. */
export function applyMinP(x: Float64Array, minP: number): void {
  // p_i < minP * p_max  ⇔  x_i < x_max + ln(minP)
  const threshold = x[argmax(x)] + Math.log(minP);
  for (let i = 0; i < x.length; i++) if (x[i] < threshold) x[i] = -Infinity;
}

/** Keeps the k largest logits (ties at the boundary are all kept, as a threshold compare does in vLLM). */
export function applyTopK(x: Float64Array, k: number): void {
  const kth = largestValues(x, k)[k - 1];
  for (let i = 0; i < x.length; i++) if (x[i] < kth) x[i] = -Infinity;
}

/** The k largest values, descending, in one pass (k is small next to the vocabulary). */
function largestValues(x: Float64Array, k: number): Float64Array {
  const best = new Float64Array(k).fill(-Infinity);
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (v <= best[k - 1]) continue;
    let j = k - 1;
    while (j > 0 && best[j - 1] < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = v;
  }
  return best;
}

/**
 * Nucleus: keep the smallest set of most likely tokens whose probability mass reaches p (tokens
 * tied with the last one kept stay too). The most likely token is always kept. Only tokens with
 * probability ≥ (1-p)/V can be in the nucleus (all others together weigh less than 1-p), so only
 * those are sorted.
 */
export function applyTopP(x: Float64Array, p: number): void {
  const z = logSumExp(x);
  const floor = z + Math.log((1 - p) / x.length);
  let n = 0;
  for (let i = 0; i < x.length; i++) if (x[i] >= floor && x[i] > -Infinity) n++;
  const candidates = new Float64Array(n);
  n = 0;
  for (let i = 0; i < x.length; i++) if (x[i] >= floor && x[i] > -Infinity) candidates[n++] = x[i];
  candidates.sort(); // ascending, native numeric sort
  // Walk down from the most likely value until the mass reaches p: that value is the cut-off.
  let mass = 0;
  let threshold = candidates[candidates.length - 1];
  for (let j = candidates.length - 1; j >= 0; j--) {
    mass += Math.exp(candidates[j] - z);
    threshold = candidates[j];
    if (mass >= p) break;
  }
  for (let i = 0; i < x.length; i++) if (x[i] < threshold) x[i] = -Infinity;
}

export function logSoftmax(x: Float64Array): Float64Array {
  const lse = logSumExp(x);
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = x[i] - lse;
  return out;
}

/** Index of the largest value; the lowest index wins ties (deterministic greedy). */
export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * Inverse-CDF draw from softmax(x); one rng.next() per token keeps seeded runs reproducible.
 * One exp pass: weights relative to the max, scaled by their sum, which also gives log Z.
 */
function draw(x: Float64Array, rng: Rng): { tokenId: number; logZ: number } {
  const max = x[argmax(x)];
  const w = scratch(x.length);
  let sum = 0;
  // Masked tokens (-Infinity: top-k, top-p, min-p, grammar) weigh exactly 0 without an exp call, which
  // after a top-k/top-p cut is most of a 150k vocabulary.
  for (let i = 0; i < x.length; i++) sum += w[i] = x[i] === -Infinity ? 0 : Math.exp(x[i] - max);
  const logZ = max + Math.log(sum);
  const u = rng.next() * sum;
  let acc = 0;
  let last = -1;
  for (let i = 0; i < x.length; i++) {
    if (w[i] === 0) continue;
    acc += w[i];
    last = i;
    if (u < acc) return { tokenId: i, logZ };
  }
  return { tokenId: last, logZ }; // rounding left u just above the total
}

export function logSumExp(x: Float32Array | Float64Array): number {
  const max = x[argmax(x)];
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let i = 0; i < x.length; i++) if (x[i] !== -Infinity) sum += Math.exp(x[i] - max);
  return max + Math.log(sum);
}

/**
 * draw()'s weights, reused across calls: a fresh Float64Array per token is 1.2 MB of garbage at a
 * 150k vocabulary (a major GC every few dozen tokens). Safe because sampling never re-enters itself.
 */
let weights = new Float64Array(0);
function scratch(n: number): Float64Array {
  if (weights.length < n) weights = new Float64Array(n);
  return weights;
}

/** The `n` largest entries of `lp`, largest first. */
export function topK(lp: Float32Array | Float64Array, n: number): TokenLogprob[] {
  const best: TokenLogprob[] = [];
  for (let i = 0; i < lp.length; i++) {
    const v = lp[i];
    if (best.length === n && v <= best[n - 1].logprob) continue;
    let j = best.length === n ? n - 1 : best.length;
    if (best.length < n) best.push({ id: i, logprob: v });
    while (j > 0 && best[j - 1].logprob < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = { id: i, logprob: v };
  }
  return best;
}
