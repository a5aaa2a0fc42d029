// /v1/preview/models…: create and delete trainable models, list and delete checkpoints, log trajectories;
// /v1/preview/base-models: the base models this server can train.
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import {
  CheckpointPage, CheckpointQuery, DeleteCheckpointsRequest, DeleteCheckpointsResponse, DeleteModelResponse, LogRequest,
  ModelCreate, ModelIdParams, ModelResponse,
} from '../../protocol/training.js';

export function modelRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['models'];
  return [
    defineRoute({
      // The newest W&B spec: no auth, a JSON array of model ids ("Models this deployment can train").
      method: 'GET', url: '/v1/preview/base-models', operationId: 'list_base_models_v1_preview_base_models_get', summary: 'List Base Models', tags,
      auth: 'none', response: z.array(z.string()),
      handler: () => ctx.catalog.list().map((m) => m.id),
    }),
    defineRoute({
      method: 'POST', url: '/v1/preview/models', operationId: 'create_model_v1_preview_models_post', summary: 'Create Model', tags, auth: 'bearer',
      body: ModelCreate, response: ModelResponse, errors: { 400: 'Base model not installed', 403: 'Entity mismatch', 409: 'Model exists' },
      handler: ({ auth, body }) => ctx.models.create(auth.entity, body),
    }),
    defineRoute({
      method: 'DELETE', url: '/v1/preview/models/:model_id', operationId: 'delete_model_v1_preview_models__model_id__delete', summary: 'Delete Model', tags,
      auth: 'bearer', params: ModelIdParams, response: DeleteModelResponse,
      errors: { 404: 'Unknown model', 409: 'Training jobs still active, or a native run that published only into it has an operation in flight' },
      handler: ({ auth, params }) => {
        const model = ctx.models.require(auth.entity, params.model_id);
        const activeJobs = ctx.store.jobs.activeForModel(model.id).length;
        // The native runs that published only into this model go with it (docs/art.md "Deleting a run").
        if (activeJobs === 0) ctx.nativeRuns.deleteRunsPublishingOnlyInto(model);
        return ctx.models.delete(auth.entity, model.id, activeJobs);
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/models/:model_id/checkpoints', operationId: 'list_model_checkpoints_v1_preview_models__model_id__checkpoints_get',
      summary: 'List Model Checkpoints', tags, auth: 'bearer', params: ModelIdParams, query: CheckpointQuery, response: CheckpointPage,
      errors: { 404: 'Unknown model' },
      handler: ({ auth, params, query }) => ctx.models.listCheckpoints(auth.entity, params.model_id, query),
    }),
    defineRoute({
      method: 'DELETE', url: '/v1/preview/models/:model_id/checkpoints', operationId: 'delete_model_checkpoints_v1_preview_models__model_id__checkpoints_delete',
      summary: 'Delete Model Checkpoints', tags, auth: 'bearer', params: ModelIdParams, body: DeleteCheckpointsRequest, response: DeleteCheckpointsResponse,
      errors: { 404: 'Unknown model' },
      handler: ({ auth, params, body }) => ctx.models.deleteCheckpoints(auth.entity, params.model_id, body.steps),
    }),
    defineRoute({
      method: 'POST', url: '/v1/preview/models/:model_id/log', operationId: 'log_v1_preview_models__model_id__log_post', summary: 'Log', tags,
      auth: 'bearer', params: ModelIdParams, body: LogRequest, errors: { 404: 'Unknown model' },
      handler: ({ auth, params, body }) => ctx.models.log(auth.entity, params.model_id, body.split, body.trajectory_groups),
    }),
  ];
}
