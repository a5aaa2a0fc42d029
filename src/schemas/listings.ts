// Shapes of Hearth's read-only listings (models, jobs, tables, system); extensions to the hosted
// contracts, documented in docs/api.md. Each is scoped to the API key's entity.
import { z } from 'zod';
import { PageQuery } from '../protocol/common.js';
import { TrainingJobStatus } from '../protocol/training.js';

export const ModelListQuery = z.object({ project: z.string().min(1).max(128).optional() });

const ModelSummaryFields = {
  id: z.string(), entity: z.string(), project: z.string(), name: z.string(), base_model: z.string(), created_at: z.string(),
  inference_name: z.string(), latest_step: z.number().int().nullable(), active_jobs: z.number().int(),
};
export const ModelSummary = z.object(ModelSummaryFields).meta({ id: 'ModelSummary' });
export const ModelSummaryList = z.object({ object: z.literal('list'), data: z.array(ModelSummary) });

export const CheckpointDetail = z.object({
  id: z.string(), step: z.number().int(), created_at: z.string(), metrics: z.record(z.string(), z.number()),
  size_bytes: z.number().int().nullable(), inference_name: z.string(),
}).meta({ id: 'CheckpointDetail' });
export const ModelDetail = z.object({ ...ModelSummaryFields, checkpoints: z.array(CheckpointDetail) }).meta({ id: 'ModelDetail' });

export const JobListQuery = PageQuery.extend({ model_id: z.string().max(128).optional() });
export const JobListItem = z.object({
  id: z.string(), kind: z.enum(['rl', 'sft']), status: TrainingJobStatus, model_id: z.string(), model_name: z.string(), project: z.string(),
  created_at: z.string(), started_at: z.string().nullable(), finished_at: z.string().nullable(), error_message: z.string().nullable(),
}).meta({ id: 'TrainingJobListItem' });
export const JobList = z.object({ object: z.literal('list'), data: z.array(JobListItem), has_more: z.boolean(), last_id: z.string().nullable() });

export const TableListReq = z.object({
  /** `entity/project`; left out: every project of the key's entity. */
  project_id: z.string().max(512).optional(),
  /** `next_cursor` of the previous page. */
  after: z.number().int().min(0).optional(),
  limit: z.number().int().min(1).max(1000).default(100),
}).meta({ id: 'TableListReq' });
export const TableListRes = z.object({
  tables: z.array(z.object({ project_id: z.string(), digest: z.string(), row_count: z.number().int(), created_at: z.string() })),
  projects: z.array(z.object({ project: z.string(), tables: z.number().int() })),
  next_cursor: z.number().int().nullable(),
}).meta({ id: 'TableListRes' });

const JobCounts = z.object({ queued: z.number().int(), running: z.number().int(), succeeded: z.number().int(), failed: z.number().int(), cancelled: z.number().int() });
export const JobConfig = z.object({
  id: z.string(), kind: z.enum(['rl', 'sft']), model_id: z.string(), request: z.record(z.string(), z.unknown()), trajectory_groups: z.number().int().nullable(),
}).meta({ id: 'TrainingJobConfig' });

export const SystemResponse = z.object({
  /** The entity of the API key that asked (what the console signs in as). */
  entity: z.string(),
  workers: z.array(z.object({
    id: z.string(), kind: z.enum(['inference', 'training']), device: z.string(), host: z.string(), pid: z.number().int(), load: z.number(),
    tasks: z.number().int(), last_seen_ms_ago: z.number(), devices: z.unknown(),
    /** Models the worker announced it is loading (its main thread is blocked; its pulse thread beats meanwhile: worker/pulse.ts). */
    loading: z.array(z.string()),
  })),
  queues: z.object({ inference_in_flight: z.number().int(), training_queued: z.number().int(), training_running: z.number().int() }),
  base_models: z.array(z.object({
    id: z.string(), parameters: z.number().nullable(), size_bytes: z.number().nullable(), format: z.string().nullable(),
    /** The type most parameters are stored in (Q4_K, F16, F32, …). */
    quantization: z.string().nullable(),
    architecture: z.string().nullable(),
    context_length: z.number().int().nullable(),
    /** Live inference workers that hold it loaded, and those loading it now; empty: it loads on its first request. */
    loaded_on: z.array(z.object({ worker_id: z.string(), device: z.string(), host: z.string() })),
    loading_on: z.array(z.object({ worker_id: z.string(), device: z.string(), host: z.string() })),
  })),
  your_jobs: JobCounts,
}).meta({ id: 'SystemResponse' });

