// A training worker whose main thread is blocked for longer than anything it announced, on real worker processes
// (embedded queue, generated demo model, real engine): its pulse thread (worker/pulse.ts) keeps its heartbeats
// coming while the compute progresses, they stop when the host stops (SIGSTOP stands in for a host lost mid-step)
// or when the compute stops moving for the stall limit (HEARTH_LOAD_TIMEOUT). The fault point `training-step` blocks
// the thread and counts progress as a real step's ONNX Runtime runs do; `training-model-load` blocks it without
// progress, as a hung load.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'hearth/tiny-random-llama';
const HEARTBEAT_TIMEOUT_S = 2;

async function trainingServer(faultDir: string, loadTimeoutS: number, workerEnv: Record<string, string> = {}): Promise<TestServer> {
  const home = tempHome();
  await ensureDemoModel(home);
  const s = await startServer({
    home, realTraining: true,
    env: { HEARTH_WORKERS: 'training:cpu', HEARTH_HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT_S), HEARTH_LOAD_TIMEOUT: String(loadTimeoutS) },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_FAULT_DIR: faultDir, ...workerEnv } },
  });
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0, 'a training worker', 30_000);
  return s;
}

/** An SFT job of one step (4 rows, batch 4) on a new model; its id. */
async function startSftJob(s: TestServer, key: string, name: string): Promise<string> {
  const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: BASE } })).body;
  const lines = Array.from({ length: 4 }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Question ${i}?` }, { role: 'assistant', content: `Answer ${i}` }] }));
  const upload = await s.call('POST', `/v1/preview/datasets?project=p&name=${name}`, { key, rawBody: lines.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
  expect(upload.status).toBe(200);
  const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: upload.body.url, config: { batch_size: 4 } } });
  expect(job.status).toBe(200);
  return job.body.id as string;
}

async function jobEnd(s: TestServer, key: string, id: string, timeoutMs: number): Promise<{ type: string; data: Record<string, unknown> }[]> {
  return waitFor(async () => {
    const e = (await s.call('GET', `/v1/preview/training-jobs/${id}/events?limit=100`, { key })).body.data as { type: string; data: Record<string, unknown> }[];
    return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
  }, 'the job to end', timeoutMs, 50);
}

describe('a first training step longer than HEARTH_LOAD_TIMEOUT (3 s): its compute progresses', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-pulse-');
  let key: string;
  beforeAll(async () => {
    s = await trainingServer(faultDir, 3);
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'training-step'), { force: true });
    await s?.close();
  });

  it('keeps the worker beating through a 7 s blocked step, and the job succeeds on the same worker', async () => {
    const [pid] = (s.ctx.queue!.adapter as EmbeddedQueue).pids('training');
    // The first step runs under the job's load announcement (allowed the load timeout): before the pulse thread, a
    // worker silent for 3 s there was declared dead and killed.
    fs.writeFileSync(path.join(faultDir, 'training-step'), '7000');
    const id = await startSftJob(s, key, 'long-first-step');
    let longestSilenceMs = 0;
    const events = await waitFor(async () => {
      const w = s.ctx.queue!.liveWorkers('training').find((x) => x.tasks.includes(id));
      if (w) longestSilenceMs = Math.max(longestSilenceMs, Date.now() - w.lastSeenMs);
      return jobEnd(s, key, id, 1).catch(() => null);
    }, 'the job to end', 60_000, 50);
    fs.rmSync(path.join(faultDir, 'training-step'));
    expect(fs.existsSync(path.join(faultDir, 'training-step.reached')), 'the step really blocked').toBe(true);
    expect(events.at(-1), JSON.stringify(events.at(-1))).toMatchObject({ type: 'training_ended' });
    expect((await s.call('GET', `/v1/preview/training-jobs/${id}`, { key })).body.status).toBe('succeeded');
    expect((s.ctx.queue!.adapter as EmbeddedQueue).pids('training')).toEqual([pid]);
    // Heartbeats every 200 ms from one thread or the other: never near the 2 s timeout.
    expect(longestSilenceMs).toBeLessThan(1500);
  }, 90_000);

  it('a stretch whose compute stops moving (a hung load) goes silent after the load timeout and its job fails', async () => {
    const arm = path.join(faultDir, 'training-model-load');
    fs.writeFileSync(arm, '');
    try {
      const startedAt = Date.now();
      const id = await startSftJob(s, key, 'hung-load');
      const events = await jobEnd(s, key, id, 30_000);
      const failed = events.at(-1)!;
      expect(failed.type).toBe('training_failed');
      expect(String(failed.data.error_message)).toMatch(/stopped sending heartbeats|killed/);
      // The load timeout (3 s) without progress, then the heartbeat timeout (2 s) of silence.
      expect(Date.now() - startedAt).toBeGreaterThan(4000);
    } finally {
      fs.rmSync(arm, { force: true });
    }
  }, 60_000);
});

describe('a training worker stopped mid-step (SIGSTOP: a lost host) under a long announcement (HEARTH_LOAD_TIMEOUT=120)', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-pulse-');
  let key: string;
  beforeAll(async () => {
    s = await trainingServer(faultDir, 120);
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'training-step'), { force: true });
    await s?.close();
  });

  it('fails its job within seconds of the heartbeat timeout, not after the load timeout; a new worker takes the slot', async () => {
    const arm = path.join(faultDir, 'training-step');
    fs.writeFileSync(arm, '60000');
    const id = await startSftJob(s, key, 'stopped');
    await waitFor(() => fs.existsSync(`${arm}.reached`), 'the first step to block', 60_000, 20);
    const pid = Number(fs.readFileSync(`${arm}.reached`, 'utf8'));
    await new Promise((r) => setTimeout(r, 1000)); // the pulse thread beating for the blocked step
    process.kill(pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    try {
      const events = await jobEnd(s, key, id, 60_000);
      const tookMs = Date.now() - stoppedAt;
      expect(events.at(-1)!.type).toBe('training_failed');
      expect(String(events.at(-1)!.data.error_message)).toMatch(/stopped sending heartbeats|killed/);
      expect(tookMs).toBeLessThan(HEARTBEAT_TIMEOUT_S * 1000 + 4000);
      console.log(`[faults] training worker stopped mid-step: its job failed ${tookMs} ms later (heartbeat timeout 2 s, load timeout 120 s)`);
    } finally {
      fs.rmSync(arm, { force: true });
      try { process.kill(pid, 'SIGKILL'); } catch { /* already killed by the API */ }
    }
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid !== pid), 'a respawned training worker', 30_000);
  }, 120_000);
});

describe('a cancel during a long micro-batch (HEARTH_TRAIN_MICRO_BATCH_TOKENS=32: one row each)', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-pulse-');
  let key: string;
  beforeAll(async () => {
    s = await trainingServer(faultDir, 120, { HEARTH_TRAIN_MICRO_BATCH_TOKENS: '32' });
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'training-micro-batch'), { force: true });
    await s?.close();
  });

  it("stops the job within the micro-batch under way: the pulse thread hears the cancel while the worker's main thread is blocked", async () => {
    const arm = path.join(faultDir, 'training-micro-batch');
    // Every micro-batch blocks the worker's main thread 30 s (as an 8B one does for ~90 s), waking every 100 ms
    // where a real one would start its next ONNX Runtime run: the step of 4 rows, 2 minutes.
    fs.writeFileSync(arm, '30000');
    try {
      const id = await startSftJob(s, key, 'cancel-mid-step');
      await waitFor(() => fs.existsSync(`${arm}.reached`), 'the first micro-batch to block', 60_000, 20);
      const cancelledAt = Date.now();
      expect((await s.call('POST', `/v1/preview/training-jobs/${id}/cancel`, { key })).status).toBe(200);
      const events = await jobEnd(s, key, id, 60_000);
      const tookMs = Date.now() - cancelledAt;
      expect(events.at(-1)).toMatchObject({ type: 'training_failed', data: { cancelled: true } });
      expect(events.filter((e) => e.type === 'gradient_step')).toHaveLength(0);
      expect((await s.call('GET', `/v1/preview/training-jobs/${id}`, { key })).body.status).toBe('cancelled');
      // Not the 30 s micro-batch's end: the cancel crossed to the pulse thread and into shared memory.
      expect(tookMs).toBeLessThan(2500);
      console.log(`[faults] cancel during a micro-batch of 30 s: the job ended ${tookMs} ms later`);
    } finally {
      fs.rmSync(arm, { force: true });
    }
    // The worker trains again: nothing of the cancelled step is left in its way.
    const next = await startSftJob(s, key, 'after-cancel');
    expect((await jobEnd(s, key, next, 60_000)).at(-1)!.type).toBe('training_ended');
  }, 120_000);
});
