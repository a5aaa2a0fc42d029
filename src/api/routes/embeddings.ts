// POST /v1/embeddings (OpenAI's Embeddings API) from the served models: validated here, run on an inference worker
// next to the chat traffic of the same model (worker/inference/embeddings.ts pools and normalizes), booked like chat.
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { EmbeddingRequest, EmbeddingResponse } from '../../protocol/openai-embeddings.js';
import { runInference } from './inference.js';

export function embeddingRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', url: '/v1/embeddings', operationId: 'create_embedding_v1_embeddings_post', summary: 'Create Embeddings', tags: ['inference'],
      auth: 'bearer', errorStyle: 'openai', body: EmbeddingRequest, response: EmbeddingResponse,
      errors: { 400: 'Bad parameters, or a model that cannot embed', 404: 'Unknown model', 429: 'Too many requests queued', 503: 'No worker available' },
      // Never streamed (an embeddings body has no `stream`): the exchange answers with the whole response.
      handler: ({ auth, body, request, reply }) => runInference(ctx, 'embedding', { ...body, stream: false }, auth, request, reply),
    }),
  ];
}
