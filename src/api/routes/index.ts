// Every route group of the service. A new resource = a new file here + one line below.
import type { RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { healthRoutes } from './health.js';
import { modelRoutes } from './models.js';
import { trainingJobRoutes } from './training-jobs.js';
import { nativeTrainingRoutes } from './native-training.js';
import { inferenceRoutes } from './inference.js';
import { embeddingRoutes } from './embeddings.js';
import { anthropicMessageRoutes } from './anthropic-messages.js';
import { responsesRoutes } from './responses.js';
import { hardwareRoutes } from './hardware.js';
import { tableRoutes } from './tables.js';
import { datasetRoutes } from './datasets.js';
import { usageRoutes } from './usage.js';
import { listingRoutes } from './listings.js';
import { weaveObjectRoutes } from './weave-objects.js';
import { weaveServiceRoutes } from './weave-service.js';

export function allRoutes(ctx: AppContext): RouteDef[] {
  return [
    ...healthRoutes(ctx),
    ...modelRoutes(ctx),
    ...trainingJobRoutes(ctx),
    ...nativeTrainingRoutes(ctx),
    ...inferenceRoutes(ctx),
    ...embeddingRoutes(ctx),
    ...anthropicMessageRoutes(ctx),
    ...responsesRoutes(ctx),
    ...hardwareRoutes(ctx),
    ...tableRoutes(ctx),
    ...datasetRoutes(ctx),
    ...usageRoutes(ctx),
    ...listingRoutes(ctx),
    ...weaveObjectRoutes(ctx),
    ...weaveServiceRoutes(ctx),
  ];
}
