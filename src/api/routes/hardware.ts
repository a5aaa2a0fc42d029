// GET /inference/{vendor}/v2/hardware?model=<name without publisher>: hardware options with token prices,
// one per device configuration that can serve the model; `vendor` filters (nvidia, amd, cpu).
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { notFound } from '../../errors/domain-errors.js';
import { HardwareParams, HardwareQuery } from '../../schemas/inference-models.js';
import { HardwareResponse } from '../../protocol/hardware.js';

export function hardwareRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', url: '/inference/:vendor/v2/hardware', operationId: 'hardware_options_inference__vendor__v2_hardware_get', summary: 'Hardware Options',
      tags: ['inference'], auth: 'bearer', errorStyle: 'openai', params: HardwareParams, query: HardwareQuery, response: HardwareResponse, errors: { 404: 'Unknown model' },
      handler: async ({ params, query }) => {
        const model = ctx.catalog.findByName(query.model) ?? ctx.catalog.get(query.model);
        if (!model) throw notFound(`Model "${query.model}" is not installed on this server`, { code: 'model_not_found', param: 'model' });
        return ctx.hardware.options(model, params.vendor.toLowerCase());
      },
    }),
  ];
}
