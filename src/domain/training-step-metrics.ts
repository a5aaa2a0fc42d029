// What a finished training job logs at the step it produced, as ART's LocalBackend does after training
// (`_log_metrics(model, averages, "train", step)`): each metric of its `gradient_step` events averaged over
// the events that carry it, under `train/<name>`. Stored with the checkpoint, so the model's history (and
// scale_learning_rate_by_reward_std_dev) can read it per step. The parameters name only the fields read, so
// the store's records (TrainingEventRecord, HistoryRow) fit without this floor importing the store.
import type { RewardStdDevPoint } from './reward-std-lr.js';

/** A training event as stored: its type and data. */
interface StepEvent {
  type: string;
  data: Record<string, unknown>;
}

/** A row of a model's history: the metrics logged at one step. */
interface HistoryMetrics {
  step: number;
  metrics: Record<string, number>;
}

export function trainStepMetrics(events: readonly StepEvent[]): Record<string, number> {
  const sums = new Map<string, { total: number; count: number }>();
  for (const event of events) {
    if (event.type !== 'gradient_step') continue;
    for (const [key, value] of Object.entries(event.data)) {
      if (typeof value !== 'number' || !Number.isFinite(value)) continue;
      const entry = sums.get(key) ?? { total: 0, count: 0 };
      entry.total += value;
      entry.count++;
      sums.set(key, entry);
    }
  }
  return Object.fromEntries([...sums.entries()].map(([key, { total, count }]) => [`train/${key}`, total / count]));
}

/** The `train/reward_std_dev` rows of a model's history (training results and `train` logs), for the scheduler. */
export function rewardStdDevHistory(rows: readonly HistoryMetrics[]): RewardStdDevPoint[] {
  return rows
    .filter((r) => typeof r.metrics['train/reward_std_dev'] === 'number' && Number.isFinite(r.metrics['train/reward_std_dev']))
    .map((r) => ({ step: r.step, reward_std_dev: r.metrics['train/reward_std_dev'] }));
}
