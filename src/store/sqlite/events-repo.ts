import type { Db } from './database.js';
import type { TrainingEventRecord, TrainingEventType } from '../records.js';

interface Row { seq: number; id: string; job_id: string; type: TrainingEventType; data: string; created_at: string }

const toRecord = (r: Row): TrainingEventRecord => ({
  seq: r.seq, id: r.id, jobId: r.job_id, type: r.type, data: JSON.parse(r.data) as Record<string, unknown>, createdAt: r.created_at,
});

export class EventsRepo {
  constructor(private readonly db: Db) {}

  append(e: { id: string; jobId: string; type: TrainingEventType; data: Record<string, unknown>; createdAt: string }): void {
    this.db.prepare('INSERT INTO training_job_events (id, job_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)').run(e.id, e.jobId, e.type, JSON.stringify(e.data), e.createdAt);
  }

  seqOf(jobId: string, id: string): number | null {
    const r = this.db.prepare('SELECT seq FROM training_job_events WHERE job_id = ? AND id = ?').get(jobId, id) as { seq: number } | undefined;
    return r ? r.seq : null;
  }

  /** Events of a job in the order they were stored, strictly after `afterSeq`. */
  page(jobId: string, afterSeq: number | null, limit: number): TrainingEventRecord[] {
    return (
      this.db.prepare('SELECT * FROM training_job_events WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?').all(jobId, afterSeq ?? -1, limit) as Row[]
    ).map(toRecord);
  }

  all(jobId: string): TrainingEventRecord[] {
    return (this.db.prepare('SELECT * FROM training_job_events WHERE job_id = ? ORDER BY seq').all(jobId) as Row[]).map(toRecord);
  }

  count(jobId: string): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM training_job_events WHERE job_id = ?').get(jobId) as { n: number }).n;
  }

  hasTerminal(jobId: string): boolean {
    return !!this.db.prepare("SELECT 1 FROM training_job_events WHERE job_id = ? AND type IN ('training_ended','training_failed') LIMIT 1").get(jobId);
  }
}
