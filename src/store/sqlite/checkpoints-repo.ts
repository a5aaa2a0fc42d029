import type { Db } from './database.js';
import type { CheckpointRecord } from '../records.js';

interface Row { id: string; model_id: string; step: number; metrics: string; path: string | null; created_at: string }

const toRecord = (r: Row): CheckpointRecord => ({
  id: r.id, modelId: r.model_id, step: r.step, metrics: JSON.parse(r.metrics) as Record<string, number>, path: r.path, createdAt: r.created_at,
});

export class CheckpointsRepo {
  constructor(private readonly db: Db) {}

  insert(c: CheckpointRecord): void {
    this.db
      .prepare('INSERT INTO checkpoints (id, model_id, step, metrics, path, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(c.id, c.modelId, c.step, JSON.stringify(c.metrics), c.path, c.createdAt);
  }

  get(modelId: string, id: string): CheckpointRecord | null {
    const r = this.db.prepare('SELECT * FROM checkpoints WHERE model_id = ? AND id = ?').get(modelId, id) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  /** A checkpoint by its id alone (the id a client was given names it whatever model holds it). */
  byId(id: string): CheckpointRecord | null {
    const r = this.db.prepare('SELECT * FROM checkpoints WHERE id = ?').get(id) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  byStep(modelId: string, step: number): CheckpointRecord | null {
    const r = this.db.prepare('SELECT * FROM checkpoints WHERE model_id = ? AND step = ?').get(modelId, step) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  latest(modelId: string): CheckpointRecord | null {
    const r = this.db.prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step DESC LIMIT 1').get(modelId) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  /** One page in step order, strictly after `afterStep` in that order; fetches limit+1 to know `has_more`. */
  page(modelId: string, order: 'asc' | 'desc', afterStep: number | null, limit: number): CheckpointRecord[] {
    const cmp = order === 'asc' ? '>' : '<';
    const sql =
      `SELECT * FROM checkpoints WHERE model_id = ?` +
      (afterStep === null ? '' : ` AND step ${cmp} ?`) +
      ` ORDER BY step ${order === 'asc' ? 'ASC' : 'DESC'} LIMIT ?`;
    const args = afterStep === null ? [modelId, limit] : [modelId, afterStep, limit];
    return (this.db.prepare(sql).all(...args) as Row[]).map(toRecord);
  }

  all(modelId: string): CheckpointRecord[] {
    return (this.db.prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step').all(modelId) as Row[]).map(toRecord);
  }

  setMetrics(id: string, metrics: Record<string, number>): void {
    this.db.prepare('UPDATE checkpoints SET metrics = ? WHERE id = ?').run(JSON.stringify(metrics), id);
  }

  deleteByStep(modelId: string, step: number): boolean {
    return this.db.prepare('DELETE FROM checkpoints WHERE model_id = ? AND step = ?').run(modelId, step).changes > 0;
  }

  allPaths(): string[] {
    return (this.db.prepare('SELECT path FROM checkpoints WHERE path IS NOT NULL').all() as { path: string }[]).map((r) => r.path);
  }

  count(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM checkpoints').get() as { n: number }).n;
  }
}
