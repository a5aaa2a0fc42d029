// Aggregate metrics of logged trajectory groups, as ART's LocalBackend computes them for `/log`:
// per split, the mean reward, the average within-group reward std, the exception rate
// (1 per group exception, 0 per trajectory) and the mean of every trajectory metric.
import type { TrajectoryGroupT } from '../protocol/training.js';

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** Population standard deviation (numpy's default, which ART uses). */
export function std(xs: number[]): number {
  if (xs.length === 0) return 0;
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
}

export function aggregateTrajectoryMetrics(split: string, groups: TrajectoryGroupT[]): Record<string, number> {
  const rewards: number[] = [];
  const groupStds: number[] = [];
  const exceptionFlags: number[] = [];
  const perMetric = new Map<string, number[]>();
  for (const group of groups) {
    const groupRewards = group.trajectories.map((t) => t.reward);
    rewards.push(...groupRewards);
    if (groupRewards.length) groupStds.push(std(groupRewards));
    for (const t of group.trajectories) {
      exceptionFlags.push(0);
      for (const [k, v] of Object.entries(t.metrics)) {
        const list = perMetric.get(k) ?? [];
        list.push(typeof v === 'boolean' ? Number(v) : v);
        perMetric.set(k, list);
      }
    }
    for (let i = 0; i < group.exceptions.length; i++) exceptionFlags.push(1);
  }
  const out: Record<string, number> = {};
  if (rewards.length) {
    out[`${split}/reward`] = mean(rewards);
    out[`${split}/reward_std_dev`] = mean(groupStds);
  }
  if (exceptionFlags.length) out[`${split}/exception_rate`] = mean(exceptionFlags);
  for (const [k, vs] of perMetric) if (!(`${split}/${k}` in out)) out[`${split}/${k}`] = mean(vs);
  return out;
}
