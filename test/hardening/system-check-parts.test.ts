// /v1/system-check part by part, over HTTP, with a private redis-server (never the shared one on 6379): an
// inference-only cluster (one inference worker host, no training worker) is healthy (200); Redis down answers 503
// naming the queue; Redis back, 200 again. Plus the pure rules.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { freePort, HEARTH_BIN, REPO } from '../helpers/process.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { failedParts, workersPart } from '../../src/services/system-check.js';
import { parseRequiredWorkers } from '../../src/config/config.js';

describe('system-check rules (pure)', () => {
  it('a kind that is not required never fails the check; a required one fails without a live worker', () => {
    expect(workersPart('training', 0, false)).toEqual({ ok: true, required: false, live: 0, error: null });
    expect(workersPart('training', 0, true)).toEqual({ ok: false, required: true, live: 0, error: 'no training worker has sent a heartbeat recently' });
    expect(workersPart('inference', 2, true)).toMatchObject({ ok: true, live: 2, error: null });
    const ok = { ok: true, error: null };
    expect(failedParts({ database: ok, queue: { ok: false, error: 'Redis: x' }, inference_workers: workersPart('inference', 1, true), training_workers: workersPart('training', 0, false) })).toEqual(['queue']);
  });
  it('HEARTH_REQUIRED_WORKERS: inference alone with Redis, the embedded kinds without, or as set', () => {
    expect(parseRequiredWorkers({ REDIS_URL: 'redis://h:6379' })).toEqual(['inference']);
    expect(parseRequiredWorkers({})).toEqual(['inference', 'training']);
    expect(parseRequiredWorkers({ HEARTH_WORKERS: 'inference:cpu' })).toEqual(['inference']);
    expect(parseRequiredWorkers({ REDIS_URL: 'redis://h', HEARTH_REQUIRED_WORKERS: 'inference, training' })).toEqual(['inference', 'training']);
    expect(parseRequiredWorkers({ HEARTH_REQUIRED_WORKERS: 'none' })).toEqual([]);
    expect(() => parseRequiredWorkers({ HEARTH_REQUIRED_WORKERS: 'gpu' })).toThrow(/unknown worker kind "gpu"/);
  });
});

let port: number;
let redisUrl: string;
let redis: ChildProcess | null = null;
let s: TestServer;
let worker: ChildProcess | null = null;

async function startRedis(): Promise<void> {
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await waitFor(async () => {
    const r = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => {});
    try {
      await r.connect();
      return (await r.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      r.disconnect();
    }
  }, 'the private redis-server', 10_000, 50);
}

beforeAll(async () => {
  port = await freePort();
  redisUrl = `redis://127.0.0.1:${port}`;
  await startRedis();
  s = await startServer({ env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: 'syscheck', HEARTH_HEARTBEAT_TIMEOUT: '5' }, queue: { workerEnv: {} } });
  worker = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', 'inference', '--redis', redisUrl], {
    env: { ...process.env, HEARTH_WORKER_HANDLERS: path.join(REPO, 'test/fixtures/queue-handlers.ts'), HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_QUEUE_PREFIX: 'syscheck', HEARTH_HOME: tempHome(), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'the inference worker', 30_000);
}, 60_000);

afterAll(async () => {
  if (worker?.exitCode === null) worker.kill('SIGKILL');
  await Promise.race([s?.close(), sleep(5000)]);
  if (redis) redis.kill('SIGKILL');
});

describe('/v1/system-check on a Redis cluster', () => {
  it('answers 200 for an inference-only cluster, reporting each part', async () => {
    const r = await s.call('GET', '/v1/system-check');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      api: true, database: true, failed: [],
      cpu_queue: { success: true, error: null, workers: 1 },
      gpu_queue: { success: true, error: null, workers: 0 },
      parts: {
        database: { ok: true, error: null }, queue: { ok: true, error: null },
        inference_workers: { ok: true, required: true, live: 1 }, training_workers: { ok: true, required: false, live: 0 },
      },
    });
  });

  it('answers 503 naming the queue while Redis is down, and 200 once it is back', async () => {
    const proc = redis!;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    redis = null;
    const t0 = Date.now();
    const down = await s.call('GET', '/v1/system-check');
    expect(Date.now() - t0).toBeLessThan(10_000); // bounded, never hangs on the outage
    expect(down.status).toBe(503);
    expect(down.body.failed).toContain('queue');
    expect(down.body.parts.queue).toMatchObject({ ok: false, error: expect.stringMatching(/^Redis: /) });
    expect(down.body.parts.database.ok).toBe(true);
    await startRedis();
    await waitFor(async () => (await s.call('GET', '/v1/system-check')).status === 200, 'system-check 200 after Redis is back', 30_000, 250);
  }, 60_000);
});
