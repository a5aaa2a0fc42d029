// Read-only listings the console needs and the hosted contract has no endpoint for: an entity's training
// jobs (newest first) and a project's tables. Always scoped by entity; pages by keyset, never by OFFSET,
// so page N costs what page 1 costs.
import type { Db } from './database.js';
import type { JobKind, JobStatus } from '../records.js';

export interface JobListItem {
  id: string; modelId: string; modelName: string; project: string; kind: JobKind; status: JobStatus;
  createdAt: string; startedAt: string | null; finishedAt: string | null; errorMessage: string | null;
  /** Rowid: the keyset cursor (creation order, unique). */
  rowid: number;
}

export interface TableListItem { project: string; digest: string; rowCount: number; createdAt: string; rowid: number }

export class ListingsRepo {
  constructor(private readonly db: Db) {}

  /** The entity's jobs, newest first, strictly before `beforeRowid`; `limit + 1` rows to tell whether more exist. */
  jobs(entity: string, opts: { modelId?: string; beforeRowid: number | null; limit: number }): JobListItem[] {
    const where = ['j.entity = ?'];
    const args: (string | number)[] = [entity];
    if (opts.modelId) { where.push('j.model_id = ?'); args.push(opts.modelId); }
    if (opts.beforeRowid !== null) { where.push('j.rowid < ?'); args.push(opts.beforeRowid); }
    args.push(opts.limit + 1);
    return this.db.prepare(
      `SELECT j.rowid AS rowid, j.id AS id, j.model_id AS modelId, m.name AS modelName, m.project AS project, j.kind AS kind, j.status AS status,
              j.created_at AS createdAt, j.started_at AS startedAt, j.finished_at AS finishedAt, j.error_message AS errorMessage
       FROM training_jobs j JOIN models m ON m.id = j.model_id
       WHERE ${where.join(' AND ')} ORDER BY j.rowid DESC LIMIT ?`,
    ).all(...args) as JobListItem[];
  }

  /** Rowid of one of the entity's jobs (a page cursor), or null. */
  jobRowid(entity: string, jobId: string): number | null {
    const r = this.db.prepare('SELECT rowid FROM training_jobs WHERE id = ? AND entity = ?').get(jobId, entity) as { rowid: number } | undefined;
    return r?.rowid ?? null;
  }

  /** How many of the entity's jobs are in each status (all statuses present, zeros included). */
  jobCounts(entity: string): Record<JobStatus, number> {
    const counts: Record<JobStatus, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };
    const rows = this.db.prepare('SELECT status, count(*) AS n FROM training_jobs WHERE entity = ? GROUP BY status').all(entity) as { status: JobStatus; n: number }[];
    for (const r of rows) counts[r.status] = r.n;
    return counts;
  }

  /** Table versions of the entity (one project or all), newest first, strictly before `beforeRowid`. */
  tables(entity: string, opts: { project?: string; beforeRowid: number | null; limit: number }): TableListItem[] {
    const where = ['entity = ?'];
    const args: (string | number)[] = [entity];
    if (opts.project !== undefined) { where.push('project = ?'); args.push(opts.project); }
    if (opts.beforeRowid !== null) { where.push('rowid < ?'); args.push(opts.beforeRowid); }
    args.push(opts.limit + 1);
    return this.db.prepare(
      `SELECT rowid, project, digest, row_count AS rowCount, created_at AS createdAt FROM weave_tables
       WHERE ${where.join(' AND ')} ORDER BY rowid DESC LIMIT ?`,
    ).all(...args) as TableListItem[];
  }

  /** Projects of the entity that hold tables, with how many table versions each has. */
  tableProjects(entity: string): { project: string; tables: number }[] {
    return this.db.prepare('SELECT project, count(*) AS tables FROM weave_tables WHERE entity = ? GROUP BY project ORDER BY project').all(entity) as { project: string; tables: number }[];
  }
}
