// ART's experimental_config `scale_learning_rate_by_reward_std_dev` (ART LocalBackend
// `_get_reward_std_dev_learning_rate_multiplier`): as the groups' reward spread shrinks over training, so does
// the learning rate. From the model's history of `train/reward_std_dev` (rows averaged per step), fit a line
// y = m·step + b by least squares and multiply the learning rate by (m·last_step + b) / b, the fitted spread
// now relative to the fitted spread at step 0. With fewer than two steps of history, or an intercept ≤ 0
// (no meaningful ratio), the multiplier is 1, ART's prior.

export interface RewardStdDevPoint {
  step: number;
  reward_std_dev: number;
}

export interface RewardStdDevFit {
  multiplier: number;
  /** Slope and intercept of the fitted line; null when there were fewer than two steps. */
  slope: number | null;
  intercept: number | null;
  steps: number;
}

/** The per-step means of the history, by step (ART: drop nulls, group by step, mean, sort). */
function meansByStep(history: readonly RewardStdDevPoint[]): { step: number; value: number }[] {
  const sums = new Map<number, { total: number; count: number }>();
  for (const point of history) {
    if (!Number.isFinite(point.step) || !Number.isFinite(point.reward_std_dev)) continue;
    const entry = sums.get(point.step) ?? { total: 0, count: 0 };
    entry.total += point.reward_std_dev;
    entry.count++;
    sums.set(point.step, entry);
  }
  return [...sums.entries()].map(([step, { total, count }]) => ({ step, value: total / count })).sort((a, b) => a.step - b.step);
}

export function fitRewardStdDevLearningRate(history: readonly RewardStdDevPoint[]): RewardStdDevFit {
  const points = meansByStep(history);
  const n = points.length;
  if (n < 2) return { multiplier: 1, slope: null, intercept: null, steps: n };
  // Ordinary least squares (numpy.polyfit with deg=1), centred for numerical stability.
  const meanX = points.reduce((s, p) => s + p.step, 0) / n;
  const meanY = points.reduce((s, p) => s + p.value, 0) / n;
  let sxx = 0;
  let sxy = 0;
  for (const p of points) {
    sxx += (p.step - meanX) ** 2;
    sxy += (p.step - meanX) * (p.value - meanY);
  }
  const slope = sxy / sxx;
  const intercept = meanY - slope * meanX;
  const lastStep = points[n - 1].step;
  const multiplier = intercept > 0 ? (slope * lastStep + intercept) / intercept : 1;
  return { multiplier, slope, intercept, steps: n };
}
