// Start a real Hearth API on a random loopback port with its own HEARTH_HOME, for tests over HTTP.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, dbPath, modelsDir, type Config } from '../../src/config/config.js';
import { Store } from '../../src/store/sqlite/store.js';
import { createContext, type ContainerOptions } from '../../src/api/container.js';
import { buildApp } from '../../src/api/app.js';
import type { AppContext } from '../../src/api/context.js';
import { BaseModelCatalog } from '../../src/models/base-models.js';
import { createQueue } from '../../src/queue/create.js';
import type { QueueService } from '../../src/queue/queue-service.js';
import { trainingPolicy } from '../../src/services/training-policy.js';
import { TableStore } from '../../src/tables/table-store.js';

export interface TestServer {
  url: string;
  home: string;
  app: FastifyInstance;
  ctx: AppContext;
  store: Store;
  /** A fresh API key for `entity`. */
  key(entity?: string): string;
  /** fetch relative to the server, JSON in and out. */
  call(method: string, urlPath: string, opts?: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
}

export function tempHome(prefix = 'hearth-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A base-model entry as the importer leaves it (manifest written last); enough for model records. */
export function installManifestOnly(home: string, id: string): void {
  const dir = path.join(modelsDir(home), ...id.split('/'));
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ id, format: 'test-manifest', parameters: 1_000_000, sizeBytes: 4_000_000, importedAt: new Date().toISOString() }));
}

export interface StartOptions {
  home?: string;
  env?: Record<string, string>;
  container?: ContainerOptions;
  /** Start the queue (embedded workers, or BullMQ when env.REDIS_URL is set) with these worker env vars. */
  queue?: { workerEnv?: Record<string, string>; log?: (m: string) => void };
  /** Use this build's real training policy (as `hearth serve` does). */
  realTraining?: boolean;
}

export async function startServer(opts: StartOptions = {}): Promise<TestServer> {
  const home = opts.home ?? tempHome();
  const config: Config = { ...loadConfig({ HEARTH_HOME: home, HEARTH_WORKERS: 'none', ...opts.env }), port: 0 };
  const store = Store.open(dbPath(home));
  const catalog = new BaseModelCatalog(modelsDir(home));
  let queue: QueueService | null = null;
  if (opts.queue) queue = await createQueue(config, store, catalog, { workerEnv: opts.queue.workerEnv, log: opts.queue.log ?? (() => {}) });
  const policy = opts.realTraining ? await trainingPolicy(config, new TableStore(store.db)) : undefined;
  const ctx = createContext(config, store, { catalog, ...(queue ? { queue, dispatcher: queue } : {}), ...(policy ? { policy } : {}), ...opts.container });
  if (queue) await queue.start(ctx.trainingJobs);
  if (queue) ctx.nativeRuns.resume();
  const app = await buildApp(ctx);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  const call: TestServer['call'] = async (method, urlPath, o = {}) => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    let body: string | undefined = o.rawBody;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(address + urlPath, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  return {
    url: address,
    home,
    app,
    ctx,
    store,
    key: (entity = 'alice') => ctx.keys.create(entity).key,
    call,
    close: async () => {
      await app.close();
      await queue?.close();
      store.close();
    },
  };
}
