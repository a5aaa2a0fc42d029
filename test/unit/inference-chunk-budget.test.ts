import { describe, expect, it } from 'vitest';
import { ChunkBudget, DEFAULT_CHUNK_BUDGET } from '../../worker/inference/chunk-budget.js';

/** Steps of a machine where a decode step costs `decodeMs` and each prompt token `tokenMs` more. */
function feed(b: ChunkBudget, decodeMs: number, tokenMs: number, rounds: number, chunk = () => b.tokens) {
  for (let i = 0; i < rounds; i++) {
    b.observe({ decodeRows: 8, promptTokens: 0, ms: decodeMs });
    const c = chunk();
    b.observe({ decodeRows: 7, promptTokens: c, ms: decodeMs + c * tokenMs });
  }
}

describe('mixed-step chunk budget', () => {
  it('starts at its initial budget and keeps it until both decode and mixed steps were measured', () => {
    const b = new ChunkBudget();
    expect(b.tokens).toBe(DEFAULT_CHUNK_BUDGET.initial);
    b.observe({ decodeRows: 0, promptTokens: 97, ms: 25 }); // a prompt alone says nothing about mixed steps
    b.observe({ decodeRows: 7, promptTokens: 32, ms: 14 }); // no decode step known yet: cannot attribute
    expect(b.tokens).toBe(32);
    b.observe({ decodeRows: 8, promptTokens: 0, ms: 6 });
    expect(b.tokens).toBe(32);
    expect(b.estimate.tokenMs).toBeNaN();
  });

  it('sizes a mixed step to cost targetRatio decode steps: (ratio − 1) · decode / per-token cost', () => {
    // ~20M on two cores: 6 ms decode steps, 0.25 ms per prompt token → (2 − 1) · 6 / 0.25 = 24 tokens.
    const b = new ChunkBudget({ targetRatio: 2 });
    feed(b, 6, 0.25, 50);
    expect(b.tokens).toBe(24);
    expect(b.estimate.decodeMs).toBeCloseTo(6, 6);
    expect(b.estimate.tokenMs).toBeCloseTo(0.25, 6);
    // A 1.1B 4-bit model: 60 ms decode steps, 5 ms per prompt token → 12 tokens; ratio 3 → 24.
    const big = new ChunkBudget({ targetRatio: 2 });
    feed(big, 60, 5, 80);
    expect(big.tokens).toBe(12);
    const byDefault = new ChunkBudget(); // 2.25: (1.25 · 60) / 5 = 15
    feed(byDefault, 60, 5, 80);
    expect(byDefault.tokens).toBe(15);
    const loose = new ChunkBudget({ targetRatio: 3 });
    feed(loose, 60, 5, 80);
    expect(loose.tokens).toBe(24);
  });

  it('follows a change of speed (another model size, a busier machine) through its moving averages', () => {
    const b = new ChunkBudget({ targetRatio: 2 });
    feed(b, 6, 0.25, 50);
    expect(b.tokens).toBe(24);
    feed(b, 6, 0.5, 100); // prompt tokens got twice as expensive
    expect(b.tokens).toBe(12);
  });

  it('clamps to [min, max], and a mixed step faster than the decode average counts as cheap, not free', () => {
    const slow = new ChunkBudget();
    feed(slow, 10, 10, 50); // every prompt token costs a whole decode step
    expect(slow.tokens).toBe(DEFAULT_CHUNK_BUDGET.min);
    const fast = new ChunkBudget({ max: 100 });
    feed(fast, 10, 0.001, 50);
    expect(fast.tokens).toBe(100);
    const noisy = new ChunkBudget({ max: 64 });
    for (let i = 0; i < 20; i++) {
      noisy.observe({ decodeRows: 8, promptTokens: 0, ms: 10 });
      noisy.observe({ decodeRows: 8, promptTokens: 16, ms: 8 });
    }
    expect(noisy.estimate.tokenMs).toBeGreaterThan(0);
    expect(noisy.tokens).toBe(64);
  });

  it('refuses settings that cannot describe a budget', () => {
    expect(() => new ChunkBudget({ targetRatio: 1 })).toThrow(/targetRatio/);
    expect(() => new ChunkBudget({ min: 0 })).toThrow(/min/);
    expect(() => new ChunkBudget({ min: 16, max: 8 })).toThrow(/max/);
    expect(() => new ChunkBudget({ alpha: 0 })).toThrow(/alpha/);
  });
});
