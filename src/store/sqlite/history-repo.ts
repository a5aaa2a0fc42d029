// A model's metric history, one row per log line as ART's history.jsonl keeps it: trajectory groups logged
// through `/log` (with their groups) and each training job's averaged step metrics at the step it produced
// (no groups). Rows outlive deleted checkpoints, as ART's file does; deleting the model deletes them.
import crypto from 'node:crypto';
import type { Db } from './database.js';
import { nowIso } from '../records.js';

export interface HistoryRow {
  step: number;
  split: string;
  metrics: Record<string, number>;
}

export class HistoryRepo {
  constructor(private readonly db: Db) {}

  append(modelId: string, step: number, split: string, metrics: Record<string, number>, groups: unknown[] = []): void {
    this.db
      .prepare('INSERT INTO trajectory_logs (id, model_id, step, split, groups, metrics, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(crypto.randomUUID(), modelId, step, split, JSON.stringify(groups), JSON.stringify(metrics), nowIso());
  }

  /** Every row of a model, oldest first. */
  all(modelId: string): HistoryRow[] {
    const rows = this.db
      .prepare('SELECT step, split, metrics FROM trajectory_logs WHERE model_id = ? ORDER BY rowid')
      .all(modelId) as { step: number; split: string; metrics: string }[];
    return rows.map((r) => ({ step: r.step, split: r.split, metrics: JSON.parse(r.metrics) as Record<string, number> }));
  }
}
