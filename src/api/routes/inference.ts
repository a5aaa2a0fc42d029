// OpenAI-compatible inference: chat completions (both paths), completions, and the model list.
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { notImplemented } from '../errors.js';
import { ChatCompletionBody, CompletionBody, ModelList } from '../../schemas/inference-models.js';

export function inferenceRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['inference'];
  return [
    defineRoute({
      method: 'POST', url: ['/v1/chat/completions', '/v1/chat/completions/'], operationId: 'create_chat_completion_v1_chat_completions_post',
      summary: 'Create Chat Completion', tags, auth: 'bearer', body: ChatCompletionBody, errors: { 400: 'Bad parameters', 404: 'Unknown model', 501: 'No engine' },
      handler: () => {
        throw notImplemented('Chat completions are not available on this server yet: no inference engine is configured');
      },
    }),
    defineRoute({
      method: 'POST', url: '/v1/completions', operationId: 'create_completion_v1_completions_post', summary: 'Create Completion', tags, auth: 'bearer',
      body: CompletionBody, errors: { 400: 'Bad parameters', 404: 'Unknown model', 501: 'No engine' },
      handler: () => {
        throw notImplemented('Completions are not available on this server yet: no inference engine is configured');
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/models', operationId: 'list_models_v1_models_get', summary: 'List Models', tags, auth: 'bearer', response: ModelList,
      handler: ({ auth }) => {
        const base = ctx.catalog.list().map((m) => ({ id: m.id, object: 'model' as const, created: m.createdAt, owned_by: 'system', root: m.id }));
        const trained = ctx.store.models.listByEntity(auth.entity).map((m) => ({
          id: `wandb-artifact:///${m.entity}/${m.project}/${m.name}`,
          object: 'model' as const,
          created: Math.floor(Date.parse(m.createdAt) / 1000),
          owned_by: m.entity,
          root: m.baseModel,
        }));
        return { object: 'list' as const, data: [...base, ...trained] };
      },
    }),
  ];
}
