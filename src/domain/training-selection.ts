// Which queued training job runs next: fair between entities (tenants). Pure; the training scheduler
// (src/queue/training-scheduler.ts) asks it each time a trainer may be free, and hands out jobs in the order it gives.
//
// Rules, in order:
//   1. Jobs of one model run one at a time, in the order they were created (each continues from the previous
//      checkpoint): only the oldest queued job of a model with no active job is a candidate.
//   2. An entity with `maxActivePerEntity` jobs active (handed to a trainer and not finished) waits (0: no cap).
//   3. Among the candidates: the entity with the higher priority (HEARTH_TRAINING_ENTITY_PRIORITY) first; then
//      the entity with the fewest active jobs; then the entity whose last job started longest ago (never: first),
//      so entities take turns on a single trainer; then the oldest job.

export interface QueuedJob {
  id: string;
  modelId: string;
  entity: string;
}

export interface ActiveJob {
  modelId: string;
  entity: string;
}

export interface TrainingFairness {
  /** Active jobs an entity may hold at once; 0: no cap. */
  maxActivePerEntity: number;
  /** An entity's priority (higher runs first); entities not named have 0. */
  priorities: ReadonlyMap<string, number>;
}

/**
 * The candidates of `queued` (oldest first) in the order to hand them out, each one counted as active for those
 * after it. `lastStarted`: entity → a number that grows with each start (a counter or a time).
 */
export function trainingPickOrder(
  queued: readonly QueuedJob[],
  active: readonly ActiveJob[],
  lastStarted: ReadonlyMap<string, number>,
  fairness: TrainingFairness,
): QueuedJob[] {
  const busyModels = new Set(active.map((j) => j.modelId));
  const activeOf = new Map<string, number>();
  for (const j of active) activeOf.set(j.entity, (activeOf.get(j.entity) ?? 0) + 1);
  const candidates: { job: QueuedJob; age: number }[] = [];
  const seenModels = new Set<string>();
  queued.forEach((job, age) => {
    if (seenModels.has(job.modelId)) return;
    seenModels.add(job.modelId);
    if (!busyModels.has(job.modelId)) candidates.push({ job, age });
  });
  const priority = (e: string) => fairness.priorities.get(e) ?? 0;
  const started = new Map(lastStarted);
  let turn = Math.max(0, ...started.values());
  const order: QueuedJob[] = [];
  while (candidates.length) {
    const open = candidates.filter((c) => fairness.maxActivePerEntity === 0 || (activeOf.get(c.job.entity) ?? 0) < fairness.maxActivePerEntity);
    if (!open.length) break;
    open.sort(
      (a, b) =>
        priority(b.job.entity) - priority(a.job.entity) ||
        (activeOf.get(a.job.entity) ?? 0) - (activeOf.get(b.job.entity) ?? 0) ||
        (started.get(a.job.entity) ?? -Infinity) - (started.get(b.job.entity) ?? -Infinity) ||
        a.age - b.age,
    );
    const next = open[0];
    order.push(next.job);
    candidates.splice(candidates.indexOf(next), 1);
    activeOf.set(next.job.entity, (activeOf.get(next.job.entity) ?? 0) + 1);
    started.set(next.job.entity, ++turn);
  }
  return order;
}

/** HEARTH_TRAINING_ENTITY_PRIORITY: `entity=number` pairs, comma-separated ("alice=10,batch=-5"). */
export function parseEntityPriorities(spec: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of (spec ?? '').split(',')) {
    const item = part.trim();
    if (!item) continue;
    const eq = item.lastIndexOf('=');
    const entity = eq > 0 ? item.slice(0, eq).trim() : '';
    const value = eq > 0 ? Number(item.slice(eq + 1)) : NaN;
    if (!entity || !Number.isFinite(value)) throw new Error(`HEARTH_TRAINING_ENTITY_PRIORITY: expected entity=number pairs, got "${item}"`);
    out.set(entity, value);
  }
  return out;
}
