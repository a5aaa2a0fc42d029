// scale_learning_rate_by_reward_std_dev: the multiplier ART's LocalBackend computes from the model's
// train/reward_std_dev history. Expected values come from numpy.polyfit(steps, means, 1) run on the same
// points (CPython 3.11, numpy), and from hand-checked lines.
import { describe, expect, it } from 'vitest';
import { fitRewardStdDevLearningRate } from '../../src/domain/reward-std-lr.js';
import { rewardStdDevHistory, trainStepMetrics } from '../../src/domain/training-step-metrics.js';
import type { HistoryRow } from '../../src/store/sqlite/history-repo.js';
import type { TrainingEventRecord } from '../../src/store/records.js';

describe('reward std dev learning-rate multiplier', () => {
  it('is the fitted spread at the last step over the fitted spread at step 0', () => {
    // An exact line: 0.6 − 0.1·step → at step 3: 0.3 / 0.6.
    const exact = fitRewardStdDevLearningRate([{ step: 1, reward_std_dev: 0.5 }, { step: 2, reward_std_dev: 0.4 }, { step: 3, reward_std_dev: 0.3 }]);
    expect(exact.slope).toBeCloseTo(-0.1, 12);
    expect(exact.intercept).toBeCloseTo(0.6, 12);
    expect(exact.multiplier).toBeCloseTo(0.5, 12);
  });

  it('averages rows of one step first, then fits (numpy.polyfit values)', () => {
    const fit = fitRewardStdDevLearningRate([
      { step: 5, reward_std_dev: 0.35 }, // order does not matter
      { step: 1, reward_std_dev: 0.8 },
      { step: 2, reward_std_dev: 0.5 },
      { step: 2, reward_std_dev: 0.7 },
      { step: 3, reward_std_dev: 0.55 },
      { step: 4, reward_std_dev: Number.NaN }, // dropped, as ART drops nulls
    ]);
    expect(fit.steps).toBe(4);
    expect(fit.slope).toBeCloseTo(-0.10571428571428565, 12);
    expect(fit.intercept).toBeCloseTo(0.8657142857142854, 12);
    expect(fit.multiplier).toBeCloseTo(0.3894389438943896, 12);
  });

  it('a growing spread raises the rate', () => {
    expect(fitRewardStdDevLearningRate([{ step: 0, reward_std_dev: 0.2 }, { step: 4, reward_std_dev: 0.4 }]).multiplier).toBeCloseTo(2, 12);
  });

  it("keeps ART's prior of 1 with fewer than two steps or an intercept ≤ 0", () => {
    expect(fitRewardStdDevLearningRate([]).multiplier).toBe(1);
    expect(fitRewardStdDevLearningRate([{ step: 3, reward_std_dev: 0.4 }, { step: 3, reward_std_dev: 0.2 }]).multiplier).toBe(1);
    // 0.1·step − 0.1: intercept −0.1.
    const negative = fitRewardStdDevLearningRate([{ step: 2, reward_std_dev: 0.1 }, { step: 3, reward_std_dev: 0.2 }]);
    expect(negative.intercept).toBeCloseTo(-0.1, 12);
    expect(negative.multiplier).toBe(1);
  });
});

describe('training metrics stored with the checkpoint', () => {
  const event = (type: TrainingEventRecord['type'], data: Record<string, unknown>, seq: number): TrainingEventRecord => ({
    seq, id: `e${seq}`, jobId: 'j', type, data, createdAt: '2026-01-01T00:00:00.000Z',
  });

  it("averages each gradient_step metric over the events that carry it, under train/ (ART's LocalBackend log)", () => {
    const metrics = trainStepMetrics([
      event('training_started', { num_sequences: 3 }, 1),
      event('gradient_step', { loss: 1, reward_std_dev: 0.4, learning_rate: 1e-5 }, 2),
      event('gradient_step', { loss: 3, reward_std_dev: 0.2, grad_norm: 2 }, 3),
      event('training_ended', {}, 4),
    ]);
    expect(metrics).toEqual({ 'train/loss': 2, 'train/reward_std_dev': expect.closeTo(0.3, 12), 'train/learning_rate': 1e-5, 'train/grad_norm': 2 });
  });

  it('reads the reward std dev rows of the history, every row kept (ART averages them per step later)', () => {
    const rows: HistoryRow[] = [
      { step: 1, split: 'train', metrics: { 'train/reward_std_dev': 0.5 } },
      { step: 1, split: 'val', metrics: { 'val/reward_std_dev': 0.1 } },
      { step: 1, split: 'train', metrics: { 'train/reward_std_dev': 0.3 } },
      { step: 3, split: 'train', metrics: { 'train/reward_std_dev': 0.25, 'train/loss': 1 } },
    ];
    expect(rewardStdDevHistory(rows)).toEqual([{ step: 1, reward_std_dev: 0.5 }, { step: 1, reward_std_dev: 0.3 }, { step: 3, reward_std_dev: 0.25 }]);
  });
});
