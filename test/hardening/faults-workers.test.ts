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
let key: string;
const adapter = () => s.ctx.queue!.adapter as EmbeddedQueue;

beforeAll(async () => {
  const home = tempHome();
  await ensureDemoModel(home);
  s = await startServer({
    home, realTraining: true, env: { HEARTH_WORKERS: 'inference:cpu,training:cpu', HEARTH_HEARTBEAT_TIMEOUT: '5' },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024' } },
  });
  key = s.key('alice');
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0 && s.ctx.queue!.liveWorkers('inference').length > 0, 'workers', 30_000);
}, 60_000);
afterAll(async () => s?.close());

describe('kill -9 of the inference worker under 8 streaming requests', () => {
  it('ends every stream cleanly within 30 s, respawns the worker, and serves again', async () => {
    const body = { model: BASE, messages: [{ role: 'user', content: 'Tell me everything' }], max_tokens: 900, ignore_eos: true, temperature: 1 };
    const started = new Set<number>();
    const streams = Array.from({ length: 8 }, (_, i) => streamChat(s.url, key, body, () => started.add(i)));
    await waitFor(() => started.size === 8, 'all 8 streams to send a chunk', 30_000, 10);

    const [victim] = adapter().pids('inference');
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    const outcomes = await Promise.race([
      Promise.all(streams),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('a stream hung for 30 s after the kill')), 30_000)),
    ]);
    for (const o of outcomes) {
      expect(o.broken).toBeNull();
      expect(o.endedMs - killedAt).toBeLessThan(30_000);
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

  it('fails the job within 30 s, leaves no half-written checkpoint, and the next job of the model succeeds', async () => {
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

    // The step folder is complete or absent; no row points at a missing folder.
    const modelDir = s.ctx.models.modelCheckpointDir(model.id);
    const step1 = path.join(modelDir, 'step-1');
    if (fs.existsSync(step1)) expect(fs.readdirSync(step1).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    for (const c of s.store.checkpoints.all(model.id)) expect(fs.existsSync(c.path!)).toBe(true);
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

  it('killed while writing the checkpoint: the step folder is absent or complete, and the model trains on', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'killed-at-write', base_model: BASE } })).body;
    const modelDir = s.ctx.models.modelCheckpointDir(model.id);
    fs.mkdirSync(modelDir, { recursive: true });
    // inotify tells us the moment the worker creates its temporary checkpoint folder: kill it right then.
    const [victim] = adapter().pids('training');
    let killedAt = 0;
    let seen = '';
    const watcher = fs.watch(modelDir, (_event, name) => {
      if (!killedAt && name) {
        seen = String(name);
        killedAt = Date.now();
        process.kill(victim, 'SIGKILL');
      }
    });
    try {
      const data = await upload('at-write', 8);
      const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: data, config: { batch_size: 8 } } });
      const evs = await waitFor(async () => {
        const e = await events(job.body.id);
        return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
      }, 'the job to end', 60_000, 50);
      expect(killedAt).toBeGreaterThan(0);
      const last = evs[evs.length - 1];
      console.log(`[faults] training kill at checkpoint write (${seen}): ${last.type} after ${Date.now() - killedAt} ms`);
      const step1 = path.join(modelDir, 'step-1');
      const rows = s.store.checkpoints.all(model.id);
      if (last.type === 'training_failed') expect(rows).toEqual([]);
      for (const c of rows) expect(fs.readdirSync(c.path!).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
      if (fs.existsSync(step1)) expect(fs.readdirSync(step1).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    } finally {
      watcher.close();
    }
    // The respawned worker trains the model's next job into step 1.
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid !== victim), 'a respawned training worker', 30_000);
    const again = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('at-write-2', 4), config: { batch_size: 4 } } });
    const end = await waitFor(async () => (await events(again.body.id)).find((x) => x.type === 'training_failed' || x.type === 'training_ended'), 'the next job to end', 60_000, 100);
    expect(end.type, JSON.stringify(end.data)).toBe('training_ended');
    expect((await s.call('GET', `/v1/preview/models/${model.id}/checkpoints`, { key })).body.data.length).toBeGreaterThan(0);
  }, 120_000);

  it('keeps the worker responsive during a real job: heartbeats keep coming and a cancel lands mid-job', async () => {
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'responsive', base_model: BASE } })).body;
    const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: await upload('responsive', 400), config: { batch_size: 1 } } });
    await waitFor(async () => (await events(job.body.id)).some((e) => e.type === 'gradient_step'), 'training to run', 60_000, 50);
    // Heartbeats every 200 ms: while the job trains, a fresh one must arrive well within a second.
    const since = Date.now();
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.lastSeenMs > since && w.tasks.includes(job.body.id)), 'a heartbeat during training', 2000, 20);
    const cancelledAt = Date.now();
    expect((await s.call('POST', `/v1/preview/training-jobs/${job.body.id}/cancel`, { key })).status).toBe(200);
    const end = await waitFor(async () => (await events(job.body.id)).find((x) => x.type === 'training_failed' || x.type === 'training_ended'), 'the cancel to land', 10_000, 50);
    console.log(`[faults] cancel of a real SFT job landed after ${Date.now() - cancelledAt} ms`);
    expect(end).toMatchObject({ type: 'training_failed', data: { cancelled: true } });
    const steps = (await events(job.body.id)).filter((e) => e.type === 'gradient_step').length;
    expect(steps).toBeLessThan(400);
  }, 90_000);
});
