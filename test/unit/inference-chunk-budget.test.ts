import { describe, expect, it } from 'vitest';
import { ChunkBudget, DEFAULT_CHUNK_BUDGET } from '../../worker/inference/chunk-budget.js';

/**
 * Steps of a machine where a decode step of R rows costs decode(R), and a mixed step decode(R) + fixed +
 * tokenMs per prompt token; mixed steps take the budget, or what `chunk` says.
 */
function feed(b: ChunkBudget, m: { decode: (rows: number) => number; fixed?: number; tokenMs: number }, rounds: number, chunk = (i: number) => b.tokensFor(8)) {
  for (let i = 0; i < rounds; i++) {
    b.observe({ decodeRows: 8, promptTokens: 0, ms: m.decode(8) });
    const c = chunk(i);
    b.observe({ decodeRows: 8, promptTokens: c, ms: m.decode(8) + (m.fixed ?? 0) + c * m.tokenMs });
  }
}
const flat = (ms: number) => () => ms;

describe('mixed-step chunk budget', () => {
  it('measures a decode step first (a budget of 0: the step only decodes), then starts at its initial budget until a mixed step was measured', () => {
    const b = new ChunkBudget();
    expect(b.tokensFor(8)).toBe(0); // decode(8) unknown: probe it
    expect(b.estimateFor(8).tokens).toBe(DEFAULT_CHUNK_BUDGET.initial);
    b.observe({ decodeRows: 0, promptTokens: 97, ms: 25 }); // a prompt alone says nothing about mixed steps
    b.observe({ decodeRows: 7, promptTokens: 32, ms: 14 }); // no decode step at 7 rows known: cannot attribute
    b.observe({ decodeRows: 8, promptTokens: 0, ms: 6 });
    expect(b.tokensFor(8)).toBe(32);
    expect(b.estimateFor(8).tokenMs).toBeNaN();
    expect(b.tokensFor(7)).toBe(0); // 6 ms at 8 rows is not a measurement at 7
    b.observe({ decodeRows: 8, promptTokens: 32, ms: 14 });
    expect(b.estimateFor(8).tokenMs).toBeCloseTo(0.25, 6);
  });

  it('measures decode(R) again every probeEvery steps, so mixed-step excess is taken against a current decode step', () => {
    const b = new ChunkBudget({ probeEvery: 10 });
    b.observe({ decodeRows: 3, promptTokens: 0, ms: 30 });
    for (let i = 0; i < 9; i++) b.observe({ decodeRows: 3, promptTokens: 10, ms: 40 });
    expect(b.tokensFor(3)).toBeGreaterThan(0);
    b.observe({ decodeRows: 3, promptTokens: 10, ms: 40 }); // the 10th step since decode(3) was measured
    expect(b.probeDue(3)).toBe(true);
    expect(b.tokensFor(3)).toBe(0);
    b.observe({ decodeRows: 3, promptTokens: 0, ms: 30 });
    expect(b.tokensFor(3)).toBe(Math.floor((1.25 * 30) / 1)); // 10 ms for 10 tokens: 1 ms a token
    expect(() => new ChunkBudget({ probeEvery: 0 })).toThrow(/probeEvery/);
  });

  it('sizes a mixed step to cost targetRatio decode steps: (ratio − 1) · decode / per-token cost', () => {
    // ~20M on two cores: 6 ms decode steps, 0.25 ms per prompt token → (2 − 1) · 6 / 0.25 = 24 tokens.
    const b = new ChunkBudget({ targetRatio: 2 });
    feed(b, { decode: flat(6), tokenMs: 0.25 }, 50);
    expect(b.tokensFor(8)).toBe(24);
    expect(b.estimateFor(8)).toMatchObject({ fixedMs: 0 });
    expect(b.estimateFor(8).decodeMs).toBeCloseTo(6, 6);
    expect(b.estimateFor(8).tokenMs).toBeCloseTo(0.25, 6);
    // A 1.1B 4-bit model: 60 ms decode steps, 5 ms per prompt token → 12 tokens; ratio 3 → 24 (with room for the
    // tail: tailRatio 4); the default 2.25 → 15, and 3 under the default tailRatio 2.7 is held to 2.7 → 20.
    for (const [opts, want] of [[{ targetRatio: 2 }, 12], [{ targetRatio: 3, tailRatio: 4 }, 24], [{}, 15], [{ targetRatio: 3 }, 20]] as const) {
      const big = new ChunkBudget(opts);
      feed(big, { decode: flat(60), tokenMs: 5 }, 80);
      expect(big.tokensFor(8)).toBe(want);
    }
  });

  it('separates a mixed step\'s fixed cost from its per-token cost once chunk sizes vary, and sizes the chunk for what is left', () => {
    // 6 ms decode steps; a mixed step costs 1.5 ms plus 0.2 ms a token. Through the origin a 20-token chunk would
    // look like 0.275 ms a token; the line finds both: (1.25 · 6 − 1.5) / 0.2 = 30 tokens.
    const b = new ChunkBudget();
    feed(b, { decode: flat(6), fixed: 1.5, tokenMs: 0.2 }, 60, (i) => [8, 20, 32, 14][i % 4]);
    const e = b.estimateFor(8);
    expect(e.fixedMs).toBeCloseTo(1.5, 6);
    expect(e.tokenMs).toBeCloseTo(0.2, 6);
    expect(e.tokens).toBe(30);
  });

  it('measures decode steps per number of rows: few decoding rows leave less room for prompt tokens', () => {
    // A 1.1B model: one row 30 ms, eight 90 ms; mixed steps seen at 8 rows, 5 ms a token.
    const b = new ChunkBudget();
    b.observe({ decodeRows: 1, promptTokens: 0, ms: 30 });
    feed(b, { decode: (r) => 30 + (60 * (r - 1)) / 7, tokenMs: 5 }, 60);
    expect(b.estimateFor(8).decodeMs).toBeCloseTo(90, 6);
    expect(b.tokensFor(8)).toBe(22); // 1.25 · 90 / 5
    expect(b.estimateFor(1).decodeMs).toBeCloseTo(30, 6);
    expect(b.estimateFor(1).tokens).toBe(8); // 1.25 · 30 / 5 = 7.5 → at least min
    expect(b.tokensFor(1)).toBe(0); // …but decode(1) was measured 121 steps ago: the next such step measures it again
    expect(b.estimateFor(3).decodeMs).toBeCloseTo(30, 6); // reported from the nearest row count measured
    expect(b.tokensFor(3)).toBe(0); // and never used for a budget
  });

  it('measures how far mixed steps run over the line (the 98th percentile of actual / predicted) and sizes the slow ones to tailRatio', () => {
    // 6 ms decode steps, 0.2 ms a prompt token; one mixed step in ten takes 1.5 × its prediction (a collection, a
    // neighbour on the core). Sized for the average, the slow ones would cost 1.5 · 2.25 = 3.4 decode steps.
    expect(DEFAULT_CHUNK_BUDGET.tailRatio).toBeLessThan(3);
    const b = new ChunkBudget();
    const slow = (i: number) => i % 10 === 9;
    for (let i = 0; i < 600; i++) {
      b.observe({ decodeRows: 8, promptTokens: 0, ms: 6 });
      const c = b.tokensFor(8);
      b.observe({ decodeRows: 8, promptTokens: c, ms: (6 + 0.2 * c) * (slow(i) ? 1.5 : 1) });
    }
    const e = b.estimateFor(8);
    expect(e.spread).toBeGreaterThan(1.35);
    expect(e.spread).toBeLessThan(1.6);
    expect(e.ratio).toBeCloseTo(DEFAULT_CHUNK_BUDGET.tailRatio / e.spread, 9);
    expect(e.tokens).toBe(Math.floor(((e.ratio - 1) * e.decodeMs - e.fixedMs) / e.tokenMs + 1e-6));
    expect(e.tokens).toBeLessThan(30); // what 2.25 gives without the slow steps: 1.25 · 6 / 0.2 = 37, or 30 counting them in the line
    // The slow steps at this budget: at most tailRatio decode steps (the line's own estimate of a step, × 1.5).
    expect(((6 + e.fixedMs + e.tokens * e.tokenMs) * 1.5) / 6).toBeLessThanOrEqual(DEFAULT_CHUNK_BUDGET.tailRatio + 0.15);
    // Steady steps bring it back down: the spread never stays above what is measured.
    for (let i = 0; i < 600; i++) {
      b.observe({ decodeRows: 8, promptTokens: 0, ms: 6 });
      const c = b.tokensFor(8);
      b.observe({ decodeRows: 8, promptTokens: c, ms: 6 + 0.2 * c });
    }
    expect(b.estimateFor(8).spread).toBeLessThan(1.1);
    expect(() => new ChunkBudget({ tailQuantile: 1 })).toThrow(/tailQuantile/);
  });

  it('follows a change of speed (another model size, a busier machine) through its moving averages', () => {
    const b = new ChunkBudget({ targetRatio: 2 });
    feed(b, { decode: flat(6), tokenMs: 0.25 }, 50);
    expect(b.tokensFor(8)).toBe(24);
    feed(b, { decode: flat(6), tokenMs: 0.5 }, 100); // prompt tokens got twice as expensive
    expect(b.tokensFor(8)).toBe(12);
  });

  it('clamps to [min, max]; a fixed cost beyond the target gives max (fewest slow steps); a mixed step faster than decode counts as cheap', () => {
    const slow = new ChunkBudget();
    feed(slow, { decode: flat(10), tokenMs: 10 }, 50); // every prompt token costs a whole decode step
    expect(slow.tokensFor(8)).toBe(DEFAULT_CHUNK_BUDGET.min);
    const fast = new ChunkBudget({ max: 100 });
    feed(fast, { decode: flat(10), tokenMs: 0.001 }, 50);
    expect(fast.tokensFor(8)).toBe(100);
    // stories260K-like: a 0.7 ms decode step, 1 ms of fixed cost per mixed step (> 1.25 · 0.7).
    const tiny = new ChunkBudget({ max: 64 });
    feed(tiny, { decode: flat(0.7), fixed: 1, tokenMs: 0.004 }, 60, (i) => [8, 16, 32, 24][i % 4]);
    expect(tiny.estimateFor(8).fixedMs).toBeCloseTo(1, 6);
    expect(tiny.tokensFor(8)).toBe(64);
    const noisy = new ChunkBudget({ max: 64 });
    for (let i = 0; i < 20; i++) {
      noisy.observe({ decodeRows: 8, promptTokens: 0, ms: 10 });
      noisy.observe({ decodeRows: 8, promptTokens: 16, ms: 8 });
    }
    expect(noisy.estimateFor(8).tokenMs).toBeGreaterThan(0);
    expect(noisy.tokensFor(8)).toBe(64);
  });

  it('refuses settings that cannot describe a budget', () => {
    expect(() => new ChunkBudget({ targetRatio: 1 })).toThrow(/targetRatio/);
    expect(() => new ChunkBudget({ min: 0 })).toThrow(/min/);
    expect(() => new ChunkBudget({ min: 16, max: 8 })).toThrow(/max/);
    expect(() => new ChunkBudget({ alpha: 0 })).toThrow(/alpha/);
  });
});
