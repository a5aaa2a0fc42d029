// GET /inference/{vendor}/v2/hardware?model=<name without publisher>: hardware options with token prices.
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { notFound, notImplemented } from '../errors.js';
import { HardwareParams, HardwareQuery } from '../../schemas/inference-models.js';

export function hardwareRoutes(ctx: AppContext): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', url: '/inference/:vendor/v2/hardware', operationId: 'hardware_options_inference__vendor__v2_hardware_get', summary: 'Hardware Options',
      tags: ['inference'], auth: 'bearer', params: HardwareParams, query: HardwareQuery, errors: { 404: 'Unknown model', 501: 'No pricing engine' },
      handler: ({ query }) => {
        const model = ctx.catalog.findByName(query.model) ?? ctx.catalog.get(query.model);
        if (!model) throw notFound(`Model "${query.model}" is not installed on this server`);
        throw notImplemented('Hardware pricing needs a calibrated inference worker, which this server does not have yet');
      },
    }),
  ];
}
