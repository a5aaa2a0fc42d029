import type { Db } from './database.js';
import type { JobStatus, TrainingJobRecord } from '../records.js';

interface Row {
  id: string; entity: string; model_id: string; kind: 'rl' | 'sft'; status: JobStatus; dedup_key: string | null;
  error_message: string | null; created_at: string; started_at: string | null; finished_at: string | null;
}

/**
 * Every column but the payload: an RL payload can be tens of MB of trajectories, and jobs are looked up on every
 * report, status poll and scheduler pass. The payload is read and parsed when a caller first touches it.
 */
const COLUMNS = 'id, entity, model_id, kind, status, dedup_key, error_message, created_at, started_at, finished_at';
export class JobsRepo {
  constructor(private readonly db: Db) {}

  private toRecord(r: Row): TrainingJobRecord {
    let payload: unknown;
    let parsed = false;
    const read = () => this.payloadText(r.id);
    // The payload column holds what insert() wrote: the payload of this row's kind, as typed by TrainingJobRecord
    // (src/protocol/training-task.ts). It is not validated again here: a hand-over checks its size first
    // (TrainingScheduler), and an unparsable one throws when touched.
    return {
      id: r.id, entity: r.entity, modelId: r.model_id, kind: r.kind, status: r.status,
      get payload() {
        if (!parsed) {
          const text = read();
          payload = text === null ? null : JSON.parse(text);
          parsed = true;
        }
        return payload;
      },
      dedupKey: r.dedup_key, errorMessage: r.error_message, createdAt: r.created_at, startedAt: r.started_at, finishedAt: r.finished_at,
    } as TrainingJobRecord;
  }

  /** The stored JSON text of a job's payload, unparsed (null: no such job). */
  payloadText(id: string): string | null {
    return (this.db.prepare('SELECT payload FROM training_jobs WHERE id = ?').pluck().get(id) as string | undefined) ?? null;
  }

  insert(j: TrainingJobRecord): void {
    this.db
      .prepare(
        `INSERT INTO training_jobs (id, entity, model_id, kind, status, payload, dedup_key, error_message, created_at, started_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(j.id, j.entity, j.modelId, j.kind, j.status, JSON.stringify(j.payload), j.dedupKey, j.errorMessage, j.createdAt, j.startedAt, j.finishedAt);
  }

  get(entity: string, id: string): TrainingJobRecord | null {
    const r = this.db.prepare(`SELECT ${COLUMNS} FROM training_jobs WHERE id = ? AND entity = ?`).get(id, entity) as Row | undefined;
    return r ? this.toRecord(r) : null;
  }

  getById(id: string): TrainingJobRecord | null {
    const r = this.db.prepare(`SELECT ${COLUMNS} FROM training_jobs WHERE id = ?`).get(id) as Row | undefined;
    return r ? this.toRecord(r) : null;
  }

  findByDedupKey(modelId: string, dedupKey: string): TrainingJobRecord | null {
    const r = this.db.prepare(`SELECT ${COLUMNS} FROM training_jobs WHERE model_id = ? AND dedup_key = ?`).get(modelId, dedupKey) as Row | undefined;
    return r ? this.toRecord(r) : null;
  }

  withStatus(statuses: JobStatus[]): TrainingJobRecord[] {
    const marks = statuses.map(() => '?').join(',');
    return (this.db.prepare(`SELECT ${COLUMNS} FROM training_jobs WHERE status IN (${marks}) ORDER BY created_at`).all(...statuses) as Row[]).map((r) => this.toRecord(r));
  }

  /** Queued jobs, oldest first, without their payloads (RL payloads can be tens of MB: parse only the one dispatched). */
  queuedHeads(): { id: string; modelId: string; entity: string }[] {
    return this.db.prepare("SELECT id, model_id AS modelId, entity FROM training_jobs WHERE status = 'queued' ORDER BY created_at").all() as { id: string; modelId: string; entity: string }[];
  }

  /** A queued or running SFT job of `entity` that reads `file` (its dataset may not be deleted), or null. */
  activeSftJobReading(entity: string, file: string): string | null {
    const row = this.db
      .prepare("SELECT id FROM training_jobs WHERE entity = ? AND kind = 'sft' AND status IN ('queued','running') AND json_extract(payload, '$.resolved_data_path') = ? LIMIT 1")
      .get(entity, file) as { id: string } | undefined;
    return row?.id ?? null;
  }

  /** An entity's queued and running jobs, counted without reading their payloads (per-entity admission). */
  activeCountForEntity(entity: string): number {
    return (this.db.prepare("SELECT count(*) AS n FROM training_jobs WHERE entity = ? AND status IN ('queued','running')").get(entity) as { n: number }).n;
  }

  countWithStatus(status: JobStatus): number {
    return (this.db.prepare('SELECT count(*) AS n FROM training_jobs WHERE status = ?').get(status) as { n: number }).n;
  }

  activeForModel(modelId: string): TrainingJobRecord[] {
    return (this.db.prepare(`SELECT ${COLUMNS} FROM training_jobs WHERE model_id = ? AND status IN ('queued','running')`).all(modelId) as Row[]).map((r) => this.toRecord(r));
  }

  markRunning(id: string, at: string): boolean {
    return this.db.prepare("UPDATE training_jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'").run(at, id).changes > 0;
  }

  /** Move a job to a terminal status unless it already has one. */
  finish(id: string, status: 'succeeded' | 'failed' | 'cancelled', at: string, errorMessage: string | null): boolean {
    return (
      this.db
        .prepare("UPDATE training_jobs SET status = ?, finished_at = ?, error_message = ? WHERE id = ? AND status IN ('queued','running')")
        .run(status, at, errorMessage, id).changes > 0
    );
  }

  count(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM training_jobs').get() as { n: number }).n;
  }
}
