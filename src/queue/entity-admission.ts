// Per-entity admission of inference requests at the API: each entity (tenant) may have `inFlight` requests
// handed to workers at once and `queued` more waiting here for one of its own slots; past that its requests are
// refused (429). Entities never wait for each other's slots, so one tenant's backlog can neither delay another's
// request here nor turn it into a 429. Between entities, the worker's scheduler shares its batch
// round-robin (src/domain/fair-share.ts). Pure bookkeeping: the gateway (inference-gateway.ts) does the I/O.

export interface EntityLimits {
  /** Requests of one entity handed to workers and not finished. */
  inFlight: number;
  /** Requests of one entity waiting here for one of its in-flight slots. */
  queued: number;
}

export type Admission = { kind: 'run' } | { kind: 'queued' } | { kind: 'full'; reason: string };

interface EntityState<T> {
  running: number;
  waiting: T[];
}

export class EntityAdmission<T> {
  private readonly entities = new Map<string, EntityState<T>>();

  constructor(private readonly limits: EntityLimits) {
    if (!(limits.inFlight >= 1)) throw new Error('the in-flight limit per entity must be at least 1');
  }

  /** Run `item` now, hold it (it is returned by a later `finished`), or refuse it. */
  offer(entity: string, item: T): Admission {
    const s = this.entities.get(entity) ?? { running: 0, waiting: [] };
    if (s.running < this.limits.inFlight) {
      s.running++;
      this.entities.set(entity, s);
      return { kind: 'run' };
    }
    if (s.waiting.length >= this.limits.queued) {
      return { kind: 'full', reason: `${s.running} requests in flight and ${s.waiting.length} queued for this entity (limits ${this.limits.inFlight} and ${this.limits.queued})` };
    }
    s.waiting.push(item);
    this.entities.set(entity, s);
    return { kind: 'queued' };
  }

  /** A running item of `entity` ended: the next one of its waiting items to run now, if any (it takes the slot). */
  finished(entity: string): T | null {
    const s = this.entities.get(entity);
    if (!s) return null;
    const next = s.waiting.shift();
    if (next !== undefined) return next;
    s.running = Math.max(0, s.running - 1);
    if (s.running === 0) this.entities.delete(entity);
    return null;
  }

  /** Drop a waiting item (cancelled or timed out before it ran); false when it was not waiting. */
  withdraw(entity: string, item: T): boolean {
    const s = this.entities.get(entity);
    const i = s ? s.waiting.indexOf(item) : -1;
    if (!s || i < 0) return false;
    s.waiting.splice(i, 1);
    return true;
  }

  running(entity: string): number {
    return this.entities.get(entity)?.running ?? 0;
  }

  waiting(entity: string): number {
    return this.entities.get(entity)?.waiting.length ?? 0;
  }
}
