import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { HealthResponse, SystemCheckResponse } from '../../protocol/training.js';
import { systemCheck } from '../../services/system-check.js';

export function healthRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', url: '/v1/health', operationId: 'health_check_v1_health_get', summary: 'Health Check', tags: ['health'], auth: 'none',
      response: HealthResponse,
      handler: () => ({ status: 'ok' as const }),
    }),
    defineRoute({
      method: 'GET', url: '/v1/system-check', operationId: 'system_check_v1_system_check_get', summary: 'System Check', tags: ['health'], auth: 'none',
      response: SystemCheckResponse, errors: { 503: 'A check failed' },
      handler: async ({ reply }) => {
        const { ok, body } = await systemCheck(ctx.store, ctx.workers, ctx.config.requiredWorkers);
        reply.code(ok ? 200 : 503);
        return body;
      },
    }),
  ];
}
