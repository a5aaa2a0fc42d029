// Fair shares of an inference worker's batch between entities (tenants). Pure: the worker's scheduler
// (worker/inference/scheduler.ts) asks these two questions before each model step.
//
// Policy (max-min fairness over batch slots):
//   - Waiting work is admitted round-robin by entity: the entity holding the fewest running slots goes next
//     (ties: the one whose oldest waiting item arrived first); within an entity, oldest first.
//   - An entity may use every free slot while nobody else waits (work-conserving). When the batch is full and an
//     entity waits with fewer than its fair share (slots / entities with work), the newest running item of the
//     entity holding the most slots (above its share) is preempted to make room: one tenant's backlog delays
//     another's request by at most one step, never by the length of its streams.

/** The entity of an item ('' for work with none, e.g. calibration: it is one more entity). */
export type EntityOf<T> = (item: T) => string;

function countByEntity<T>(items: Iterable<T>, entityOf: EntityOf<T>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(entityOf(item), (counts.get(entityOf(item)) ?? 0) + 1);
  return counts;
}

/** `items` grouped by entity, each group in the items' order; groups in the order of their first item. */
function groupByEntity<T>(items: readonly T[], entityOf: EntityOf<T>): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const e = entityOf(item);
    const g = groups.get(e);
    if (g) g.push(item);
    else groups.set(e, [item]);
  }
  return groups;
}

/**
 * `waiting` (oldest first) in the order to admit it: round-robin by entity, the entity with the fewest running
 * items first, each admission counting as one more running item of its entity. Lazy: a scheduler that stops after
 * a few admissions (the batch is full) pays for those, not for ordering a backlog of thousands every step.
 */
export function* fairAdmissionOrder<T>(waiting: readonly T[], running: Iterable<T>, entityOf: EntityOf<T>): Generator<T> {
  const queues = groupByEntity(waiting, entityOf);
  if (queues.size <= 1) {
    yield* [...waiting]; // a copy: the caller may remove items from `waiting` as it admits them
    return;
  }
  const held = countByEntity(running, entityOf);
  // Map iteration follows insertion, i.e. the arrival of each entity's oldest waiting item: the tie-break.
  const heads = new Map<string, number>([...queues.keys()].map((e) => [e, 0]));
  while (heads.size) {
    let pick: string | null = null;
    for (const e of heads.keys()) if (pick === null || (held.get(e) ?? 0) < (held.get(pick) ?? 0)) pick = e;
    const q = queues.get(pick!)!;
    const i = heads.get(pick!)!;
    if (i + 1 >= q.length) heads.delete(pick!);
    else heads.set(pick!, i + 1);
    held.set(pick!, (held.get(pick!) ?? 0) + 1);
    yield q[i];
  }
}

export interface VictimOptions<T> {
  /** Running items that may not be taken. */
  protect?: (item: T) => boolean;
  /**
   * Whether a waiting item could start now if it had a slot (the scheduler: its adapter's turn, no group prefill
   * to wait for). Room is made only for those: a slot taken for one that then does not start would go straight
   * back to the victim, its cache recomputed for nothing, step after step. Asked only of entities below their share.
   */
  ready?: (item: T) => boolean;
}

/**
 * Running items to preempt, newest first, so that entities waiting below their fair share of `slots` get a slot
 * each: one victim per such waiting item (the entity holding the fewest first), taken from the entity holding the
 * most running items while it holds more than its share. Empty while slots are free (admission needs no room then)
 * or nobody waits below its share. `running` is ordered oldest first.
 */
export function fairShareVictims<T>(waiting: readonly T[], running: readonly T[], slots: number, entityOf: EntityOf<T>, opts: VictimOptions<T> = {}): T[] {
  if (waiting.length === 0 || running.length < slots) return [];
  const held = countByEntity(running, entityOf);
  const queues = groupByEntity(waiting, entityOf);
  const entities = new Set([...held.keys(), ...queues.keys()]);
  const share = Math.max(1, Math.floor(slots / entities.size));
  const { protect = () => false, ready = () => true } = opts;
  const next = new Map<string, number>();
  const victims: T[] = [];
  const taken = new Set<T>();
  for (;;) {
    // The entity below its share holding the fewest, with a waiting item left.
    let poorest: string | null = null;
    for (const e of queues.keys()) if ((held.get(e) ?? 0) < share && (poorest === null || (held.get(e) ?? 0) < (held.get(poorest) ?? 0))) poorest = e;
    if (poorest === null) break;
    const q = queues.get(poorest)!;
    let i = next.get(poorest) ?? 0;
    while (i < q.length && !ready(q[i])) i++;
    if (i >= q.length) {
      queues.delete(poorest);
      continue;
    }
    next.set(poorest, i + 1);
    if (i + 1 >= q.length) queues.delete(poorest);
    // The entity holding the most, if it is above its share.
    let richest: string | null = null;
    for (const [other, n] of held) if (other !== poorest && n > share && (richest === null || n > held.get(richest)!)) richest = other;
    if (richest === null) break;
    let victim: T | null = null;
    for (let j = running.length - 1; j >= 0; j--) {
      const r = running[j];
      if (entityOf(r) === richest && !taken.has(r) && !protect(r)) {
        victim = r;
        break;
      }
    }
    if (victim === null) break;
    taken.add(victim);
    victims.push(victim);
    held.set(richest, held.get(richest)! - 1);
    held.set(poorest, (held.get(poorest) ?? 0) + 1);
  }
  return victims;
}
