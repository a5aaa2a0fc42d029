import { describe, expect, it } from 'vitest';
import { promptLogprobs } from '../../worker/inference/prompt-logprobs.js';

describe('promptLogprobs (completions echo)', () => {
  it("scores token i with the logits after token i-1; the first token has none", () => {
    // vocab 3; rows: after token 0, after token 1, after token 2 (the last row scores nothing in the prompt).
    const logits = Float32Array.from([0, Math.log(3), 0, /**/ 2, 2, 2, /**/ 9, 9, 9]);
    const out = promptLogprobs(logits, [1, 1, 2], 3, 1);
    expect(out[0]).toEqual({ id: 1, logprob: null, topLogprobs: [] });
    expect(out[1].logprob).toBeCloseTo(Math.log(3 / 5), 6);
    expect(out[1].topLogprobs).toEqual([{ id: 1, logprob: expect.closeTo(Math.log(3 / 5), 6) }]);
    expect(out[2].logprob).toBeCloseTo(Math.log(1 / 3), 6);
    expect(promptLogprobs(logits, [1, 1, 2], 3, 0)[2].topLogprobs).toEqual([]);
    expect(() => promptLogprobs(logits, [1, 2], 3, 0)).toThrow(/expected 2 × 3 logits/);
  });
});
