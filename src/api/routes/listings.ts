// Read-only listings the hosted contracts lack but a console (or a script) needs: GET on the models and
// training-jobs collections, one model with its checkpoints, POST /table/list, and GET /v1/system.
// Same auth and entity scoping as every other route; see docs/api.md "Hearth extensions".
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { HttpError } from '../errors.js';
import { JobIdParams, ModelIdParams } from '../../protocol/training.js';
import { JobConfig, JobList, JobListQuery, ModelDetail, ModelListQuery, ModelSummaryList, SystemResponse, TableListReq, TableListRes } from '../../schemas/listings.js';
import { Listings } from '../../services/listings.js';

export function listingRoutes(ctx: AppContext): RouteDef[] {
  const listings = new Listings(ctx.store, ctx.models, ctx.catalog, ctx.workers, ctx.queue);
  return [
    defineRoute({
      method: 'GET', url: '/v1/preview/models', operationId: 'list_models_v1_preview_models_get', summary: 'List Trained Models (Hearth)', tags: ['models'],
      auth: 'bearer', query: ModelListQuery, response: ModelSummaryList,
      handler: ({ auth, query }) => listings.listModels(auth.entity, query.project),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/models/:model_id', operationId: 'get_model_v1_preview_models__model_id__get', summary: 'Get Model (Hearth)', tags: ['models'],
      auth: 'bearer', params: ModelIdParams, response: ModelDetail, errors: { 404: 'Unknown model' },
      handler: ({ auth, params }) => listings.modelDetail(auth.entity, params.model_id),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/training-jobs', operationId: 'list_training_jobs_v1_preview_training_jobs_get', summary: 'List Training Jobs (Hearth)',
      tags: ['training-jobs'], auth: 'bearer', query: JobListQuery, response: JobList, errors: { 400: 'Unknown cursor' },
      handler: ({ auth, query }) => listings.listJobs(auth.entity, query),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/training-jobs/:training_job_id/config', operationId: 'get_training_job_config_v1_preview_training_jobs__training_job_id__config_get',
      summary: 'Get Training Job Config (Hearth)', tags: ['training-jobs'], auth: 'bearer', params: JobIdParams, response: JobConfig, errors: { 404: 'Unknown job' },
      handler: ({ auth, params }) => listings.jobConfig(auth.entity, params.training_job_id),
    }),
    defineRoute({
      method: 'POST', url: '/table/list', operationId: 'table_list_table_list_post', summary: 'Table List (Hearth)', tags: ['tables'],
      auth: 'basic-or-bearer', errorStyle: 'reason', body: TableListReq, response: TableListRes, errors: { 400: 'Invalid project_id' },
      handler: ({ auth, body }) => {
        let project: string | undefined;
        if (body.project_id !== undefined) {
          const slash = body.project_id.indexOf('/');
          if (slash <= 0 || slash === body.project_id.length - 1) {
            throw new HttpError(400, `Invalid project_id '${body.project_id}': expected '<entity>/<project>'`);
          }
          // Another entity's project has no tables for this key, as /table/query answers no rows.
          if (body.project_id.slice(0, slash) !== auth.entity) return { tables: [], projects: listings.tableProjects(auth.entity), next_cursor: null };
          project = body.project_id.slice(slash + 1);
        }
        return listings.listTables(auth.entity, { project, after: body.after, limit: body.limit });
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/system', operationId: 'system_v1_system_get', summary: 'System Overview (Hearth)', tags: ['health'], auth: 'bearer',
      response: SystemResponse,
      handler: ({ auth }) => listings.system(auth.entity),
    }),
  ];
}
