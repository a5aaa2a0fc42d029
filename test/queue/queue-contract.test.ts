// The queue contract, run against both adapters with real worker processes (and real Redis for BullMQ).
import type { DomainError } from '../../src/errors/domain-errors.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';
import { HEARTH_BIN, REPO } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import type { TrainingPolicy } from '../../src/services/training-jobs.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const HANDLERS = path.join(REPO, 'test/fixtures/queue-handlers.ts');
const BASE = 'test-publisher/tiny-base';
const permissive: TrainingPolicy = { unsupportedRlKeys: () => [], unsupportedSftKeys: () => [],
      rlSettingsProblem: () => null, resolveSftData: async () => ({ error: 'SFT is not part of the queue tests' }) };
const workerEnv = { HEARTH_WORKER_HANDLERS: HANDLERS, HEARTH_HEARTBEAT_INTERVAL_MS: '200', LOG_LEVEL: 'warn' };

type Mode = 'embedded' | 'bullmq';

function rlBody(modelId: string, plan: Record<string, unknown>) {
  return { model_id: modelId, trajectory_groups: [{ trajectories: [{ messages_and_choices: [], reward: 1 }], metadata: plan }], experimental_config: null };
}

class Cluster {
  server!: TestServer;
  key!: string;
  workers: ChildProcess[] = [];
  prefix = `hearth-test-${crypto.randomBytes(4).toString('hex')}`;
  constructor(readonly mode: Mode) {}

  async start(home = tempHome(), embeddedWorkers = 'inference:cpu,training:cpu') {
    installManifestOnly(home, BASE);
    const env: Record<string, string> = { HEARTH_HEARTBEAT_TIMEOUT: '2', HEARTH_QUEUE_PREFIX: this.prefix };
    if (this.mode === 'bullmq') env.REDIS_URL = REDIS_URL;
    else env.HEARTH_WORKERS = embeddedWorkers;
    this.server = await startServer({ home, env, queue: { workerEnv }, container: { policy: permissive } });
    this.key = this.server.key('alice');
    return this;
  }

  /** BullMQ mode: a `hearth worker` process, as users start them on other hosts. */
  spawnWorker(kind: 'inference' | 'training', env: Record<string, string> = {}): ChildProcess {
    const child = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', kind, '--redis', REDIS_URL], {
      env: { ...process.env, ...workerEnv, HEARTH_QUEUE_PREFIX: this.prefix, HEARTH_HOME: this.server.home, ...env },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    this.workers.push(child);
    return child;
  }

  async ensureWorkers(kinds: ('inference' | 'training')[]) {
    if (this.mode === 'bullmq') for (const k of kinds) this.spawnWorker(k);
    for (const k of new Set(kinds)) {
      const want = kinds.filter((x) => x === k).length;
      await waitFor(() => this.server.ctx.queue!.liveWorkers(k).length >= want, `${want} ${k} worker(s)`, 30_000);
    }
  }

  /** A new gate file (test/fixtures/queue-handlers.ts): work given it waits until the file is removed. */
  gate(): string {
    const file = path.join(this.server.home, `gate-${crypto.randomUUID()}`);
    fs.writeFileSync(file, '');
    return file;
  }

  trainingPid(): number {
    if (this.mode === 'embedded') return (this.server.ctx.queue!.adapter as EmbeddedQueue).pids('training')[0];
    return this.workers.find((w) => w.spawnargs.includes('training') && w.exitCode === null && w.signalCode === null)!.pid!;
  }

  async model(name: string) {
    const r = await this.server.call('POST', '/v1/preview/models', { key: this.key, body: { project: 'p', name, base_model: BASE, return_existing: true } });
    return r.body.id as string;
  }

  async events(jobId: string) {
    const r = await this.server.call('GET', `/v1/preview/training-jobs/${jobId}/events?limit=100`, { key: this.key });
    return r.body.data as { id: string; type: string; data: Record<string, unknown> }[];
  }

  async terminal(jobId: string, timeoutMs = 30_000) {
    return waitFor(
      async () => {
        const evs = await this.events(jobId);
        return evs.some((e) => e.type === 'training_ended' || e.type === 'training_failed') ? evs : null;
      },
      `a terminal event of job ${jobId}`,
      timeoutMs,
      100,
    );
  }

  async stop() {
    for (const w of this.workers) if (w.exitCode === null) w.kill('SIGKILL');
    await this.server?.close();
    if (this.mode === 'bullmq') {
      const r = new Redis(REDIS_URL);
      const keys = await r.keys(`${this.prefix}:*`);
      if (keys.length) await r.del(...keys);
      await r.quit();
    }
  }
}

describe.each(['embedded', 'bullmq'] as Mode[])('queue contract (%s)', (mode) => {
  let c: Cluster;
  beforeAll(async () => {
    c = await new Cluster(mode).start();
    await c.ensureWorkers(['inference', 'training']);
  });
  afterAll(async () => c.stop());

  it('runs a training job: events in order, checkpoint listed before training_ended, status succeeded', async () => {
    const modelId = await c.model('ordered');
    const job = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 5 }) });
    expect(job.status).toBe(200);
    const events = await c.terminal(job.body.id);
    expect(events.map((e) => e.type)).toEqual(['training_started', 'gradient_step', 'gradient_step', 'gradient_step', 'gradient_step', 'gradient_step', 'training_ended']);
    expect(events[0].data).toEqual({ num_sequences: 5 });
    expect(events.slice(1, 6).map((e) => e.data.step)).toEqual([1, 2, 3, 4, 5]);
    const ckpt = await c.server.call('GET', `/v1/preview/models/${modelId}/checkpoints?limit=1&order=desc`, { key: c.key });
    expect(ckpt.body.data[0].step).toBe(1);
    const detail = await c.server.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key: c.key });
    expect(detail.body).toMatchObject({ status: 'succeeded', kind: 'rl', model_id: modelId, error_message: null });

    // The next job of the same model continues from that checkpoint and becomes step 2.
    const next = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 1 }) });
    await c.terminal(next.body.id);
    const steps = (await c.server.call('GET', `/v1/preview/models/${modelId}/checkpoints`, { key: c.key })).body.data.map((x: { step: number }) => x.step);
    expect(steps).toEqual([1, 2]);
    const written = JSON.parse(fs.readFileSync(path.join(c.server.ctx.models.modelCheckpointDir(modelId), 'step-2', 'adapter_config.json'), 'utf8'));
    expect(written.from).toMatch(/step-1$/);
  });

  it('reports a failing job as training_failed with its message', async () => {
    const modelId = await c.model('failing');
    const job = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 1, fail: 'loss became NaN' }) });
    const events = await c.terminal(job.body.id);
    expect(events[events.length - 1]).toMatchObject({ type: 'training_failed', data: { error_message: 'loss became NaN' } });
    expect((await c.server.call('GET', `/v1/preview/models/${modelId}/checkpoints`, { key: c.key })).body.data).toEqual([]);
  });

  it('cancels a running job at the next step boundary', async () => {
    const modelId = await c.model('cancelled');
    // Held before step 2 until the cancel reaches the worker: the job can only end by the cancel.
    const job = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 200, holdAtStep: 2, gate: c.gate() }) });
    await waitFor(async () => (await c.events(job.body.id)).some((e) => e.type === 'gradient_step'), 'the first gradient step');
    const r = await c.server.call('POST', `/v1/preview/training-jobs/${job.body.id}/cancel`, { key: c.key });
    expect(r.status).toBe(200);
    const events = await c.terminal(job.body.id);
    expect(events[events.length - 1]).toMatchObject({ type: 'training_failed', data: { cancelled: true } });
    expect(events.filter((e) => e.type === 'gradient_step')).toHaveLength(1);
    expect((await c.server.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key: c.key })).body.status).toBe('cancelled');
  });

  it('passes the system check once both kinds of worker sent heartbeats', async () => {
    const r = await c.server.call('GET', '/v1/system-check');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ api: true, database: true, cpu_queue: { success: true, error: null }, gpu_queue: { success: true, error: null } });
  });

  it('streams inference deltas in order and answers pings', async () => {
    const queue = c.server.ctx.queue!;
    const pingTimes: number[] = [];
    const pong = (await queue.gateway.submit({ op: 'ping', body: null, model: null, stream: false, queueKey: 'ping', onWorkerTime: (ms) => pingTimes.push(ms) })) as { pong: boolean };
    expect(pong.pong).toBe(true);
    expect(pingTimes).toHaveLength(1); // a result says how long the worker took to it
    const seen: unknown[] = [];
    const tokens = Array.from({ length: 50 }, (_, i) => `t${i}`);
    const streamTimes: { ms: number; before: number }[] = [];
    const result = await queue.gateway.submit({
      op: 'chat', body: { tokens }, model: null, stream: true, queueKey: 'm', onChunk: (d) => seen.push(d),
      onWorkerTime: (ms) => streamTimes.push({ ms, before: seen.length }),
    });
    expect(seen).toEqual(tokens);
    // A stream's time comes once, with its first delta, before that delta is passed on.
    expect(streamTimes).toHaveLength(1);
    expect(streamTimes[0].before).toBe(0);
    expect(streamTimes[0].ms).toBeGreaterThanOrEqual(0);
    expect(result).toMatchObject({ n: 50 });
  });

  it('refuses work beyond the per-model queue depth as over capacity (the API answers 429)', async () => {
    const queue = c.server.ctx.queue!;
    const depth = c.server.ctx.config.maxQueuePerModel;
    // Every accepted request is held on its worker (a gate file) until the refusals are in: no timing involved.
    const gate = c.gate();
    const settled: string[] = [];
    const calls = Array.from({ length: depth + 3 }, () =>
      queue
        .gateway.submit({ op: 'chat', body: { tokens: ['a'], gate }, model: null, stream: false, queueKey: 'busy' })
        .then(() => 'served', (e: DomainError) => `${e.kind} retry after ${e.retryAfterSec}`)
        .then((outcome) => (settled.push(outcome), outcome)),
    );
    await waitFor(() => settled.length === 3, 'the requests beyond the depth to be refused');
    expect(settled).toEqual(Array(3).fill('over_capacity retry after 1'));
    fs.rmSync(gate);
    const outcomes = await Promise.all(calls);
    expect(outcomes.filter((s) => s === 'over_capacity retry after 1')).toHaveLength(3);
    expect(outcomes.filter((s) => s === 'served')).toHaveLength(depth);
  });

  it('fails the job with an event when its worker is killed mid-job, and keeps serving', async () => {
    const modelId = await c.model('killed');
    const job = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 500, holdAtStep: 2, gate: c.gate() }) });
    await waitFor(async () => (await c.events(job.body.id)).some((e) => e.type === 'gradient_step'), 'the first gradient step');
    process.kill(c.trainingPid(), 'SIGKILL'); // held before step 2: the kill lands mid-job
    const events = await c.terminal(job.body.id, 30_000);
    expect(events[events.length - 1].type).toBe('training_failed');
    expect(String(events[events.length - 1].data.error_message)).toMatch(/worker/);
    expect((await c.server.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key: c.key })).body.status).toBe('failed');
    expect(fs.existsSync(path.join(c.server.ctx.models.modelCheckpointDir(modelId), 'step-1', 'adapter_config.json'))).toBe(false);

    // A replacement worker (embedded: respawned; Redis: a new `hearth worker`) takes the next job.
    if (mode === 'bullmq') c.spawnWorker('training');
    const again = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 1 }) });
    const evs = await c.terminal(again.body.id, 30_000);
    expect(evs[evs.length - 1].type).toBe('training_ended');
  });
});

describe('embedded queue restart', () => {
  it('resumes jobs that were queued when the API stopped', async () => {
    const home = tempHome();
    const first = await new Cluster('embedded').start(home, 'inference:cpu'); // no training worker: jobs wait
    const modelId = await first.model('resumed');
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await first.server.call('POST', '/v1/preview/training-jobs', { key: first.key, body: rlBody(modelId, { steps: 2 }) })).body.id);
    expect((await first.server.call('GET', `/v1/preview/training-jobs/${ids[0]}`, { key: first.key })).body.status).toBe('queued');
    const key = first.key;
    await first.stop();

    const second = await new Cluster('embedded').start(home, 'training:cpu');
    try {
      second.key = key;
      for (const id of ids) expect((await second.terminal(id)).map((e) => e.type).pop()).toBe('training_ended');
      const steps = (await second.server.call('GET', `/v1/preview/models/${modelId}/checkpoints`, { key })).body.data.map((x: { step: number }) => x.step);
      expect(steps).toEqual([1, 2]);
    } finally {
      await second.stop();
    }
  });
});

describe('embedded queue shutdown', () => {
  it('lets a running training job finish before the workers stop', async () => {
    const c = await new Cluster('embedded').start(tempHome(), 'training:cpu');
    const modelId = await c.model('finishing');
    const job = await c.server.call('POST', '/v1/preview/training-jobs', { key: c.key, body: rlBody(modelId, { steps: 20, stepMs: 50 }) });
    await waitFor(async () => (await c.events(job.body.id)).some((e) => e.type === 'gradient_step'), 'the first gradient step');
    await c.server.ctx.queue!.close(); // what `hearth serve` does on SIGTERM, after the HTTP server closed
    const status = c.server.store.jobs.getById(job.body.id)!.status;
    const events = c.server.store.events.all(job.body.id).map((e) => e.type);
    expect(status).toBe('succeeded');
    expect(events.filter((t) => t === 'gradient_step')).toHaveLength(20);
    expect(events[events.length - 1]).toBe('training_ended');
    await c.stop();
  });
});

describe('BullMQ workers on one Redis', () => {
  it('share the load: two inference workers both take requests', async () => {
    const c = await new Cluster('bullmq').start();
    try {
      // Each takes at most 4 requests at a time (as an engine with a batch limit would), so 40 need both.
      c.spawnWorker('inference', { HEARTH_WORKER_CONCURRENCY: '4' });
      c.spawnWorker('inference', { HEARTH_WORKER_CONCURRENCY: '4' });
      await waitFor(() => c.server.ctx.queue!.liveWorkers('inference').length >= 2, 'two inference workers', 30_000);
      // Held on their workers until 8 are taken: with at most 4 each, both workers must hold 4.
      const gate = c.gate();
      const pending = Array.from({ length: 40 }, () =>
        c.server.ctx.queue!.gateway.submit({ op: 'chat', body: { tokens: ['x'], gate }, model: null, stream: false, queueKey: 'share' }),
      );
      await waitFor(() => c.server.ctx.queue!.liveWorkers('inference').every((w) => w.load === 4), 'both workers to take 4 requests', 30_000, 20);
      fs.rmSync(gate);
      const results = (await Promise.all(pending)) as { pid: number }[];
      expect(new Set(results.map((r) => r.pid)).size).toBe(2);
    } finally {
      await c.stop();
    }
  });
});
