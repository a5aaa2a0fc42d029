// Redis restarted under the BullMQ queue. A private redis-server (never the shared one on 6379), without
// persistence, so the restart loses every key: the API must reconnect, hear its workers again, and see every
// training job through (re-queued or failed with a message); inference requests end one way or the other.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';
import fs from 'node:fs';
import { freePort, HEARTH_BIN, REPO, startServe } from '../helpers/process.js';
import { sleep, waitFor } from '../helpers/wait.js';
import type { TrainingPolicy } from '../../src/services/training-jobs.js';
import { reportsStream } from '../../src/protocol/redis-keys.js';

const HANDLERS = path.join(REPO, 'test/fixtures/queue-handlers.ts');
const BASE = 'test-publisher/tiny-base';
const permissive: TrainingPolicy = { unsupportedRlKeys: () => [], unsupportedSftKeys: () => [],
      rlSettingsProblem: () => null, resolveSftData: async () => ({ error: 'not in this test' }) };
const rlBody = (modelId: string, plan: Record<string, unknown>) => ({ model_id: modelId, trajectory_groups: [{ trajectories: [{ messages_and_choices: [], reward: 1 }], metadata: plan }] });

let port: number;
let redisUrl: string;
let redis: ChildProcess | null = null;
let s: TestServer;
let key: string;
const workers: ChildProcess[] = [];

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

async function stopRedis(): Promise<void> {
  const proc = redis!;
  const exited = new Promise((r) => proc.once('exit', r));
  const r = new Redis(redisUrl, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  await r.call('SHUTDOWN', 'NOSAVE').catch(() => {}); // the connection drops as the server exits
  r.disconnect();
  await Promise.race([exited, sleep(5000).then(() => proc.kill('SIGKILL'))]);
  redis = null;
}

function spawnWorker(kind: 'inference' | 'training', prefix = 'faults'): void {
  workers.push(spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', kind, '--redis', redisUrl], {
    env: { ...process.env, HEARTH_WORKER_HANDLERS: HANDLERS, HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_QUEUE_PREFIX: prefix, HEARTH_HOME: s.home, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'ignore'],
  }));
}

beforeAll(async () => {
  port = await freePort();
  redisUrl = `redis://127.0.0.1:${port}`;
  await startRedis();
  const home = tempHome();
  installManifestOnly(home, BASE);
  s = await startServer({
    home, env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: 'faults', HEARTH_HEARTBEAT_TIMEOUT: '5', HEARTH_QUEUE_TIMEOUT: '10' },
    queue: { workerEnv: {} }, container: { policy: permissive },
  });
  key = s.key('alice');
  spawnWorker('training');
  spawnWorker('inference');
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0 && s.ctx.queue!.liveWorkers('inference').length > 0, 'both workers', 30_000);
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await Promise.race([s?.close(), sleep(5000)]);
  if (redis) redis.kill('SIGKILL');
});

const events = async (jobId: string) => (await s.call('GET', `/v1/preview/training-jobs/${jobId}/events?limit=100`, { key })).body.data as { type: string; data: Record<string, unknown> }[];
const terminal = (jobId: string, timeoutMs: number) =>
  waitFor(async () => {
    const e = await events(jobId);
    return e.find((x) => x.type === 'training_ended' || x.type === 'training_failed') ?? null;
  }, `a terminal event of ${jobId}`, timeoutMs, 100);

describe('Redis restart (data lost) under the BullMQ queue', () => {
  it('reconnects, hears the workers again, and sees every job through (the lost one re-queued)', async () => {
    const model = async (name: string) => (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: BASE } })).body.id as string;
    const [a, b, c] = [await model('a'), await model('b'), await model('c')];
    const create = async (modelId: string, plan: Record<string, unknown>) => {
      const r = await s.call('POST', '/v1/preview/training-jobs', { key, body: rlBody(modelId, plan) });
      expect(r.status).toBe(200);
      return r.body.id as string;
    };
    // The first job runs to step 9 and is held there (a gate file) until Redis is down: the rest of its steps
    // and its end are then reported while Redis is away, so its worker must hold those reports.
    const gate = path.join(s.home, 'hold-running-job');
    fs.writeFileSync(gate, '');
    const running = await create(a, { steps: 40, stepMs: 10, holdAtStep: 10, gate });
    await waitFor(async () => (await events(running)).some((e) => e.type === 'gradient_step' && e.data.step === 9), 'the first job to reach step 9', 20_000);
    const waiting = await create(b, { steps: 3 }); // in Redis behind it (one training worker): lost with the data
    const later = await create(a, { steps: 3 }); // in SQLite until the first job of its model ends
    const queue = s.ctx.queue!;
    const started = new Set<number>();
    const inference = Array.from({ length: 3 }, (_, i) =>
      queue.gateway.submit({ op: 'chat', body: { tokens: Array.from({ length: 30 }, (_, t) => `t${t}`), tokenMs: 100 }, model: null, stream: true, queueKey: 'm', onChunk: () => started.add(i) })
        .then(() => 'done', (e: { kind?: string }) => `error ${e.kind}`),
    );
    await waitFor(() => started.size === 3, 'the three inference requests to stream', 20_000, 10);

    const downAt = Date.now();
    await stopRedis();
    // While Redis is down: the system check says so, and a new job is still accepted (it is stored; the
    // scheduler hands it over once Redis is back).
    const t0 = Date.now();
    const check = await s.call('GET', '/v1/system-check');
    expect(check.status).toBe(503);
    expect(check.body.gpu_queue.error).toMatch(/Redis/);
    const t1 = Date.now();
    const duringOutage = await create(c, { steps: 2 });
    console.log(`[faults] redis down: system check answered 503 in ${t1 - t0} ms, job accepted in ${Date.now() - t1} ms`);
    // Let the first job finish while Redis is down: its checkpoint folder appears when its last step is done.
    fs.rmSync(gate);
    await waitFor(() => fs.existsSync(path.join(s.ctx.models.modelCheckpointDir(a), 'step-1', 'adapter_config.json')), 'the held job to finish during the outage', 20_000, 20);
    await startRedis();
    const upAt = Date.now();

    // The API hears heartbeats again (sent after the restart), and the system check passes.
    await waitFor(() => ['training', 'inference'].every((k) => queue.liveWorkers(k as 'training').some((w) => w.lastSeenMs > upAt)), 'heartbeats through the new Redis', 20_000);
    await waitFor(async () => (await s.call('GET', '/v1/system-check')).status === 200, 'the system check to pass again', 20_000, 100);
    console.log(`[faults] redis restart: system check passes ${Date.now() - downAt} ms after the shutdown`);

    // Every job ends successfully: the running one from its held reports, the one Redis lost re-queued, the
    // one waiting for its model and the one created during the outage handed over after the restart.
    for (const id of [running, waiting, later, duringOutage]) {
      const end = await terminal(id, 45_000);
      expect(end, `job ${id}`).toMatchObject({ type: 'training_ended' });
      expect((await s.call('GET', `/v1/preview/training-jobs/${id}`, { key })).body.status).toBe('succeeded');
    }
    // The running job's reports were held by its worker while Redis was down, and read after the restart:
    // all of them, in order.
    const ranThrough = await events(running);
    expect(ranThrough.filter((e) => e.type === 'gradient_step').map((e) => e.data.step)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));

    // Inference requests in flight end one way or the other: finished, or failed with a server error.
    const outcomes = await Promise.all(inference);
    for (const o of outcomes) expect(o).toMatch(/^(done|error 50\d)$/);
    console.log(`[faults] redis restart: inference ${JSON.stringify(outcomes)}`);

    // New work flows end to end.
    const fresh = await create(b, { steps: 2 });
    expect((await terminal(fresh, 20_000)).type).toBe('training_ended');
    const pong = (await queue.gateway.submit({ op: 'ping', body: null, model: null, stream: false, queueKey: 'ping' })) as { pong: boolean };
    expect(pong.pong).toBe(true);
  }, 120_000);

  it('fails requests held by a killed `hearth worker` within the heartbeat timeout, and a new worker serves', async () => {
    const queue = s.ctx.queue!;
    const victim = workers.find((w) => w.spawnargs.includes('inference') && w.exitCode === null && w.signalCode === null)!;
    const slow = () => queue.gateway.submit({ op: 'chat', body: { tokens: Array.from({ length: 100 }, (_, i) => `t${i}`), tokenMs: 100 }, model: null, stream: true, queueKey: 'k', onChunk: () => {} });
    let started = 0;
    const inflight = Array.from({ length: 3 }, () => {
      // The queue fails them with a domain error of kind `unavailable` (the API answers 503).
      const p = slow().then(() => 'done', (e: { kind?: string; message: string }) => `${e.kind} ${e.message}`);
      return p;
    });
    await waitFor(() => (started = queue.liveWorkers('inference')[0]?.load ?? 0) === 3, 'three requests on the worker', 10_000);
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    // Detection rides on the heartbeat timeout (5 s); how long it takes is logged, not bet on.
    const outcomes = await Promise.all(inflight);
    console.log(`[faults] bullmq inference worker kill: ${JSON.stringify(outcomes)} after ${Date.now() - killedAt} ms (heartbeat timeout 5 s)`);
    expect(started).toBe(3);
    for (const o of outcomes) expect(o).toMatch(/^unavailable .*worker/);

    spawnWorker('inference');
    await waitFor(() => queue.liveWorkers('inference').some((w) => w.pid !== victim.pid), 'a new inference worker', 30_000);
    const pong = (await queue.gateway.submit({ op: 'ping', body: null, model: null, stream: false, queueKey: 'ping' })) as { pong: boolean };
    expect(pong.pong).toBe(true);
  }, 60_000);

  it('keeps a job that finished while `hearth serve` was down: the checkpoint survives the restart sweep', async () => {
    // Its own installation (prefix) on the same Redis: a real `hearth serve`, one training worker.
    const prefix = 'faults-restart';
    const home = tempHome();
    installManifestOnly(home, BASE);
    const apiKey = 'hearth_restart_test_key';
    const env = { HEARTH_HOME: home, REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: prefix, HEARTH_API_KEY: apiKey, HEARTH_ENTITY: 'alice', HEARTH_HEARTBEAT_TIMEOUT: '10' };
    let api = await startServe(env);
    try {
      spawnWorker('training', prefix);
      const call = async (method: string, p: string, body?: unknown) => {
        const res = await fetch(api.url + p, { method, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
        return { status: res.status, body: (await res.json()) as any };
      };
      await waitFor(async () => (await fetch(`${api.url}/v1/system-check`).then((r) => r.json()) as any).gpu_queue.workers > 0, 'the training worker', 30_000, 100);
      const model = (await call('POST', '/v1/preview/models', { project: 'p', name: 'restarted', base_model: BASE })).body;
      const job = (await call('POST', '/v1/preview/training-jobs', rlBody(model.id, { steps: 20, stepMs: 100 }))).body;
      await waitFor(async () => (await call('GET', `/v1/preview/training-jobs/${job.id}`)).body.status === 'running', 'the job to run', 20_000, 50);

      // The API goes away mid-job; the worker finishes and writes its checkpoint meanwhile.
      await api.stop('SIGKILL');
      const step1 = path.join(home, 'checkpoints', model.id, 'step-1');
      await waitFor(() => fs.existsSync(step1), 'the checkpoint written while the API is down', 20_000, 50);
      // …and reports its end into the reports stream, where the restarted API will read it.
      const reports = new Redis(redisUrl);
      try {
        await waitFor(async () => (await reports.xrange(reportsStream(prefix), '-', '+')).some(([, fields]) => fields[1].includes(job.id) && fields[1].includes('training_ended')), 'the end report in Redis', 20_000, 50);
      } finally {
        reports.disconnect();
      }

      api = await startServe(env);
      const end = await waitFor(async () => {
        const evs = (await call('GET', `/v1/preview/training-jobs/${job.id}/events?limit=100`)).body.data as { type: string; data: Record<string, unknown> }[];
        return evs.find((e) => e.type === 'training_ended' || e.type === 'training_failed');
      }, 'the reports sent while the API was down', 20_000, 100);
      expect(end.type, JSON.stringify(end.data)).toBe('training_ended');
      expect((await call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data.map((c: { step: number }) => c.step)).toEqual([1]);
      expect(fs.existsSync(step1)).toBe(true);
    } finally {
      await api.stop('SIGTERM');
    }
  }, 90_000);
});
