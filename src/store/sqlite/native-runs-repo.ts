// Native training runs and their operations (`/v1/training/runs…`), as rows.
import type { Db } from './database.js';
import type { NativeOperationRecord, NativeOperationStatus, NativeRunRecord, NativeRunStatus } from '../records.js';

interface RunRow {
  id: string; entity: string; run_name: string; spec: string; status: NativeRunStatus; learner_model_id: string;
  next_sequence_id: number; projected_learner_version: number; committed_learner_version: number; created_at: string;
}

interface OpRow {
  id: string; run_id: string; request_id: string; fingerprint: string; sequence_id: number; kind: NativeOperationRecord['kind'];
  command: string; status: NativeOperationStatus; learner_parent_version: number; reserved_output_learner_version: number | null;
  admitted_at: string; execution_started_at: string | null; execution_ended_at: string | null; cancel_requested: number;
  event_cursor: number; job_id: string | null; consumed_by: string | null; result: string | null; result_released: number; error: string | null;
}

const toRun = (r: RunRow): NativeRunRecord => ({
  id: r.id, entity: r.entity, runName: r.run_name, spec: JSON.parse(r.spec), status: r.status, learnerModelId: r.learner_model_id,
  nextSequenceId: r.next_sequence_id, projectedLearnerVersion: r.projected_learner_version,
  committedLearnerVersion: r.committed_learner_version, createdAt: r.created_at,
});

const toOp = (r: OpRow): NativeOperationRecord => ({
  id: r.id, runId: r.run_id, requestId: r.request_id, fingerprint: r.fingerprint, sequenceId: r.sequence_id, kind: r.kind,
  command: JSON.parse(r.command), status: r.status, learnerParentVersion: r.learner_parent_version,
  reservedOutputLearnerVersion: r.reserved_output_learner_version, admittedAt: r.admitted_at, executionStartedAt: r.execution_started_at,
  executionEndedAt: r.execution_ended_at, cancelRequested: r.cancel_requested === 1, eventCursor: r.event_cursor, jobId: r.job_id,
  consumedBy: r.consumed_by, result: r.result === null ? null : JSON.parse(r.result), resultReleased: r.result_released === 1,
  error: r.error === null ? null : JSON.parse(r.error),
});

export class NativeRunsRepo {
  constructor(private readonly db: Db) {}

  insertRun(r: NativeRunRecord): void {
    this.db
      .prepare(
        `INSERT INTO native_runs (id, entity, run_name, spec, status, learner_model_id, next_sequence_id, projected_learner_version,
           committed_learner_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(r.id, r.entity, r.runName, JSON.stringify(r.spec), r.status, r.learnerModelId, r.nextSequenceId, r.projectedLearnerVersion,
        r.committedLearnerVersion, r.createdAt);
  }

  run(entity: string, id: string): NativeRunRecord | null {
    const r = this.db.prepare('SELECT * FROM native_runs WHERE id = ? AND entity = ?').get(id, entity) as RunRow | undefined;
    return r ? toRun(r) : null;
  }

  runById(id: string): NativeRunRecord | null {
    const r = this.db.prepare('SELECT * FROM native_runs WHERE id = ?').get(id) as RunRow | undefined;
    return r ? toRun(r) : null;
  }

  runByName(entity: string, runName: string): NativeRunRecord | null {
    const r = this.db.prepare('SELECT * FROM native_runs WHERE entity = ? AND run_name = ?').get(entity, runName) as RunRow | undefined;
    return r ? toRun(r) : null;
  }

  runsOf(entity: string): NativeRunRecord[] {
    return (this.db.prepare('SELECT * FROM native_runs WHERE entity = ? ORDER BY created_at').all(entity) as RunRow[]).map(toRun);
  }

  openRuns(): NativeRunRecord[] {
    return (this.db.prepare(`SELECT * FROM native_runs WHERE status IN ('open', 'closing')`).all() as RunRow[]).map(toRun);
  }

  updateRun(id: string, fields: Partial<Pick<NativeRunRecord, 'status' | 'nextSequenceId' | 'projectedLearnerVersion' | 'committedLearnerVersion'>>): void {
    const cols: Record<string, string> = {
      status: 'status', nextSequenceId: 'next_sequence_id', projectedLearnerVersion: 'projected_learner_version',
      committedLearnerVersion: 'committed_learner_version',
    };
    const keys = Object.keys(fields) as (keyof typeof fields)[];
    if (keys.length === 0) return;
    this.db.prepare(`UPDATE native_runs SET ${keys.map((k) => `${cols[k]} = ?`).join(', ')} WHERE id = ?`).run(...keys.map((k) => fields[k]), id);
  }

  insertOp(o: NativeOperationRecord): void {
    this.db
      .prepare(
        `INSERT INTO native_operations (id, run_id, request_id, fingerprint, sequence_id, kind, command, status, learner_parent_version,
           reserved_output_learner_version, admitted_at, execution_started_at, execution_ended_at, cancel_requested, event_cursor, job_id,
           consumed_by, result, result_released, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(o.id, o.runId, o.requestId, o.fingerprint, o.sequenceId, o.kind, JSON.stringify(o.command), o.status, o.learnerParentVersion,
        o.reservedOutputLearnerVersion, o.admittedAt, o.executionStartedAt, o.executionEndedAt, o.cancelRequested ? 1 : 0, o.eventCursor,
        o.jobId, o.consumedBy, o.result === null ? null : JSON.stringify(o.result), o.resultReleased ? 1 : 0,
        o.error === null ? null : JSON.stringify(o.error));
  }

  op(runId: string, id: string): NativeOperationRecord | null {
    const r = this.db.prepare('SELECT * FROM native_operations WHERE id = ? AND run_id = ?').get(id, runId) as OpRow | undefined;
    return r ? toOp(r) : null;
  }

  opByRequest(runId: string, requestId: string): NativeOperationRecord | null {
    const r = this.db.prepare('SELECT * FROM native_operations WHERE run_id = ? AND request_id = ?').get(runId, requestId) as OpRow | undefined;
    return r ? toOp(r) : null;
  }

  opByJob(jobId: string): NativeOperationRecord | null {
    const r = this.db.prepare('SELECT * FROM native_operations WHERE job_id = ?').get(jobId) as OpRow | undefined;
    return r ? toOp(r) : null;
  }

  /** The run's operations in sequence order. */
  ops(runId: string): NativeOperationRecord[] {
    return (this.db.prepare('SELECT * FROM native_operations WHERE run_id = ? ORDER BY sequence_id').all(runId) as OpRow[]).map(toOp);
  }

  updateOp(
    id: string,
    fields: Partial<Pick<NativeOperationRecord, 'status' | 'executionStartedAt' | 'executionEndedAt' | 'cancelRequested' | 'eventCursor' | 'jobId' | 'consumedBy' | 'result' | 'resultReleased' | 'error'>>,
  ): void {
    const cols: Record<string, [string, (v: unknown) => unknown]> = {
      status: ['status', (v) => v], executionStartedAt: ['execution_started_at', (v) => v], executionEndedAt: ['execution_ended_at', (v) => v],
      cancelRequested: ['cancel_requested', (v) => (v ? 1 : 0)], eventCursor: ['event_cursor', (v) => v], jobId: ['job_id', (v) => v],
      consumedBy: ['consumed_by', (v) => v], result: ['result', (v) => (v === null ? null : JSON.stringify(v))],
      resultReleased: ['result_released', (v) => (v ? 1 : 0)], error: ['error', (v) => (v === null ? null : JSON.stringify(v))],
    };
    const keys = Object.keys(fields) as (keyof typeof fields)[];
    if (keys.length === 0) return;
    this.db
      .prepare(`UPDATE native_operations SET ${keys.map((k) => `${cols[k][0]} = ?`).join(', ')} WHERE id = ?`)
      .run(...keys.map((k) => cols[k][1](fields[k])), id);
  }
}
