// Trainable models (a name over a base model) and their checkpoints, scoped to the caller's entity.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from '../store/sqlite/store.js';
import { nowIso, type CheckpointRecord, type ModelRecord } from '../store/records.js';
import { conflict, forbidden, invalid, notFound } from '../errors/domain-errors.js';
import { toPage } from './pagination.js';
import { aggregateTrajectoryMetrics } from './trajectory-metrics.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import { isHiddenModel, LEARNER_PROJECT } from './hidden-models.js';
import type { ModelCreateBody, TrajectoryGroupT } from '../protocol/training.js';

export const modelResponse = (m: ModelRecord) => ({
  id: m.id, entity: m.entity, project: m.project, name: m.name, base_model: m.baseModel, run_id: m.runId ?? m.name,
});
const checkpointResponse = (c: CheckpointRecord) => ({ id: c.id, step: c.step, metrics: c.metrics });

export class ModelsService {
  constructor(
    private readonly store: Store,
    private readonly catalog: BaseModelCatalog,
    private readonly checkpointsRoot: string,
  ) {}

  create(entity: string, body: ModelCreateBody) {
    if (body.entity && body.entity !== entity) {
      throw forbidden(`This API key belongs to entity "${entity}" and cannot create models in "${body.entity}"`);
    }
    if (isHiddenModel(body)) throw invalid(`Project "${LEARNER_PROJECT}" is reserved for the learner state of native training runs; pick another project`);
    const existing = this.store.models.findByName(entity, body.project, body.name);
    if (existing) {
      // Returning it would silently train the old base under the new one's name (ART keeps going with it).
      if (existing.baseModel !== body.base_model) {
        throw conflict(`Model "${entity}/${body.project}/${body.name}" already exists with base model "${existing.baseModel}", not "${body.base_model}"; pick another name or delete it first`);
      }
      if (body.return_existing) return modelResponse(existing);
      throw conflict(`Model "${entity}/${body.project}/${body.name}" already exists; pass return_existing=true to get it`);
    }
    if (!this.catalog.get(body.base_model)) {
      throw invalid(
        `Base model "${body.base_model}" is not installed on this server. Import it with ` +
          `"hearth models import <folder|file.gguf> --id ${body.base_model}"; installed: ${this.catalog.list().map((m) => m.id).join(', ') || 'none'}`,
      );
    }
    const record: ModelRecord = {
      id: crypto.randomUUID(), entity, project: body.project, name: body.name, baseModel: body.base_model, runId: null, createdAt: nowIso(),
    };
    this.store.models.insert(record);
    return modelResponse(record);
  }

  require(entity: string, modelId: string): ModelRecord {
    const m = this.store.models.get(entity, modelId);
    // A native run's learner is not the user's to train, delete or read through the preview API.
    if (!m || isHiddenModel(m)) throw notFound(`Model ${modelId} not found`);
    return m;
  }

  delete(entity: string, modelId: string, activeJobs: number) {
    const model = this.require(entity, modelId);
    if (activeJobs > 0) throw conflict(`Model ${modelId} has ${activeJobs} queued or running training job(s); cancel them first`);
    const checkpoints = this.store.checkpoints.all(model.id);
    this.store.models.delete(model.id); // cascades to checkpoints, jobs, events, logs
    fs.rmSync(this.modelCheckpointDir(model.id), { recursive: true, force: true });
    return { model_id: model.id, deleted_checkpoints: checkpoints.length, deleted_run: true };
  }

  listCheckpoints(entity: string, modelId: string, q: { after?: string; limit: number; order: 'asc' | 'desc' }) {
    const model = this.require(entity, modelId);
    let afterStep: number | null = null;
    if (q.after) {
      const cursor = this.store.checkpoints.get(model.id, q.after);
      // An unknown or deleted cursor ends the walk rather than restarting it.
      if (!cursor) return { object: 'list' as const, data: [], first_id: '', last_id: '', has_more: false };
      afterStep = cursor.step;
    }
    const rows = this.store.checkpoints.page(model.id, q.order, afterStep, q.limit + 1);
    return toPage(rows, q.limit, checkpointResponse);
  }

  deleteCheckpoints(entity: string, modelId: string, steps: number[]) {
    const model = this.require(entity, modelId);
    const unique = [...new Set(steps)];
    const removed: CheckpointRecord[] = [];
    const notFoundSteps: number[] = [];
    this.store.tx(() => {
      for (const step of unique) {
        const c = this.store.checkpoints.byStep(model.id, step);
        if (!c) notFoundSteps.push(step);
        else {
          this.store.checkpoints.deleteByStep(model.id, step);
          removed.push(c);
        }
      }
    });
    // Rows go first: a crash here leaves orphan files, which startup sweeps; never rows without files.
    for (const c of removed) if (c.path) fs.rmSync(c.path, { recursive: true, force: true });
    return { deleted_count: removed.length, not_found_steps: notFoundSteps };
  }

  /** Store logged trajectories and write their aggregate metrics onto the current checkpoint. */
  log(entity: string, modelId: string, split: string, groups: TrajectoryGroupT[]) {
    const model = this.require(entity, modelId);
    const metrics = aggregateTrajectoryMetrics(split, groups);
    this.store.tx(() => {
      const latest = this.store.checkpoints.latest(model.id);
      this.store.history.append(model.id, latest?.step ?? 0, split, metrics, groups);
      if (latest) this.store.checkpoints.setMetrics(latest.id, { ...latest.metrics, ...metrics });
    });
    return {};
  }

  modelCheckpointDir(modelId: string): string {
    return path.join(this.checkpointsRoot, modelId);
  }

  /** Remove checkpoint folders that no row points to (left by a crash between the row delete and the file delete). */
  sweepOrphanCheckpointDirs(): number {
    if (!fs.existsSync(this.checkpointsRoot)) return 0;
    const known = new Set(this.store.checkpoints.allPaths().map((p) => path.resolve(p)));
    // A model with a running job may get a checkpoint whose report has not been read yet (Redis mode: workers
    // carry on while the API is down), so its folder is left alone; the scheduler clears a stale step folder
    // before it hands out that step again.
    const busy = new Set(this.store.jobs.withStatus(['running']).map((j) => j.modelId));
    let removed = 0;
    for (const modelDir of fs.readdirSync(this.checkpointsRoot, { withFileTypes: true })) {
      if (!modelDir.isDirectory() || busy.has(modelDir.name)) continue;
      const full = path.join(this.checkpointsRoot, modelDir.name);
      for (const step of fs.readdirSync(full, { withFileTypes: true })) {
        const p = path.resolve(full, step.name);
        if (!known.has(p)) {
          fs.rmSync(p, { recursive: true, force: true });
          removed++;
        }
      }
    }
    return removed;
  }
}
