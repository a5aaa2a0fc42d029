// npm run bench:queue — round trip of an empty inference job (a ping) through each queue adapter:
// latency p50/p99 one at a time, and jobs/s with 64 in flight. Prints JSON.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { loadConfig, dbPath, modelsDir } from '../src/config/config.js';
import { Store } from '../src/store/sqlite/store.js';
import { BaseModelCatalog } from '../src/models/base-models.js';
import { createQueue } from '../src/queue/create.js';
import { createContext } from '../src/api/container.js';
import type { QueueService } from '../src/queue/queue-service.js';
import { machineLabel } from './machine.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.env.BENCH_N || 2000);
const IN_FLIGHT = 64;

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const round = (x: number) => Math.round(x * 1000) / 1000;
const ping = (q: QueueService) => q.gateway.submit({ op: 'ping', body: null, model: null, stream: false, queueKey: 'bench' });

async function measure(q: QueueService) {
  for (let i = 0; i < 200; i++) await ping(q); // warm-up
  const lat: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await ping(q);
    lat.push(performance.now() - t0);
  }
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next++ < N) await ping(q);
  }));
  const secs = (performance.now() - t0) / 1000;
  return { p50_ms: round(quantile(lat, 0.5)), p99_ms: round(quantile(lat, 0.99)), jobs_per_s: Math.round(N / secs) };
}

async function run(mode: 'embedded' | 'bullmq') {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-bench-'));
  const prefix = `hearth-bench-${crypto.randomBytes(3).toString('hex')}`;
  const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const env = { HEARTH_HOME: home, HEARTH_WORKERS: 'inference:cpu', HEARTH_QUEUE_PREFIX: prefix, ...(mode === 'bullmq' ? { REDIS_URL: redisUrl } : {}) };
  const config = loadConfig(env);
  const store = Store.open(dbPath(home));
  const catalog = new BaseModelCatalog(modelsDir(home));
  const queue = await createQueue(config, store, catalog, { log: () => {} });
  const ctx = createContext(config, store, { catalog, queue, dispatcher: queue });
  await queue.start(ctx.trainingJobs);
  const worker =
    mode === 'bullmq'
      ? spawn(process.execPath, [path.join(REPO, 'bin/hearth.js'), 'worker', '--kind', 'inference', '--redis', redisUrl], {
          env: { ...process.env, HEARTH_QUEUE_PREFIX: prefix, HEARTH_HOME: home }, stdio: 'ignore',
        })
      : null;
  while (queue.liveWorkers('inference').length === 0) await new Promise((r) => setTimeout(r, 50));
  const result = await measure(queue);
  worker?.kill('SIGKILL');
  await queue.close();
  store.close();
  if (mode === 'bullmq') {
    const r = new Redis(redisUrl);
    const keys = await r.keys(`${prefix}:*`);
    if (keys.length) await r.del(...keys);
    await r.quit();
  }
  return result;
}

const out = {
  bench: 'queue',
  date: new Date().toISOString(),
  machine: machineLabel(),
  jobs: N,
  in_flight_for_throughput: IN_FLIGHT,
  embedded: await run('embedded'),
  bullmq: await run('bullmq'),
};
process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
process.exit(0);
