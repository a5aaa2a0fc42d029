// Training events → chart series: one series per numeric field of `gradient_step` events (loss, reward,
// learning rate, KL, …), x = the step's position in the job (1, 2, …). Pure, so tested without a browser.
export interface TrainingEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

export interface MetricSeries {
  /** x values: 1-based gradient step numbers. */
  steps: number[];
  /** field → value per step (null where a step did not report it). */
  metrics: Map<string, (number | null)[]>;
}

/** Fields that are counters or ids rather than curves. */
const NOT_CURVES = new Set(['step', 'num_sequences', 'num_gradient_steps']);

export function emptySeries(): MetricSeries {
  return { steps: [], metrics: new Map() };
}

/** Append the gradient steps among `events` to `series` (in place) and return it. */
export function appendEvents(series: MetricSeries, events: readonly TrainingEvent[]): MetricSeries {
  for (const event of events) {
    if (event.type !== 'gradient_step') continue;
    const index = series.steps.length;
    series.steps.push(index + 1);
    for (const [key, value] of Object.entries(event.data)) {
      if (NOT_CURVES.has(key) || typeof value !== 'number' || !Number.isFinite(value)) continue;
      let values = series.metrics.get(key);
      if (!values) {
        values = new Array<number | null>(index).fill(null);
        series.metrics.set(key, values);
      }
      values.push(value);
    }
    for (const values of series.metrics.values()) if (values.length < index + 1) values.push(null);
  }
  return series;
}

/** Metric names in display order: the usual headline curves first, then the rest alphabetically. */
export function metricOrder(names: Iterable<string>): string[] {
  const first = ['loss', 'reward', 'mean_reward', 'learning_rate', 'lr', 'kl', 'kl_div', 'grad_norm'];
  const all = [...names];
  const rank = (n: string) => (first.includes(n) ? first.indexOf(n) : first.length);
  return all.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}
