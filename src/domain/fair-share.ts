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

/**
 * `waiting` (oldest first) in the order to admit it: round-robin by entity, the entity with the fewest running
 * items first, each admission counting as one more running item of its entity.
 */
export function fairAdmissionOrder<T>(waiting: readonly T[], running: Iterable<T>, entityOf: EntityOf<T>): T[] {
  const queues = new Map<string, T[]>();
  for (const item of waiting) {
    const e = entityOf(item);
    const q = queues.get(e);
    if (q) q.push(item);
    else queues.set(e, [item]);
  }
  if (queues.size <= 1) return [...waiting];
  const held = countByEntity(running, entityOf);
  // Map iteration follows insertion, i.e. the arrival of each entity's oldest waiting item: the tie-break.
  const heads = new Map<string, number>([...queues.keys()].map((e) => [e, 0]));
  const order: T[] = [];
  while (order.length < waiting.length) {
    let pick: string | null = null;
    for (const [e, i] of heads) {
      if (i >= queues.get(e)!.length) continue;
      if (pick === null || (held.get(e) ?? 0) < (held.get(pick) ?? 0)) pick = e;
    }
    const i = heads.get(pick!)!;
    order.push(queues.get(pick!)![i]);
    heads.set(pick!, i + 1);
    held.set(pick!, (held.get(pick!) ?? 0) + 1);
  }
  return order;
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
 * each: one victim per such waiting item, taken from the entity holding the most running items while it holds
 * more than its share. Empty while slots are free (admission needs no room then) or nobody waits below its share.
 * `running` is ordered oldest first.
 */
export function fairShareVictims<T>(waiting: readonly T[], running: readonly T[], slots: number, entityOf: EntityOf<T>, opts: VictimOptions<T> = {}): T[] {
  if (waiting.length === 0 || running.length < slots) return [];
  const held = countByEntity(running, entityOf);
  const waitingCount = countByEntity(waiting, entityOf);
  const entities = new Set([...held.keys(), ...waitingCount.keys()]);
  const share = Math.max(1, Math.floor(slots / entities.size));
  if (![...waitingCount.keys()].some((e) => (held.get(e) ?? 0) < share)) return [];
  const { protect = () => false, ready = () => true } = opts;
  const victims: T[] = [];
  const taken = new Set<T>();
  for (const item of fairAdmissionOrder(waiting, running, entityOf)) {
    const e = entityOf(item);
    if ((held.get(e) ?? 0) >= share || !ready(item)) continue;
    // The entity holding the most, if it is above its share.
    let richest: string | null = null;
    for (const [other, n] of held) if (other !== e && n > share && (richest === null || n > held.get(richest)!)) richest = other;
    if (richest === null) break;
    let victim: T | null = null;
    for (let i = running.length - 1; i >= 0; i--) {
      const r = running[i];
      if (entityOf(r) === richest && !taken.has(r) && !protect(r)) {
        victim = r;
        break;
      }
    }
    if (victim === null) break;
    taken.add(victim);
    victims.push(victim);
    held.set(richest, held.get(richest)! - 1);
    held.set(e, (held.get(e) ?? 0) + 1);
  }
  return victims;
}
