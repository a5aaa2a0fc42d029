// Hand-computed numbers for the losses, advantages, optimizer, schedule and packing.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { computeAdvantages, groupAdvantages } from '../../worker/training/advantages.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { buildMicroBatch, packSequences } from '../../worker/training/data.js';
import { policyLoss, tokenEntropy, tokenLogprobs, weightedNll, type PolicyTokens } from '../../worker/training/losses.js';
import { defaultPolicyLossConfig, type PolicyLossConfig } from '../../src/protocol/policy-loss.js';
import { AdamW, clipByGlobalNorm, learningRateAt } from '../../worker/training/optimizer.js';

const LN2 = Math.log(2);

beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

describe('token logprobs and SFT loss', () => {
  it('log softmax at the target, and its entropy', () => {
    // softmax([0, ln 3]) = [1/4, 3/4]
    const logits = tf.tensor2d([[0, Math.log(3)], [0, Math.log(3)]]);
    expect(Array.from(tokenLogprobs(logits, new Int32Array([1, 0])).dataSync())).toEqual([
      expect.closeTo(Math.log(0.75), 6),
      expect.closeTo(Math.log(0.25), 6),
    ]);
    const h = -(0.25 * Math.log(0.25) + 0.75 * Math.log(0.75));
    expect(tokenEntropy(logits).dataSync()[0]).toBeCloseTo(h, 6);
    let reported: Float32Array | null = null;
    tokenLogprobs(logits, new Int32Array([1, 0]), (e) => (reported = e));
    expect(Array.from(reported!)).toEqual([expect.closeTo(h, 6), expect.closeTo(h, 6)]);
  });

  it('weighted NLL counts only weighted tokens; gradient is w * (softmax - onehot)', () => {
    const logits = tf.tensor2d([[0, Math.log(3)], [5, -5]]);
    const weights = new Float32Array([1, 0]); // second token is prompt
    expect(weightedNll(tokenLogprobs(logits, new Int32Array([1, 0])), weights).dataSync()[0]).toBeCloseTo(-Math.log(0.75), 6);
    const g = tf.grad((x: tf.Tensor) => weightedNll(tokenLogprobs(x as tf.Tensor2D, new Int32Array([1, 0])), weights))(logits).dataSync();
    expect(Array.from(g).map((v) => Number(v.toFixed(6)))).toEqual([0.25, -0.25, 0, 0]);
  });
});

describe('policy losses (hand-computed)', () => {
  // new probs [0.5, 0.25], old probs [0.25, 0.5] -> ratios [2, 0.5]; advantages [+1, -1].
  const newLp = () => tf.tensor1d([Math.log(0.5), Math.log(0.25)]);
  const tokens = (over: Partial<PolicyTokens> = {}): PolicyTokens => ({
    oldLogprobs: Float32Array.from([Math.log(0.25), Math.log(0.5)]),
    advantages: Float32Array.from([1, -1]),
    weights: Float32Array.from([0.5, 0.5]),
    sequenceIndex: Int32Array.from([0, 0]),
    numSequences: 1,
    ...over,
  });
  const run = (cfg: PolicyLossConfig, t: PolicyTokens) => {
    const x = newLp();
    const value = policyLoss(x, t, cfg).loss.dataSync()[0];
    const grad = Array.from(tf.grad((v: tf.Tensor) => policyLoss(v as tf.Tensor1D, t, cfg).loss)(x).dataSync());
    return { value, grad };
  };

  it('CISPO (defaults: ratio clipped to [0, 5], no gradient through the ratio)', () => {
    const { value, grad } = run(defaultPolicyLossConfig('cispo'), tokens());
    // -(2 * 1 * ln 0.5) * 0.5 + -(0.5 * -1 * ln 0.25) * 0.5 = ln 2 - ln 2 / 2
    expect(value).toBeCloseTo(LN2 - LN2 / 2, 5);
    expect(grad[0]).toBeCloseTo(-1, 5); // -w * ratio * A
    expect(grad[1]).toBeCloseTo(0.25, 5);
  });

  it('CISPO with epsilon_high = 0.5 clips the ratio 2 to 1.5', () => {
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), epsilonHigh: 0.5 }, tokens());
    expect(grad[0]).toBeCloseTo(-0.75, 5);
    expect(grad[1]).toBeCloseTo(0.25, 5);
  });

  it('PPO-clip: clipped tokens give the clipped value and no gradient', () => {
    const { value, grad } = run(defaultPolicyLossConfig('ppo'), tokens());
    // token 1: -min(2, 1.2) = -1.2; token 2: -min(-0.5, -0.8) = 0.8
    expect(value).toBeCloseTo(0.5 * -1.2 + 0.5 * 0.8, 5);
    expect(grad).toEqual([0, 0]);
  });

  it('PPO-clip inside the trust region: gradient is -w * ratio * A', () => {
    const same = tokens({ oldLogprobs: Float32Array.from([Math.log(0.5), Math.log(0.25)]) });
    const { value, grad } = run(defaultPolicyLossConfig('ppo'), same);
    expect(value).toBeCloseTo(0, 6);
    expect(grad[0]).toBeCloseTo(-0.5, 5);
    expect(grad[1]).toBeCloseTo(0.5, 5);
  });

  it('unknown sampling logprobs (NaN) count as ratio 1', () => {
    const { grad } = run(defaultPolicyLossConfig('cispo'), tokens({ oldLogprobs: Float32Array.from([NaN, NaN]) }));
    expect(grad[0]).toBeCloseTo(-0.5, 5);
    expect(grad[1]).toBeCloseTo(0.5, 5);
  });

  it('sequence-level importance sampling uses the mean log-ratio of the sequence', () => {
    // log ratios [ln 2, -ln 2] average to 0 -> both tokens get ratio 1
    const { value } = run({ ...defaultPolicyLossConfig('cispo'), importanceSamplingLevel: 'sequence' }, tokens());
    expect(value).toBeCloseTo(0.5 * LN2 + 0.5 * Math.log(0.25), 5);
    // two sequences of one token each keep their own ratios
    const split = run({ ...defaultPolicyLossConfig('cispo'), importanceSamplingLevel: 'sequence' }, tokens({ sequenceIndex: Int32Array.from([0, 1]), numSequences: 2 }));
    expect(split.grad[0]).toBeCloseTo(-1, 5);
  });

  it('truncated importance sampling multiplies by min(ratio, cap)', () => {
    const { value } = run({ ...defaultPolicyLossConfig('cispo'), truncatedImportanceSampling: 1 }, tokens());
    expect(value).toBeCloseTo(0.5 * 2 * LN2 * 1 + 0.5 * (0.5 * Math.log(0.25)) * 0.5, 5);
  });

  it('KL penalty adds coef * k3(ref, new)', () => {
    const t = tokens({ refLogprobs: Float32Array.from([Math.log(0.5), Math.log(0.5)]) });
    const cfg = { ...defaultPolicyLossConfig('cispo'), klPenaltyCoef: 0.1 };
    const parts = policyLoss(newLp(), t, cfg);
    const k3 = 2 - LN2 - 1; // exp(ln 2) - ln 2 - 1 on token 2, 0 on token 1
    expect(parts.kl.dataSync()[0]).toBeCloseTo(0.5 * k3, 5);
    expect(parts.loss.dataSync()[0]).toBeCloseTo(LN2 / 2 + 0.1 * 0.5 * k3, 5);
    expect(() => policyLoss(newLp(), tokens(), cfg)).toThrow(/reference logprobs/);
  });

  // CISPO's gradient is -w * clip(ratio) * A (no gradient through the ratio), so it shows the ratio used.
  it("'average' importance sampling: the mean of the token and sequence ratios", () => {
    // token ratios [2, 0.5], sequence ratio exp(mean(ln 2, -ln 2)) = 1 -> [1.5, 0.75]
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), importanceSamplingLevel: 'average' }, tokens());
    expect(grad[0]).toBeCloseTo(-0.5 * 1.5, 5);
    expect(grad[1]).toBeCloseTo(0.5 * 0.75, 5);
  });

  it("'geometric_average' importance sampling: sqrt(token ratio * sequence ratio)", () => {
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), importanceSamplingLevel: 'geometric_average' }, tokens());
    expect(grad[0]).toBeCloseTo(-0.5 * Math.SQRT2, 5);
    expect(grad[1]).toBeCloseTo(0.5 * Math.SQRT1_2, 5);
  });

  it('the sequence ratio averages over trainable tokens only (weight 0 is prompt)', () => {
    // Only token 1 (log ratio ln 2) is trainable: the sequence ratio is 2.
    const t = tokens({ weights: Float32Array.from([0.5, 0]) });
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), importanceSamplingLevel: 'sequence' }, t);
    expect(grad[0]).toBeCloseTo(-0.5 * 2, 5);
    expect(grad[1]).toBeCloseTo(0, 6);
  });

  it('max_negative_advantage_importance_sampling_weight caps the ratio of negative-advantage tokens only', () => {
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), maxNegativeAdvantageIsWeight: 0.25 }, tokens());
    expect(grad[0]).toBeCloseTo(-0.5 * 2, 5); // A > 0: ratio 2 kept
    expect(grad[1]).toBeCloseTo(0.5 * 0.25, 5); // A < 0: ratio 0.5 capped to 0.25
  });

  it('mask_prob_ratio zeroes tokens whose ratio is outside (1 - epsilon, 1 + epsilon_high)', () => {
    const { value, grad } = run({ ...defaultPolicyLossConfig('cispo'), epsilonHigh: 0.5, maskProbRatio: true }, tokens());
    expect(grad[0]).toBeCloseTo(0, 6); // ratio 2 > 1.5: masked
    expect(grad[1]).toBeCloseTo(0.5 * 0.5, 5); // ratio 0.5 inside (0, 1.5)
    expect(value).toBeCloseTo(0.5 * 0.5 * Math.log(0.25), 5);
    // PPO, both advantages +1: ratio 2 is inside (0.8, 3) and unclipped (gradient -w * ratio * A); ratio 0.5 < 0.8
    // is masked to 0, so its token adds nothing (unmasked it would be -min(0.5, 0.8) with gradient -0.25).
    const below = run({ ...defaultPolicyLossConfig('ppo'), epsilon: 0.2, epsilonHigh: 2, maskProbRatio: true }, tokens({ advantages: Float32Array.from([1, 1]) }));
    expect(below.grad[0]).toBeCloseTo(-1, 5);
    expect(below.grad[1]).toBeCloseTo(0, 6);
    expect(below.value).toBeCloseTo(-1, 5);
  });

  it('Kimi K2 tau moves the advantage by -tau * (new - old logprob)', () => {
    const tau = 0.5;
    const { grad } = run({ ...defaultPolicyLossConfig('cispo'), kimiK2Tau: tau }, tokens());
    expect(grad[0]).toBeCloseTo(-0.5 * 2 * (1 - tau * LN2), 5);
    expect(grad[1]).toBeCloseTo(-0.5 * 0.5 * (-1 + tau * LN2), 5);
  });

  it("ART's defaults, and inputs that do not line up are refused", () => {
    const off = { importanceSamplingLevel: 'token', truncatedImportanceSampling: null, maxNegativeAdvantageIsWeight: null, maskProbRatio: false, kimiK2Tau: null, klPenaltyCoef: 0 };
    expect(defaultPolicyLossConfig()).toStrictEqual({ lossFn: 'cispo', epsilon: 1, epsilonHigh: 4, ...off });
    expect(defaultPolicyLossConfig('ppo')).toStrictEqual({ lossFn: 'ppo', epsilon: 0.2, epsilonHigh: 0.2, ...off });
    expect(() => policyLoss(tf.tensor1d([0, 0, 0]), tokens(), defaultPolicyLossConfig())).toThrow('policyLoss: 2 old logprobs for 3 tokens');
    const logits = tf.tensor2d([[0, 1], [1, 0]]);
    expect(() => tokenLogprobs(logits, new Int32Array([1]))).toThrow('tokenLogprobs: 1 targets for 2 rows');
    expect(() => tokenLogprobs(logits, new Int32Array([0, 2]))).toThrow('target token 2 is outside the vocabulary (2)');
    expect(() => tokenLogprobs(logits, new Int32Array([-1, 0]))).toThrow('target token -1 is outside the vocabulary (2)');
    expect(Array.from(tokenLogprobs(logits, new Int32Array([1, 1])).dataSync())).toEqual([expect.closeTo(-Math.log(1 + Math.exp(-1)), 5), expect.closeTo(-Math.log(1 + Math.exp(1)), 5)]);
  });
});

describe('advantages', () => {
  it('centres and scales within a group (population std)', () => {
    const g = groupAdvantages([1, 0, 0, 1], { scaleRewards: true });
    expect(g.trainable).toBe(true);
    expect(g.mean).toBe(0.5);
    expect(g.std).toBe(0.5);
    g.advantages.forEach((a, i) => expect(a).toBeCloseTo([1, -1, -1, 1][i] * (0.5 / 0.500001), 9));
    expect(groupAdvantages([3, 1], { scaleRewards: false }).advantages).toEqual([1, -1]);
  });

  it('refuses a reward that is not a finite number, naming it', () => {
    expect(() => groupAdvantages([1, Number.NaN], { scaleRewards: true })).toThrow('reward NaN is not a finite number');
    expect(() => groupAdvantages([Infinity, 0], { scaleRewards: false })).toThrow('reward Infinity is not a finite number');
  });

  it('skips and counts zero-variance groups', () => {
    const s = computeAdvantages([[1, 1, 1], [0, 1], [], [2, 2]], { scaleRewards: true });
    expect(s.numGroupsSubmitted).toBe(4);
    expect(s.numGroupsTrainable).toBe(1);
    expect(s.groups[0].advantages).toEqual([0, 0, 0]);
    expect(s.rewardMean).toBeCloseTo(8 / 7, 9);
    expect(s.rewardStdDev).toBeCloseTo((0 + 0.5 + 0) / 3, 9);
  });
});

describe('optimizer and schedule', () => {
  it('AdamW: two steps by hand', () => {
    const p = tf.variable(tf.scalar(1));
    const opt = new AdamW([p], { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0.01 });
    opt.apply([tf.scalar(0.5)], 0.1);
    expect(p.dataSync()[0]).toBeCloseTo(1 - 0.1 * (1 + 0.01), 6);
    opt.apply([tf.scalar(0.5)], 0.1);
    expect(p.dataSync()[0]).toBeCloseTo(0.899 - 0.1 * (1 + 0.01 * 0.899), 6);
    expect(opt.steps).toBe(2);
  });

  it('the fused AdamW kernel and the op-by-op update agree', () => {
    const run = (fused: boolean) => {
      const p = tf.variable(tf.tensor2d([[0.5, -1], [2, 0.1]]));
      const opt = new AdamW([p], { beta1: 0.9, beta2: 0.99, epsilon: 1e-8, weightDecay: 0.1 }, fused);
      for (const g of [[[1, -2], [0.5, 0]], [[-0.3, 0.2], [4, -1]]]) opt.apply([tf.tensor2d(g)], 0.05);
      const out = Array.from(p.dataSync());
      opt.dispose();
      p.dispose();
      return out;
    };
    const fused = run(true);
    const ops = run(false);
    fused.forEach((v, i) => expect(v).toBeCloseTo(ops[i], 6));
    expect(fused[0]).not.toBeCloseTo(0.5, 2);
  });

  it('clips by global norm and reports the pre-clip norm', () => {
    const { grads, norm } = clipByGlobalNorm([tf.tensor1d([3]), tf.tensor1d([4])], 1);
    expect(norm).toBeCloseTo(5, 6);
    expect(grads[0].dataSync()[0]).toBeCloseTo(0.6, 5);
    expect(grads[1].dataSync()[0]).toBeCloseTo(0.8, 5);
    expect(clipByGlobalNorm([tf.tensor1d([0.3])], 1).grads[0].dataSync()[0]).toBeCloseTo(0.3, 6);
  });

  it('warmup then cosine, or constant', () => {
    const s = { peak: 1e-3, warmupSteps: 4, totalSteps: 14, kind: 'cosine' as const, minRatio: 0 };
    expect(learningRateAt(0, s)).toBeCloseTo(2e-4, 12);
    expect(learningRateAt(3, s)).toBeCloseTo(8e-4, 12);
    expect(learningRateAt(4, s)).toBeCloseTo(1e-3, 12);
    expect(learningRateAt(9, s)).toBeCloseTo(5e-4, 12);
    expect(learningRateAt(14, s)).toBeCloseTo(0, 12);
    expect(learningRateAt(9, { ...s, kind: 'constant' })).toBe(1e-3);
  });
});

describe('packing', () => {
  it('first-fit decreasing into a token budget', () => {
    expect(packSequences([5, 3, 4, 2], 7)).toEqual([[0, 3], [1, 2]]);
    expect(packSequences([9, 1], 4)).toEqual([[0], [1]]);
  });

  it('builds next-token targets, positions restarting per sequence, and masks', () => {
    const mb = buildMicroBatch(
      [
        { ids: [1, 2, 3], lossMask: [0, 0, 1], logprobs: [NaN, NaN, -0.5], advantage: 2 },
        { ids: [4, 5], lossMask: [0, 1] },
      ],
      [7, 9],
    );
    expect(Array.from(mb.batch.inputIds)).toEqual([1, 2, 4]);
    expect(Array.from(mb.targets)).toEqual([2, 3, 5]);
    expect(Array.from(mb.batch.positions)).toEqual([0, 1, 0]);
    expect(Array.from(mb.batch.segmentIds)).toEqual([1, 1, 2]);
    expect(Array.from(mb.trainable)).toEqual([0, 1, 1]);
    expect(Array.from(mb.sequenceIndex)).toEqual([7, 7, 9]);
    expect(mb.oldLogprobs[1]).toBeCloseTo(-0.5, 6);
    expect(Number.isNaN(mb.oldLogprobs[2])).toBe(true);
    expect(Array.from(mb.advantages)).toEqual([2, 2, 0]);
    expect(mb.numTrainableTokens).toBe(2);
  });
});
