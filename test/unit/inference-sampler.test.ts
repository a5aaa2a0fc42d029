import { describe, expect, it } from 'vitest';
import { createRng } from '../../worker/inference/rng.js';
import { applyPenalties, logSoftmax, logSumExp, sampleToken } from '../../worker/inference/sampler.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';

const probs = [0.5, 0.3, 0.15, 0.05];
const logits = Float32Array.from(probs.map(Math.log));
const ctx = { promptIds: [], outputIds: [] };

function frequencies(params: ReturnType<typeof defaultSamplingParams>, draws = 20000, seed = 1) {
  const rng = createRng(seed);
  const counts = new Array(logits.length).fill(0);
  for (let i = 0; i < draws; i++) counts[sampleToken(logits, params, ctx, rng).tokenId]++;
  return counts.map((c) => c / draws);
}

describe('sampler', () => {
  it('greedy at temperature 0 picks the argmax and reports its temperature-1 logprob', () => {
    const r = sampleToken(Float32Array.of(1, 3, 2), defaultSamplingParams({ temperature: 0 }), ctx, createRng(0));
    expect(r.tokenId).toBe(1);
    const lse = Math.log(Math.exp(1) + Math.exp(3) + Math.exp(2));
    expect(r.logprob).toBeCloseTo(3 - lse, 6);
  });

  it('samples with the softmax probabilities at temperature 1', () => {
    const f = frequencies(defaultSamplingParams());
    probs.forEach((p, i) => expect(Math.abs(f[i] - p)).toBeLessThan(0.015));
  });

  it('temperature sharpens the distribution', () => {
    const f = frequencies(defaultSamplingParams({ temperature: 0.5 }));
    const sq = probs.map((p) => p * p);
    const z = sq.reduce((a, b) => a + b);
    sq.forEach((p, i) => expect(Math.abs(f[i] - p / z)).toBeLessThan(0.015));
  });

  it('top_k keeps the k best tokens and renormalises the reported logprob', () => {
    const f = frequencies(defaultSamplingParams({ topK: 2 }), 5000);
    expect(f[2] + f[3]).toBe(0);
    const r = sampleToken(logits, defaultSamplingParams({ topK: 2 }), ctx, createRng(3));
    expect(r.logprob).toBeCloseTo(Math.log(probs[r.tokenId] / 0.8), 5);
  });

  it('top_p keeps the smallest set reaching the mass', () => {
    const f = frequencies(defaultSamplingParams({ topP: 0.7 }), 5000);
    expect(f[2] + f[3]).toBe(0);
    expect(f[0]).toBeGreaterThan(0.55);
    const g = frequencies(defaultSamplingParams({ topP: 0.81 }), 5000);
    expect(g[2]).toBeGreaterThan(0.1);
    expect(g[3]).toBe(0);
  });

  it('min_p drops tokens below min_p × the top probability', () => {
    const f = frequencies(defaultSamplingParams({ minP: 0.5 }), 5000);
    expect(f[2] + f[3]).toBe(0);
    expect(f[1]).toBeGreaterThan(0.3);
  });

  it('applies repetition, frequency and presence penalties', () => {
    const x = Float64Array.of(2, -2, 1, 1);
    applyPenalties(x, defaultSamplingParams({ repetitionPenalty: 2 }), { promptIds: [0], outputIds: [1] });
    expect([...x]).toEqual([1, -4, 1, 1]);
    const y = Float64Array.of(0, 0, 0, 0);
    applyPenalties(y, defaultSamplingParams({ frequencyPenalty: 0.5, presencePenalty: 1 }), { promptIds: [3], outputIds: [1, 1, 2] });
    expect([...y]).toEqual([0, -2, -1.5, 0]);
  });

  it('logit_bias can force or ban a token', () => {
    const ban = defaultSamplingParams({ temperature: 0, logitBias: new Map([[0, -100]]) });
    expect(sampleToken(logits, ban, ctx, createRng(0)).tokenId).toBe(1);
    const force = defaultSamplingParams({ logitBias: new Map([[3, 100]]) });
    expect(frequencies(force, 200)[3]).toBe(1);
  });

  it('the same seed reproduces the same draws; another seed differs', () => {
    const big = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i) * 2);
    const run = (seed: number) => {
      const rng = createRng(seed);
      return Array.from({ length: 50 }, () => sampleToken(big, defaultSamplingParams(), ctx, rng).tokenId);
    };
    expect(run(42)).toEqual(run(42));
    expect(run(42)).not.toEqual(run(43));
    expect(run(2 ** 40 + 5)).toEqual(run(2 ** 40 + 5));
    expect(run(-7)).not.toEqual(run(7));
  });

  it('returns top_logprobs best first, and the chosen token among them when it is the best', () => {
    const r = sampleToken(logits, defaultSamplingParams({ temperature: 0, topLogprobs: 3 }), ctx, createRng(0));
    expect(r.topLogprobs.map((t) => t.id)).toEqual([0, 1, 2]);
    probs.slice(0, 3).forEach((p, i) => expect(r.topLogprobs[i].logprob).toBeCloseTo(Math.log(p), 5));
  });

  it('respects the allowed mask and blocked tokens', () => {
    const allowed = Uint8Array.of(0, 0, 1, 1);
    const r = sampleToken(logits, defaultSamplingParams({ temperature: 0 }), { ...ctx, allowed }, createRng(0));
    expect(r.tokenId).toBe(2);
    expect(r.logprob).toBeCloseTo(Math.log(0.15 / 0.2), 5);
    const b = sampleToken(logits, defaultSamplingParams({ temperature: 0 }), { ...ctx, blocked: [0] }, createRng(0));
    expect(b.tokenId).toBe(1);
    expect(() => sampleToken(logits, defaultSamplingParams(), { ...ctx, allowed: new Uint8Array(4) }, createRng(0))).toThrow(/no token/);
  });

  it("greedy on untouched logits uses the model's log Z; processed logits never do", () => {
    const x = Float32Array.of(1, 3, 2);
    const lse = Math.log(Math.exp(1) + Math.exp(3) + Math.exp(2));
    const greedy = defaultSamplingParams({ temperature: 0, topLogprobs: 2 });
    // A deliberately wrong log Z shows which one was used.
    const given = sampleToken(x, greedy, { ...ctx, logSumExp: lse + 1 }, createRng(0));
    expect(given.tokenId).toBe(1);
    expect(given.logprob).toBeCloseTo(3 - lse - 1, 6);
    expect(given.topLogprobs.map((t) => t.id)).toEqual([1, 2]);
    expect(given.topLogprobs[1].logprob).toBeCloseTo(2 - lse - 1, 6);
    // Absent (NaN): computed here.
    expect(sampleToken(x, greedy, { ...ctx, logSumExp: NaN }, createRng(0)).logprob).toBeCloseTo(3 - lse, 6);
    // A penalty changes the logits the logprob is taken from: the model's log Z does not apply.
    const penalized = sampleToken(x, { ...greedy, presencePenalty: 1 }, { promptIds: [], outputIds: [1], logSumExp: lse + 1 }, createRng(0));
    expect(penalized.logprob).toBeCloseTo(2 - Math.log(Math.exp(1) + Math.exp(2) + Math.exp(2)), 6);
    // So does temperature sampling (log Z of the scaled logits), unless logprobs are raw.
    const warm = defaultSamplingParams({ temperature: 0.5, topK: 1 });
    expect(sampleToken(x, warm, { ...ctx, logSumExp: lse + 1 }, createRng(0)).logprob).toBeCloseTo(0, 6);
    expect(sampleToken(x, warm, { ...ctx, logSumExp: lse + 1, logprobsMode: 'raw' }, createRng(0)).logprob).toBeCloseTo(3 - lse - 1, 6);
  });

  it("raw mode reports the model's own logprobs", () => {
    const p = defaultSamplingParams({ temperature: 0.3, topK: 1 });
    const r = sampleToken(logits, p, { ...ctx, logprobsMode: 'raw' }, createRng(0));
    expect(r.tokenId).toBe(0);
    expect(r.logprob).toBeCloseTo(Math.log(0.5), 5);
    expect(logSoftmax(Float64Array.of(0, 0))[0]).toBeCloseTo(Math.log(0.5), 10);
  });
});

// Edges the distribution tests above cannot see: ties, boundaries and the inverse-CDF draw with a fixed u.
describe('sampler edges', () => {
  /** A generator that always returns `u` (the draw then picks the token whose CDF interval holds u). */
  const fixed = (u: number) => ({ next: () => u });
  const lse = (...v: number[]) => Math.log(v.reduce((a, x) => a + Math.exp(x), 0));

  it('the draw walks the CDF: u on a boundary goes to the next token, u = 1 to the last allowed one', () => {
    const even = Float32Array.of(0, 0, 0);
    expect(sampleToken(even, defaultSamplingParams(), ctx, fixed(1 / 3)).tokenId).toBe(1);
    expect(sampleToken(even, defaultSamplingParams(), ctx, fixed(0)).tokenId).toBe(0);
    // u at the very top (rounding): the last token that may be sampled, never a masked one after it.
    const r = sampleToken(even, defaultSamplingParams(), { ...ctx, allowed: Uint8Array.of(1, 1, 0) }, fixed(1));
    expect(r.tokenId).toBe(1);
    expect(r.logprob).toBeCloseTo(Math.log(0.5), 10);
  });

  it('ties go to the lowest token id, greedy or not, and top_logprobs list tied tokens in id order', () => {
    const tied = Float32Array.of(2, 2, 1);
    expect(sampleToken(tied, defaultSamplingParams({ temperature: 0 }), ctx, fixed(0)).tokenId).toBe(0);
    // The copy path (a bias on another token) breaks ties the same way.
    const biased = defaultSamplingParams({ temperature: 0, logitBias: new Map([[2, 0.5]]) });
    expect(sampleToken(tied, biased, ctx, fixed(0)).tokenId).toBe(0);
    const r = sampleToken(Float32Array.of(5, 1, 1, 0), defaultSamplingParams({ temperature: 0, topLogprobs: 2 }), ctx, fixed(0));
    expect(r.topLogprobs.map((t) => t.id)).toEqual([0, 1]);
    const rising = sampleToken(Float32Array.of(0, 1, 2, 3), defaultSamplingParams({ temperature: 0, topLogprobs: 3 }), ctx, fixed(0));
    expect(rising.topLogprobs).toEqual([
      { id: 3, logprob: expect.closeTo(3 - lse(0, 1, 2, 3), 6) },
      { id: 2, logprob: expect.closeTo(2 - lse(0, 1, 2, 3), 6) },
      { id: 1, logprob: expect.closeTo(1 - lse(0, 1, 2, 3), 6) },
    ]);
    expect(sampleToken(tied, defaultSamplingParams({ temperature: 0, topLogprobs: 3 }), ctx, fixed(0)).topLogprobs.map((t) => t.id)).toEqual([0, 1, 2]);
    expect(sampleToken(tied, defaultSamplingParams({ topLogprobs: 0 }), ctx, fixed(0)).topLogprobs).toEqual([]);
  });

  it('greedy applies a repetition or a frequency penalty alone (not the untouched-logits shortcut)', () => {
    const x = Float32Array.of(2, 1.9);
    expect(sampleToken(x, defaultSamplingParams({ temperature: 0, repetitionPenalty: 1.5 }), { promptIds: [0], outputIds: [] }, fixed(0)).tokenId).toBe(1);
    expect(sampleToken(x, defaultSamplingParams({ temperature: 0, frequencyPenalty: 0.5 }), { promptIds: [], outputIds: [0] }, fixed(0)).tokenId).toBe(1);
    expect(sampleToken(x, defaultSamplingParams({ temperature: 0, presencePenalty: 0.5 }), { promptIds: [], outputIds: [0] }, fixed(0)).tokenId).toBe(1);
  });

  it('frequency penalty alone subtracts per occurrence, token 0 included', () => {
    const x = Float64Array.of(1, 1, 1);
    applyPenalties(x, defaultSamplingParams({ frequencyPenalty: 0.5 }), { promptIds: [], outputIds: [0, 0, 2] });
    expect([...x]).toEqual([0, 1, 0.5]);
  });

  it('top_k: the k largest whatever their order, and -1 disables it like 0', () => {
    const rising = Float32Array.of(0, 1, 2, 3);
    const k2 = defaultSamplingParams({ topK: 2 });
    expect(sampleToken(rising, k2, ctx, fixed(0)).tokenId).toBe(2);
    expect(sampleToken(rising, k2, ctx, fixed(0)).logprob).toBeCloseTo(2 - lse(2, 3), 10);
    for (const topK of [0, -1]) {
      const r = sampleToken(rising, defaultSamplingParams({ topK }), ctx, fixed(0));
      expect(r.tokenId).toBe(0);
      expect(r.logprob).toBeCloseTo(0 - lse(0, 1, 2, 3), 10);
    }
  });

  it('min_p keeps tokens exactly at the threshold (min_p = 1 keeps the tied best)', () => {
    const r = sampleToken(Float32Array.of(1, 1, 0), defaultSamplingParams({ minP: 1 }), ctx, fixed(0.75));
    expect(r.tokenId).toBe(1);
    expect(r.logprob).toBeCloseTo(Math.log(0.5), 10);
  });

  it('top_p: the nucleus is the most likely tokens whatever their order, down to the least likely when needed', () => {
    // Mass of {1, 0} is 0.987 ≥ 0.95, so -3 (1.3%) is cut: the reported logprob is over {1, 0} only.
    const r = sampleToken(Float32Array.of(-3, 1, 0), defaultSamplingParams({ topP: 0.95 }), ctx, fixed(0.99));
    expect(r.tokenId).toBe(2);
    expect(r.logprob).toBeCloseTo(0 - lse(1, 0), 10);
    // 0.99 needs both tokens: the smaller one stays sampleable.
    const both = sampleToken(Float32Array.of(1, 0), defaultSamplingParams({ topP: 0.99 }), ctx, fixed(0.9));
    expect(both.tokenId).toBe(1);
    expect(both.logprob).toBeCloseTo(0 - lse(1, 0), 10);
  });

  it('log Z of nothing possible is -Infinity', () => {
    expect(logSumExp(Float64Array.of(-Infinity, -Infinity))).toBe(-Infinity);
    expect(logSumExp(Float64Array.of(0, 0))).toBeCloseTo(Math.log(2), 12);
  });
});

