import type { Db } from './database.js';
import type { ModelRecord } from '../records.js';

interface Row { id: string; entity: string; project: string; name: string; base_model: string; run_id: string | null; created_at: string }

const toRecord = (r: Row): ModelRecord => ({
  id: r.id, entity: r.entity, project: r.project, name: r.name, baseModel: r.base_model, runId: r.run_id, createdAt: r.created_at,
});

export class ModelsRepo {
  constructor(private readonly db: Db) {}

  insert(m: ModelRecord): void {
    this.db
      .prepare('INSERT INTO models (id, entity, project, name, base_model, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(m.id, m.entity, m.project, m.name, m.baseModel, m.runId, m.createdAt);
  }

  /** A model visible to `entity`; another entity's model is indistinguishable from a missing one. */
  get(entity: string, id: string): ModelRecord | null {
    const r = this.db.prepare('SELECT * FROM models WHERE id = ? AND entity = ?').get(id, entity) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  getById(id: string): ModelRecord | null {
    const r = this.db.prepare('SELECT * FROM models WHERE id = ?').get(id) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  findByName(entity: string, project: string, name: string): ModelRecord | null {
    const r = this.db.prepare('SELECT * FROM models WHERE entity = ? AND project = ? AND name = ?').get(entity, project, name) as Row | undefined;
    return r ? toRecord(r) : null;
  }

  listByEntity(entity: string): ModelRecord[] {
    return (this.db.prepare('SELECT * FROM models WHERE entity = ? ORDER BY created_at, id').all(entity) as Row[]).map(toRecord);
  }

  delete(id: string): void {
    this.db.prepare('DELETE FROM models WHERE id = ?').run(id);
  }

  count(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM models').get() as { n: number }).n;
  }
}
