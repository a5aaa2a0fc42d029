// hearth serve: the API process. Opens the store under HEARTH_HOME, starts the queue (embedded workers, or
// BullMQ when REDIS_URL is set), listens, and on SIGTERM/SIGINT stops taking requests, finishes the
// in-flight ones, stops the workers, then closes the store.
import { dbPath, loadConfig, modelsDir } from '../../config/config.js';
import { makeHomePrivate } from '../../config/private-home.js';
import { Store } from '../../store/sqlite/store.js';
import { createContext } from '../../api/container.js';
import { BaseModelCatalog } from '../../models/base-models.js';
import { createQueue } from '../../queue/create.js';
import { buildApp } from '../../api/app.js';
import { productionLoggerOptions } from '../../api/logger.js';
import { hearthMetrics } from '../../metrics/metrics.js';
import { trainingPolicy } from '../../services/training-policy.js';
import { TableStore } from '../../tables/table-store.js';
import { ensureDemoModel } from '../../models/demo-model.js';
import { jsonLog, logLine } from '../../domain/log-line.js';

export async function run(_argv: string[]): Promise<number> {
  const config = loadConfig();
  makeHomePrivate(config.home);
  const store = Store.open(dbPath(config.home));
  // An empty store gets the demo model, so chat completions work out of the box (its output is random).
  const demo = await ensureDemoModel(config.home);
  // Every line of this process in the request log's format (JSON lines, src/domain/log-line.ts), on stdout as pino's.
  if (demo) process.stdout.write(logLine('info', `Installed the demo model ${demo.id} (random weights; import a real model with "hearth models import")`));
  const catalog = new BaseModelCatalog(modelsDir(config.home));
  // The queue's notices (Redis lost and back, workers restarted, reports taken over) are warnings: shown at LOG_LEVEL=warn.
  const queue = await createQueue(config, store, catalog, { log: jsonLog({}, { stream: process.stdout, minLevel: config.logLevel, level: 'warn' }) });
  const ctx = createContext(config, store, { catalog, queue, dispatcher: queue, policy: await trainingPolicy(config, new TableStore(store.db)) });
  const swept = ctx.models.sweepOrphanCheckpointDirs();
  const app = await buildApp(ctx, {
    logger: productionLoggerOptions(config.logLevel),
  });
  if (swept) app.log.warn({ swept }, 'removed checkpoint folders left without a store row');
  await queue.start(ctx.trainingJobs);
  ctx.nativeRuns.resume();
  const depthTimer = setInterval(() => {
    hearthMetrics.queueDepth.set({ queue: 'inference' }, queue.gateway.inFlight());
    hearthMetrics.queueDepth.set({ queue: 'training' }, store.jobs.countWithStatus('queued'));
  }, 2000);
  depthTimer.unref();

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    await app.close();
    await queue.close();
    store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  const address = await app.listen({ host: config.host, port: config.port });
  const queueDesc = config.redisUrl ? `BullMQ at ${config.redisUrl}` : `embedded (${config.workers.map((w) => `${w.kind}:${w.device}`).join(', ') || 'no workers'})`;
  // Always written, whatever LOG_LEVEL: scripts wait for it (the address is followed by two spaces).
  // Fastify names one address; with HOST=0.0.0.0 (or ::) it answers on every interface, which worker hosts need.
  const everywhere = config.host === '0.0.0.0' || config.host === '::' ? ` and every other interface (HOST=${config.host})` : '';
  process.stdout.write(logLine('info', `Hearth listening on ${address}${everywhere}  (home ${config.home}, queue ${queueDesc})`));
  return new Promise<number>(() => {});
}
