// Fault tests on real worker processes (embedded queue, generated demo model, real engines):
// kill -9 the inference worker under streaming load, and the training worker during a real SFT job.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { streamChat } from './faults-helpers.js';

const BASE = 'hearth/tiny-random-llama';
let s: TestServer;
const faultDir = tempHome('hearth-faults-');
let key: string;
const adapter = () => s.ctx.queue!.adapter as EmbeddedQueue;

beforeAll(async () => {
  const home = tempHome();
  await ensureDemoModel(home);
  s = await startServer({
    home, realTraining: true, env: { HEARTH_WORKERS: 'inference:cpu,training:cpu', HEARTH_HEARTBEAT_TIMEOUT: '5' },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024', HEARTH_FAULT_DIR: faultDir } },
  });
  key = s.key('alice');
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0 && s.ctx.queue!.liveWorkers('inference').length > 0, 'workers', 30_000);
}, 60_000);
afterAll(async () => s?.close());

describe('kill -9 of the inference worker under 8 streaming requests', () => {
  it('ends every stream cleanly, respawns the worker, and serves again', async () => {
    const body = { model: BASE, messages: [{ role: 'user', content: 'Tell me everything' }], max_tokens: 900, ignore_eos: true, temperature: 1 };
    const started = new Set<number>();
    const streams = Array.from({ length: 8 }, (_, i) => streamChat(s.url, key, body, () => started.add(i)));
    await waitFor(() => started.size === 8, 'all 8 streams to send a chunk', 30_000, 10);

    const [victim] = adapter().pids('inference');
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    const outcomes = await Promise.all(streams); // a stream that hangs fails the test by its timeout
    for (const o of outcomes) {
      expect(o.broken).toBeNull();
      // Either a finished answer or a clean error: never both, never neither.
      expect(o.done !== !!o.error, JSON.stringify(o.error)).toBe(true);
      if (o.error) expect(JSON.stringify(o.error)).toMatch(/worker/);
    }
    const failed = outcomes.filter((o) => o.error);
    expect(failed.length).toBeGreaterThan(0); // the kill hit streams in flight (else this test proves nothing)
    console.log(`[faults] inference kill: ${failed.length}/8 streams failed cleanly, last ended ${Math.max(...outcomes.map((o) => o.endedMs)) - killedAt} ms after the kill`);

    // A new worker (another pid) takes over and later requests succeed.
    await waitFor(() => adapter().pids('inference').some((p) => p !== victim) && s.ctx.queue!.liveWorkers('inference').some((w) => w.pid !== victim), 'a respawned inference worker', 30_000);
    expect(s.ctx.queue!.gateway.inFlight()).toBe(0);
    const after = await streamChat(s.url, key, { ...body, max_tokens: 8 });
    expect(after.done).toBe(true);
    expect(after.error).toBeNull();
  }, 90_000);
});

describe('kill -9 of the training worker during a real SFT job', () => {
  const upload = async (name: string, rows: number) => {
    const lines = Array.from({ length: rows }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Question ${i}?` }, { role: 'assistant', content: `Answer ${i % 7}` }] }));
    const r = await s.call('POST', `/v1/preview/datasets?project=p&name=${name}`, { key, rawBody: lines.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    expect(r.status).toBe(200);
    return r.body.url as string;
  };
  const events = async (jobId: string) => (await s.call('GET', `/v1/preview/training-jobs/${jobId}/events?limit=100`, { key })).body.data as { type: string; data: Record<string, unknown> }[];

  it('fails the job, leaves no half-written checkpoint, and the next job of the model succeeds', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'killed-sft', base_model: BASE } })).body;
    const longData = await upload('long', 400);
    const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: longData, config: { batch_size: 1 } } });
    expect(job.status).toBe(200);
    await waitFor(async () => (await events(job.body.id)).filter((e) => e.type === 'gradient_step').length >= 2, 'two gradient steps', 60_000, 100);

    const [victim] = adapter().pids('training');
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    const evs = await waitFor(async () => {
      const e = await events(job.body.id);
      return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
    }, 'training_failed after the kill', 30_000, 50);
    const detectedMs = Date.now() - killedAt;
    console.log(`[faults] training kill after ${evs.filter((e) => e.type === 'gradient_step').length} steps: training_failed after ${detectedMs} ms`);
    const last = evs[evs.length - 1];
    expect(last.type).toBe('training_failed');
    expect(String(last.data.error_message)).toMatch(/worker/);
    const detail = (await s.call('GET', `/v1/preview/training-jobs/${job.body.id}`, { key })).body;
    expect(detail).toMatchObject({ status: 'failed', finished_at: expect.any(String) });

    const modelDir = s.ctx.models.modelCheckpointDir(model.id);
    const step1 = path.join(modelDir, 'step-1');
    // Killed mid-training (the checkpoint is written after the last step): no step folder, no row.
    expect(fs.existsSync(step1)).toBe(false);
    expect(s.store.checkpoints.all(model.id)).toEqual([]);
    expect((await s.call('GET', `/v1/preview/models/${model.id}/checkpoints`, { key })).body.data).toEqual([]);

    // A kill between the checkpoint's rename and its report leaves a complete folder without a row.
    // The next job of the model gets the same step and must not trip over that orphan.
    fs.mkdirSync(step1, { recursive: true });
    fs.writeFileSync(path.join(step1, 'adapter_config.json'), '{"orphan": true}');
    fs.writeFileSync(path.join(step1, 'adapter_model.safetensors'), 'orphan');
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid !== victim), 'a respawned training worker', 30_000);
    const shortData = await upload('short', 4);
    const next = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: shortData, config: { batch_size: 4 } } });
    const nextEvents = await waitFor(async () => {
      const e = await events(next.body.id);
      return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
    }, 'the next job to finish', 60_000, 100);
    expect(nextEvents[nextEvents.length - 1], JSON.stringify(nextEvents[nextEvents.length - 1])).toMatchObject({ type: 'training_ended' });
    const ckpts = (await s.call('GET', `/v1/preview/models/${model.id}/checkpoints`, { key })).body.data;
    expect(ckpts.map((c: { step: number }) => c.step)).toEqual([1]);
    expect(JSON.parse(fs.readFileSync(path.join(step1, 'adapter_config.json'), 'utf8')).peft_type).toBe('LORA');
  }, 150_000);

  // Fault points (src/runtime/fault-points.ts) stop the worker at each side of the checkpoint's rename, so the kill
  // lands there every time and each outcome is asserted, instead of whichever one a race produced.
  const arm = (point: string) => fs.writeFileSync(path.join(faultDir, point), '');
  const reached = (point: string) => fs.existsSync(path.join(faultDir, `${point}.reached`));
  const disarm = (point: string) => {
    fs.rmSync(path.join(faultDir, point), { force: true });
    fs.rmSync(path.join(faultDir, `${point}.reached`), { force: true });
  };
  const endOf = (jobId: string) =>
    waitFor(async () => (await events(jobId)).find((x) => x.type === 'training_failed' || x.type === 'training_ended'), `job ${jobId} to end`, 60_000, 50);
  const freshWorker = (than: number) => waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid !== than), 'a respawned training worker', 30_000);
  const LORA_FILES = ['adapter_config.json', 'adapter_model.safetensors'];

  it('killed while writing the checkpoint (files written, not renamed): no step folder, no row, the job fails', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'killed-before-rename', base_model: BASE } })).body;
    const modelDir = s.ctx.models.modelCheckpointDir(model.id);
    const step1 = path.join(modelDir, 'step-1');
    arm('checkpoint-before-rename');
    try {
      const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('before-rename', 4), config: { batch_size: 4 } } });
      await waitFor(() => reached('checkpoint-before-rename'), 'the worker to stop before the rename', 60_000, 20);
      // Held there: the files sit complete in a temporary folder; the step folder does not exist yet.
      const tmp = fs.readdirSync(modelDir).filter((n) => n.startsWith('.step-1.tmp-'));
      expect(tmp).toHaveLength(1);
      expect(fs.readdirSync(path.join(modelDir, tmp[0])).sort()).toEqual(LORA_FILES);
      expect(fs.existsSync(step1)).toBe(false);
      const [victim] = adapter().pids('training');
      process.kill(victim, 'SIGKILL');
      const end = await endOf(job.body.id);
      expect(end.type).toBe('training_failed');
      expect(String(end.data.error_message)).toMatch(/worker/);
      expect(fs.existsSync(step1)).toBe(false);
      expect(s.store.checkpoints.all(model.id)).toEqual([]);
      await freshWorker(victim);
    } finally {
      disarm('checkpoint-before-rename');
    }
    // The model trains on: its next job writes step 1.
    const again = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('before-rename-2', 4), config: { batch_size: 4 } } });
    const end = await endOf(again.body.id);
    expect(end.type, JSON.stringify(end.data)).toBe('training_ended');
    expect((await s.call('GET', `/v1/preview/models/${model.id}/checkpoints`, { key })).body.data.map((c: { step: number }) => c.step)).toEqual([1]);
    expect(fs.readdirSync(step1).sort()).toEqual(LORA_FILES);
  }, 150_000);

  it('killed after the rename, before the report: a complete orphan folder, no row; the next job replaces it', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'killed-after-rename', base_model: BASE } })).body;
    const step1 = path.join(s.ctx.models.modelCheckpointDir(model.id), 'step-1');
    arm('checkpoint-after-rename');
    let orphanWeights: Buffer;
    try {
      const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('after-rename', 4), config: { batch_size: 4 } } });
      await waitFor(() => reached('checkpoint-after-rename'), 'the worker to stop after the rename', 60_000, 20);
      expect(fs.readdirSync(step1).sort()).toEqual(LORA_FILES);
      orphanWeights = fs.readFileSync(path.join(step1, 'adapter_model.safetensors'));
      const [victim] = adapter().pids('training');
      process.kill(victim, 'SIGKILL');
      const end = await endOf(job.body.id);
      expect(end.type).toBe('training_failed');
      expect(String(end.data.error_message)).toMatch(/worker/);
      expect(s.store.checkpoints.all(model.id)).toEqual([]);
      expect(fs.readdirSync(step1).sort()).toEqual(LORA_FILES); // complete, never half-written
      await freshWorker(victim);
    } finally {
      disarm('checkpoint-after-rename');
    }
    // The next job gets the same step, clears the orphan and writes its own checkpoint there.
    const again = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('after-rename-2', 6), config: { batch_size: 6 } } });
    const end = await endOf(again.body.id);
    expect(end.type, JSON.stringify(end.data)).toBe('training_ended');
    expect((await s.call('GET', `/v1/preview/models/${model.id}/checkpoints`, { key })).body.data.map((c: { step: number }) => c.step)).toEqual([1]);
    expect(fs.readFileSync(path.join(step1, 'adapter_model.safetensors')).equals(orphanWeights!)).toBe(false);
  }, 150_000);

  it('keeps the worker responsive during a real job: heartbeats keep coming and a cancel lands mid-job', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'responsive', base_model: BASE } })).body;
    const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('responsive', 400), config: { batch_size: 1 } } });
    await waitFor(async () => (await events(job.body.id)).some((e) => e.type === 'gradient_step'), 'training to run', 60_000, 50);
    // Heartbeats keep coming while the job trains: three distinct ones that carry this job.
    const beats = new Set<number>();
    await waitFor(() => {
      for (const w of s.ctx.queue!.liveWorkers('training')) if (w.tasks.includes(job.body.id)) beats.add(w.lastSeenMs);
      return beats.size >= 3;
    }, 'three heartbeats during training', 60_000, 20);
    const cancelledAt = Date.now();
    expect((await s.call('POST', `/v1/preview/training-jobs/${job.body.id}/cancel`, { key })).status).toBe(200);
    const end = await waitFor(async () => (await events(job.body.id)).find((x) => x.type === 'training_failed' || x.type === 'training_ended'), 'the cancel to land', 60_000, 50);
    console.log(`[faults] cancel of a real SFT job landed after ${Date.now() - cancelledAt} ms`);
    expect(end).toMatchObject({ type: 'training_failed', data: { cancelled: true } });
    const steps = (await events(job.body.id)).filter((e) => e.type === 'gradient_step').length;
    expect(steps).toBeLessThan(400);
  }, 90_000);
});
