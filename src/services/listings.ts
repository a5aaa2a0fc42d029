// Read models for the console (and any client): an entity's trained models with their checkpoints, its
// training jobs, its tables, and what the installation runs (workers, queues, base models). Nothing here
// writes; everything is scoped to the caller's entity except the installation-wide counts in `system`.
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/sqlite/store.js';
import type { ModelRecord } from '../store/records.js';
import { ListingsRepo } from '../store/sqlite/listings-repo.js';
import type { ModelsService } from './models.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import type { WorkerDirectory, WorkerInfo } from '../queue/port.js';
import type { QueueService } from '../queue/queue-service.js';
import { invalid, notFound } from '../errors/domain-errors.js';
import { weightType } from '../models/model-store.js';
import { isHiddenModel } from './hidden-models.js';

/** The name clients pass as `model` to serve a trained model (latest checkpoint, or one step). */
export function inferenceName(m: Pick<ModelRecord, 'entity' | 'project' | 'name'>, step?: number): string {
  return `wandb-artifact:///${m.entity}/${m.project}/${m.name}${step === undefined ? '' : `:step${step}`}`;
}

/** Bytes under a file or folder (0 when it is gone). */
export function sizeOnDisk(target: string): number {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(target);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const entry of fs.readdirSync(target)) total += sizeOnDisk(path.join(target, entry));
  return total;
}

/** A keyset page: `limit + 1` rows fetched, the extra one only says more exist; the cursor is the last id. */
function page<R, T extends { id: string }>(rows: R[], limit: number, map: (r: R) => T) {
  const data = rows.slice(0, limit).map(map);
  return { object: 'list' as const, data, has_more: rows.length > limit, last_id: data[data.length - 1]?.id ?? null };
}

export class Listings {
  private readonly repo: ListingsRepo;

  constructor(
    private readonly store: Store,
    private readonly models: ModelsService,
    private readonly catalog: BaseModelCatalog,
    private readonly workers: WorkerDirectory | null,
    private readonly queue: QueueService | null,
  ) {
    this.repo = new ListingsRepo(store.db);
  }

  private modelSummary(m: ModelRecord) {
    const latest = this.store.checkpoints.latest(m.id);
    return {
      id: m.id, entity: m.entity, project: m.project, name: m.name, base_model: m.baseModel, created_at: m.createdAt,
      inference_name: inferenceName(m), latest_step: latest?.step ?? null, active_jobs: this.store.jobs.activeForModel(m.id).length,
    };
  }

  listModels(entity: string, project?: string) {
    const models = this.store.models.listByEntity(entity).filter((m) => !isHiddenModel(m) && (project === undefined || m.project === project));
    return { object: 'list' as const, data: models.map((m) => this.modelSummary(m)) };
  }

  modelDetail(entity: string, modelId: string) {
    const model = this.models.require(entity, modelId);
    const checkpoints = this.store.checkpoints.all(model.id).map((c) => ({
      id: c.id, step: c.step, created_at: c.createdAt, metrics: c.metrics,
      size_bytes: c.path ? sizeOnDisk(c.path) : null, inference_name: inferenceName(model, c.step),
    }));
    return { ...this.modelSummary(model), checkpoints };
  }

  listJobs(entity: string, q: { model_id?: string; after?: string; limit: number }) {
    let beforeRowid: number | null = null;
    if (q.after) {
      beforeRowid = this.repo.jobRowid(entity, q.after);
      if (beforeRowid === null) throw invalid(`Unknown cursor "${q.after}": pass the last_id of the previous page`);
    }
    const rows = this.repo.jobs(entity, { modelId: q.model_id, beforeRowid, limit: q.limit });
    return page(rows, q.limit, (j) => ({
      id: j.id, kind: j.kind, status: j.status, model_id: j.modelId, model_name: j.modelName, project: j.project,
      created_at: j.createdAt, started_at: j.startedAt, finished_at: j.finishedAt, error_message: j.errorMessage,
    }));
  }

  /**
   * What a job was created with, for reading: the request body less its bulk (RL trajectory groups are
   * replaced by their count) and less server-side paths.
   */
  jobConfig(entity: string, jobId: string) {
    const job = this.store.jobs.get(entity, jobId);
    if (!job) throw notFound(`Training job ${jobId} not found`);
    const { trajectory_groups: groups, token_sequences: _tokens, resolved_data_path: _path, ...request } = (job.payload ?? {}) as Record<string, unknown>;
    return { id: job.id, kind: job.kind, model_id: job.modelId, request, trajectory_groups: Array.isArray(groups) ? groups.length : null };
  }

  /** Table versions newest first; `after` is the previous page's `next_cursor` (digests alone repeat across projects). */
  listTables(entity: string, q: { project?: string; after?: number; limit: number }) {
    const rows = this.repo.tables(entity, { project: q.project, beforeRowid: q.after ?? null, limit: q.limit });
    const data = rows.slice(0, q.limit).map((t) => ({ project_id: `${entity}/${t.project}`, digest: t.digest, row_count: t.rowCount, created_at: t.createdAt }));
    const last = rows.slice(0, q.limit).at(-1);
    return { tables: data, projects: this.repo.tableProjects(entity), next_cursor: rows.length > q.limit && last ? last.rowid : null };
  }

  tableProjects(entity: string) {
    return this.repo.tableProjects(entity);
  }

  /** Workers, queue depths and base models of the installation, plus the caller's own queued/running jobs. */
  system(entity: string) {
    const now = Date.now();
    const live = this.workers?.liveWorkers() ?? [];
    const workers = live.map((w) => ({
      id: w.id, kind: w.kind, device: w.device, host: w.host, pid: w.pid, load: w.load, tasks: w.tasks.length,
      last_seen_ms_ago: Math.max(0, now - w.lastSeenMs), devices: w.devices ?? null, loading: w.loading?.filter((l) => l.step === undefined).map((l) => l.model) ?? [],
    }));
    return {
      entity,
      workers,
      queues: {
        inference_in_flight: this.queue?.gateway.inFlight() ?? 0,
        training_queued: this.store.jobs.countWithStatus('queued'),
        training_running: this.store.jobs.countWithStatus('running'),
      },
      base_models: this.catalog.list().map((m) => baseModelRow(m.id, m.manifest, live)),
      your_jobs: this.repo.jobCounts(entity),
    };
  }
}

/** One base model as the console's Models page lists it: the manifest's facts, and where it is loaded now. */
export function baseModelRow(id: string, manifest: Record<string, unknown>, workers: readonly WorkerInfo[]) {
  const config = (manifest.config ?? {}) as { maxPositionEmbeddings?: unknown; architecture?: unknown };
  const place = (w: WorkerInfo) => ({ worker_id: w.id, device: w.device, host: w.host });
  const inference = workers.filter((w) => w.kind === 'inference');
  return {
    id,
    parameters: typeof manifest.parameters === 'number' ? manifest.parameters : null,
    size_bytes: typeof manifest.sizeBytes === 'number' ? manifest.sizeBytes : null,
    format: typeof manifest.format === 'string' ? manifest.format : null,
    quantization: typeof manifest.quantization === 'string' ? manifest.quantization
      : typeof manifest.sizeBytes === 'number' && typeof manifest.parameters === 'number' ? weightType({ sizeBytes: manifest.sizeBytes, parameters: manifest.parameters }) : null,
    architecture: typeof manifest.architecture === 'string' ? manifest.architecture : typeof config.architecture === 'string' ? config.architecture : null,
    context_length: typeof config.maxPositionEmbeddings === 'number' ? config.maxPositionEmbeddings : null,
    loaded_on: inference.filter((w) => w.stats?.loadedModels?.includes(id)).map(place),
    loading_on: inference.filter((w) => w.loading?.some((l) => l.model === id && l.step === undefined)).map(place),
  };
}
