// A model load longer than BullMQ's job lock, on real `hearth worker --redis` processes (real Redis, generated demo
// model, real engines). BullMQ renews a job's lock from a timer on the worker's event loop, and a load blocks that
// loop: without worker/job-locks.ts the lock expires mid-load, another worker's stalled check fails the job ("job
// stalled more than allowable limit") and the loading worker's completion fails with "Missing lock for job".
//
// The property does not depend on the lock's length, so the lock is shortened to 2 s (HEARTH_JOB_LOCK_MS; stalled
// checks as often) and the load held 7 s, three lock lengths, instead of the 30 s lock and a 45 s load (FAULTS_LOCK_MS and
// FAULTS_HOLD_MS below run it at those). The test process stands in for the other worker hosts:
// a BullMQ Worker that takes no jobs and only runs the stalled check every 2 s, and a QueueEvents listener that hears
// every `stalled`, `failed` and `completed` event of the queue.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { QueueEvents, Worker } from 'bullmq';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { HEARTH_BIN } from '../helpers/process.js';
import { streamChat } from './faults-helpers.js';

const BASE = 'hearth/tiny-random-llama';
// FAULTS_LOCK_MS=30000 FAULTS_HOLD_MS=45000 runs it at BullMQ's real lock and a 45 s load (about 2 minutes).
const LOCK_MS = Number(process.env.FAULTS_LOCK_MS || 2000);
const HOLD_MS = Number(process.env.FAULTS_HOLD_MS || 7000);
const TEST_TIMEOUT_MS = 90_000 + 3 * HOLD_MS;
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = `faults-lock-${crypto.randomBytes(4).toString('hex')}`;
const connection = { url: redisUrl, maxRetriesPerRequest: null };

let s: TestServer;
let key: string;
const faultDir = tempHome('hearth-faults-lock-');
const children: ChildProcess[] = [];
const watchers: { close(): Promise<void> }[] = [];

interface QueueEventLog {
  events: { event: string; jobId: string; reason?: string }[];
}

/** Another host's view of queue `name`: its stalled check every LOCK_MS, and every event the queue publishes. */
async function watchQueue(name: 'inference' | 'training'): Promise<QueueEventLog> {
  const log: QueueEventLog = { events: [] };
  const events = new QueueEvents(name, { connection, prefix });
  for (const event of ['stalled', 'failed', 'completed'] as const) {
    events.on(event, (args: { jobId: string; failedReason?: string }) => log.events.push({ event, jobId: args.jobId, reason: args.failedReason }));
  }
  await events.waitUntilReady();
  const checker = new Worker(name, null, { connection, prefix, autorun: false, lockDuration: LOCK_MS, stalledInterval: LOCK_MS, maxStalledCount: 0 });
  await checker.startStalledCheckTimer();
  watchers.push(events, checker);
  return log;
}

/** A `hearth worker --redis` of `kind` with the short lock; its stderr is kept for the lock errors BullMQ logs. */
function spawnWorker(kind: 'inference' | 'training', env: Record<string, string> = {}): { child: ChildProcess; stderr: () => string } {
  let stderr = '';
  const child = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', kind, '--redis', redisUrl], {
    env: {
      ...process.env, HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_QUEUE_PREFIX: prefix, HEARTH_HOME: s.home, HEARTH_MAX_CONTEXT: '1024',
      HEARTH_FAULT_DIR: faultDir, HEARTH_JOB_LOCK_MS: String(LOCK_MS), HEARTH_LOAD_TIMEOUT: '60', HEARTH_HEARTBEAT_TIMEOUT: '2', LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  children.push(child);
  return { child, stderr: () => stderr };
}

/** Arm the blocking load point `point`; resolves once a worker is blocked in it, with when that was seen. */
async function armAndReach(point: 'inference-model-load' | 'training-model-load', start: () => void): Promise<{ arm: string; reachedAt: number }> {
  const arm = path.join(faultDir, point);
  fs.rmSync(`${arm}.reached`, { force: true });
  fs.writeFileSync(arm, '');
  start();
  await waitFor(() => fs.existsSync(`${arm}.reached`), `a worker to block in ${point}`, 60_000, 20);
  return { arm, reachedAt: Date.now() };
}

/** A model to train and an SFT dataset of `rows` two-message rows for it; the dataset's URL. */
async function sftInputs(name: string, rows: number): Promise<{ modelId: string; dataUrl: string }> {
  const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: BASE } })).body;
  const lines = Array.from({ length: rows }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Question ${i}?` }, { role: 'assistant', content: `Answer ${i}` }] }));
  const upload = await s.call('POST', `/v1/preview/datasets?project=p&name=${name}`, { key, rawBody: lines.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
  expect(upload.status).toBe(200);
  return { modelId: model.id, dataUrl: upload.body.url };
}

/** A `hearth worker --redis` of the training kind, once the API lists it live. */
async function liveTrainingWorker(env: Record<string, string> = {}): Promise<ReturnType<typeof spawnWorker>> {
  const w = spawnWorker('training', env);
  await waitFor(() => s.ctx.queue!.liveWorkers('training').some((x) => x.pid === w.child.pid), 'the training worker', 30_000);
  return w;
}

beforeAll(async () => {
  const home = tempHome();
  await ensureDemoModel(home);
  s = await startServer({
    home, queue: {}, realTraining: true,
    env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: prefix, HEARTH_HEARTBEAT_TIMEOUT: '2', HEARTH_LOAD_TIMEOUT: '60' },
  });
  key = s.key('alice');
}, 60_000);

afterAll(async () => {
  for (const point of ['inference-model-load', 'training-model-load', 'training-step']) fs.rmSync(path.join(faultDir, point), { force: true });
  for (const c of children) c.kill('SIGKILL');
  for (const w of watchers) await w.close().catch(() => {});
  await s?.close();
});

/**
 * An SFT job (4 rows, one step) whose first step blocks worker `w` for 60 s (the fault point `training-step`, which
 * counts progress as a real step does); resolves once it blocks there. The caller disarms the point.
 */
async function blockedSftJob(w: { child: ChildProcess }, name: string): Promise<{ body: { id: string } }> {
  const { dataUrl, modelId } = await sftInputs(name, 4);
  const arm = path.join(faultDir, 'training-step');
  fs.rmSync(`${arm}.reached`, { force: true });
  fs.writeFileSync(arm, '60000');
  const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: dataUrl, config: { batch_size: 4 } } });
  expect(job.status).toBe(200);
  await waitFor(() => fs.existsSync(`${arm}.reached`), 'the first step to block', 60_000, 20);
  expect(Number(fs.readFileSync(`${arm}.reached`, 'utf8'))).toBe(w.child.pid);
  return job;
}

const LOCK_ERRORS = /Missing lock|could not renew lock|job stalled/i;

/** A training job's events once it has ended (its terminal event last). */
async function eventsOnceEnded(jobId: string, timeoutMs: number): Promise<{ type: string; data: { error_message?: string } }[]> {
  return waitFor(async () => {
    const e = (await s.call('GET', `/v1/preview/training-jobs/${jobId}/events?limit=100`, { key })).body.data as { type: string; data: { error_message?: string } }[];
    return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
  }, 'the job to end', timeoutMs, 50);
}

/** BullMQ saw the job complete once, and two stalled checks later still nothing else; the worker logged no lock error. */
async function ranOnceInBullmq(log: QueueEventLog, stderr: () => string, jobId?: string): Promise<void> {
  // Only `jobId`'s events when given: a job an earlier test left behind (its worker killed) stalls in this one's checks.
  const events = () => log.events.filter((e) => jobId === undefined || e.jobId === jobId);
  await waitFor(() => events().some((e) => e.event === 'completed' || e.event === 'failed'), 'the job to complete or fail in BullMQ', 10_000);
  await new Promise((r) => setTimeout(r, 2 * LOCK_MS)); // two more stalled checks after the job ended
  expect(events().filter((e) => e.event !== 'completed'), JSON.stringify(log.events)).toEqual([]);
  expect(events().filter((e) => e.event === 'completed')).toHaveLength(1);
  expect(stderr()).not.toMatch(LOCK_ERRORS);
}

describe(`a model load held ${HOLD_MS / 1000} s under a ${LOCK_MS / 1000} s BullMQ job lock (Redis mode)`, () => {
  it('inference: the request runs once and succeeds; the job never stalls or fails in BullMQ', async () => {
    const log = await watchQueue('inference');
    const w = spawnWorker('inference');
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((x) => x.pid === w.child.pid), 'the inference worker', 30_000);

    let outcome!: ReturnType<typeof streamChat>;
    const body = { model: BASE, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, ignore_eos: true, temperature: 0 };
    const { arm, reachedAt } = await armAndReach('inference-model-load', () => (outcome = streamChat(s.url, key, body)));
    await new Promise((r) => setTimeout(r, HOLD_MS - (Date.now() - reachedAt)));
    fs.rmSync(arm);
    const o = await outcome;
    expect(o.error).toBeNull();
    expect(o.broken).toBeNull();
    expect(o.done).toBe(true);

    await ranOnceInBullmq(log, w.stderr);
  }, TEST_TIMEOUT_MS);

  it('training: the job runs once and succeeds with one checkpoint; it announced its load to the API meanwhile', async () => {
    const log = await watchQueue('training');
    const w = await liveTrainingWorker();
    const { modelId, dataUrl } = await sftInputs('long-load', 4);
    let job!: Awaited<ReturnType<TestServer['call']>>;
    const { arm, reachedAt } = await armAndReach('training-model-load', () => {
      void s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: dataUrl, config: { batch_size: 4 } } }).then((r) => (job = r));
    });
    // Blocked past the heartbeat timeout (2 s), still live: its pulse thread repeats the heartbeat announcing the load.
    await waitFor(() => Date.now() - reachedAt > 4000, 'the heartbeat timeout to pass', 10_000, 100);
    const worker = s.ctx.queue!.liveWorkers('training').find((x) => x.pid === w.child.pid);
    expect(worker?.loading?.map((l) => l.model)).toEqual([BASE]);
    expect(worker?.tasks).toEqual([job.body.id]);
    await new Promise((r) => setTimeout(r, HOLD_MS - (Date.now() - reachedAt)));
    fs.rmSync(arm);

    const events = await eventsOnceEnded(job.body.id, 60_000);
    expect(events.at(-1)).toMatchObject({ type: 'training_ended' });
    expect(events.filter((e) => e.type === 'training_started')).toHaveLength(1);
    expect((await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body.status).toBe('succeeded');
    expect(s.store.checkpoints.all(modelId).map((c) => c.step)).toEqual([1]);
    await waitFor(() => s.ctx.queue!.liveWorkers('training').find((x) => x.pid === w.child.pid && !x.loading), 'a heartbeat without the load', 10_000);

    await ranOnceInBullmq(log, w.stderr);
  }, TEST_TIMEOUT_MS + 30_000);
});

describe('training steps longer than the heartbeat timeout (2 s) and the BullMQ job lock (Redis mode)', () => {
  it('each long step is announced before it blocks and the pulse thread beats through it: the job runs once and succeeds', async () => {
    const STEP_MS = 4500;
    const log = await watchQueue('training');
    const w = await liveTrainingWorker();
    const { modelId, dataUrl } = await sftInputs('long-steps', 12);
    const arm = path.join(faultDir, 'training-step');
    fs.writeFileSync(arm, String(STEP_MS)); // every step blocks the worker's thread this long
    try {
      const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: dataUrl, config: { batch_size: 4 } } });
      expect(job.status).toBe(200);
      // Watch the API's view while the job runs: the longest silence of the worker running it (this test's, or the
      // one the test before left) while it was live in an announced step (its main thread blocked).
      let silentInStep = 0;
      const seenSteps = new Set<number>();
      const events = await waitFor(async () => {
        const x = s.ctx.queue!.liveWorkers('training').find((v) => v.tasks.includes(job.body.id));
        for (const l of x?.loading ?? []) if (l.step !== undefined) { seenSteps.add(l.step); silentInStep = Math.max(silentInStep, Date.now() - x!.lastSeenMs); }
        const e = (await s.call('GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`, { key })).body.data as { type: string }[];
        return e.some((v) => v.type === 'training_failed' || v.type === 'training_ended') ? e : null;
      }, 'the job to end', 120_000, 100);
      expect(events.at(-1), JSON.stringify(events.at(-1))).toMatchObject({ type: 'training_ended' });
      expect(events.filter((e) => e.type === 'gradient_step')).toHaveLength(3);
      expect(events.filter((e) => e.type === 'training_started')).toHaveLength(1);
      expect(silentInStep).toBeLessThan(1500); // heartbeats every 200 ms from the pulse thread: never near the 2 s timeout
      expect([...seenSteps].sort()).toEqual([2, 3, 4]); // 4: the tail after the last step (checkpoint), announced as well
      expect((await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body.status).toBe('succeeded');
    } finally {
      fs.rmSync(arm, { force: true });
    }
    await ranOnceInBullmq(log, w.stderr);
  }, 180_000);
});

describe('Redis mode: stretches longer than what they announced (worker/pulse.ts)', () => {
  // Each test's job must reach its own worker: the workers the tests above left go first.
  beforeEach(async () => {
    for (const c of children) c.kill('SIGKILL');
    await waitFor(() => s.ctx.queue!.liveWorkers('training').length === 0, 'no training worker left', 30_000);
  }, 40_000);

  it("a first step longer than the worker's HEARTH_LOAD_TIMEOUT (3 s) and the lock: the pulse thread holds the job's lock, the job runs once and succeeds", async () => {
    const log = await watchQueue('training');
    // The job's load announcement (and the lock it holds) covers 3 s; the first step blocks 8 s while progressing.
    const w = await liveTrainingWorker({ HEARTH_LOAD_TIMEOUT: '3' });
    const { modelId, dataUrl } = await sftInputs('long-first-step', 4);
    const arm = path.join(faultDir, 'training-step');
    fs.rmSync(`${arm}.reached`, { force: true });
    fs.writeFileSync(arm, '8000');
    try {
      const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: dataUrl, config: { batch_size: 4 } } });
      expect(job.status).toBe(200);
      const events = await eventsOnceEnded(job.body.id, 120_000);
      expect(Number(fs.readFileSync(`${arm}.reached`, 'utf8'))).toBe(w.child.pid);
      expect(events.at(-1), JSON.stringify(events.at(-1))).toMatchObject({ type: 'training_ended' });
      expect((await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body.status).toBe('succeeded');
    } finally {
      fs.rmSync(arm, { force: true });
    }
    await ranOnceInBullmq(log, w.stderr);
    w.child.kill('SIGKILL');
  }, 180_000);

  it('a worker stopped mid-step (SIGSTOP: a lost host) fails its job within seconds of the heartbeat timeout, not the 60 s it announced', async () => {
    const w = await liveTrainingWorker();
    const arm = path.join(faultDir, 'training-step');
    try {
      const job = await blockedSftJob(w, 'stopped-host');
      await new Promise((r) => setTimeout(r, 1000)); // the pulse thread beating for the blocked step
      w.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      const events = await eventsOnceEnded(job.body.id, 60_000);
      const tookMs = Date.now() - stoppedAt;
      expect(events.at(-1)!.type).toBe('training_failed');
      expect(events.at(-1)!.data.error_message).toMatch(/stopped sending heartbeats/);
      expect(tookMs).toBeLessThan(6000);
      console.log(`[faults] Redis training worker stopped mid-step: its job failed ${tookMs} ms later (heartbeat timeout 2 s, load timeout 60 s)`);
    } finally {
      fs.rmSync(arm, { force: true });
      w.child.kill('SIGKILL');
    }
  }, 120_000);

  it("a cancel during a 60 s step is heard by the pulse thread on the control channel: the job ends within seconds, BullMQ completes it once", async () => {
    const log = await watchQueue('training');
    const w = await liveTrainingWorker();
    const arm = path.join(faultDir, 'training-step');
    let job: { body: { id: string } } | null = null;
    try {
      job = await blockedSftJob(w, 'cancel-mid-step');
      const cancelledAt = Date.now();
      expect((await s.call('POST', `/v1/preview/training-jobs/${job.body.id}/cancel`, { key })).status).toBe(200);
      const events = await eventsOnceEnded(job.body.id, 60_000);
      const tookMs = Date.now() - cancelledAt;
      expect(events.at(-1)).toMatchObject({ type: 'training_failed', data: { cancelled: true } });
      expect((await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body.status).toBe('cancelled');
      expect(tookMs).toBeLessThan(2500);
      console.log(`[faults] Redis: cancel during a blocked 60 s step: the job ended ${tookMs} ms later`);
    } finally {
      fs.rmSync(arm, { force: true });
    }
    await ranOnceInBullmq(log, w.stderr, job!.body.id);
    w.child.kill('SIGKILL');
  }, 120_000);
});
