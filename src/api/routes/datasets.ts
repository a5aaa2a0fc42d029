// POST /v1/preview/datasets?project=&name= with a JSONL body (Content-Type application/x-ndjson): stores an SFT
// dataset and answers the wandb-artifact:/// URL an SFT job names. Hearth's stand-in for W&B Artifacts.
// DELETE /v1/preview/datasets?project=&name=[&version=] removes one version or all of them (frees storage quota).
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';

const Segment = z.string().min(1).max(128).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "letters, digits, '_', '.', '-'");
export const DatasetQuery = z.object({ project: Segment, name: Segment });
export const DatasetResponse = z.object({ url: z.string(), version: z.number().int(), num_rows: z.number().int() });
export const DatasetDeleteQuery = DatasetQuery.extend({ version: z.string().regex(/^(v?\d+|latest)$/, "'v3', '3' or 'latest'").optional() });
export const DatasetDeleteResponse = z.object({ deleted_versions: z.array(z.number().int()), freed_bytes: z.number().int() });

export function datasetRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', url: '/v1/preview/datasets', operationId: 'upload_dataset_v1_preview_datasets_post', summary: 'Upload SFT Dataset (Hearth)',
      tags: ['datasets'], auth: 'bearer', query: DatasetQuery, body: z.string().min(1), response: DatasetResponse,
      bodyLimit: ctx.config.trainingBodyLimit, bodyLimitSetting: 'HEARTH_TRAINING_BODY_LIMIT',
      handler: ({ auth, query, body }) => {
        const saved = ctx.datasets.save(auth.entity, query.project, query.name, body);
        return { url: saved.url, version: saved.version, num_rows: saved.rows };
      },
    }),
    defineRoute({
      method: 'DELETE', url: '/v1/preview/datasets', operationId: 'delete_dataset_v1_preview_datasets_delete', summary: 'Delete SFT Dataset (Hearth)',
      tags: ['datasets'], auth: 'bearer', query: DatasetDeleteQuery, response: DatasetDeleteResponse,
      errors: { 404: 'No such dataset or version', 409: 'A queued or running training job reads it' },
      handler: ({ auth, query }) => {
        const gone = ctx.datasets.delete(auth.entity, query.project, query.name, query.version);
        return { deleted_versions: gone.versions, freed_bytes: gone.bytes };
      },
    }),
  ];
}
