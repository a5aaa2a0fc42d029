// hearth serve: the API process. Opens the store under HEARTH_HOME, starts the queue, listens, and on
// SIGTERM/SIGINT stops taking requests, finishes the in-flight ones, then closes the store.
import { dbPath, loadConfig } from '../../config/config.js';
import { Store } from '../../store/sqlite/store.js';
import { createContext } from '../../services/container.js';
import { buildApp } from '../../api/app.js';

export async function run(_argv: string[]): Promise<number> {
  const config = loadConfig();
  const store = Store.open(dbPath(config.home));
  const ctx = createContext(config, store);
  const swept = ctx.models.sweepOrphanCheckpointDirs();
  const app = await buildApp(ctx, {
    logger: { level: config.logLevel, redact: ['req.headers.authorization', 'req.headers.cookie'] },
  });
  if (swept) app.log.warn({ swept }, 'removed checkpoint folders left without a store row');

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    await app.close();
    store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  const address = await app.listen({ host: config.host, port: config.port });
  process.stdout.write(`Hearth listening on ${address}  (home ${config.home}, queue ${config.redisUrl ? `redis ${config.redisUrl}` : 'embedded'})\n`);
  return new Promise<number>(() => {}); // runs until a signal ends the process
}
