// GET /v1/usage: prompt and completion tokens per project and model, for the caller's entity.
// Requests are attributed to the `OpenAI-Project: <team>/<project>` header (default project "inference").
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';

const UsageEntry = z.object({
  project: z.string(), model: z.string(), requests: z.number().int(), prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int(),
});
export const UsageResponse = z.object({ object: z.literal('list'), data: z.array(UsageEntry) });

export function usageRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', url: '/v1/usage', operationId: 'usage_v1_usage_get', summary: 'Token Usage', tags: ['inference'], auth: 'bearer', errorStyle: 'openai', response: UsageResponse,
      handler: ({ auth }) => ({
        object: 'list' as const,
        data: ctx.store.usage.list(auth.entity).map((u) => ({
          project: u.project, model: u.model, requests: u.requests, prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens,
          total_tokens: u.promptTokens + u.completionTokens,
        })),
      }),
    }),
  ];
}
