// Fair shares between entities (issue #44, items 5 and 9), through real HTTP and real worker processes: bob floods
// inference, queues training jobs and fills his storage; alice, on the same server, is served in her share.
//   - inference (real engine, demo model, a 2-sequence batch): bob's flood holds his own slots and queue only;
//     alice's request is never 429 because of it and is answered before any of bob's held requests even starts;
//   - training (the queue's test handlers, one trainer held by gate files; embedded and Redis): when bob's running
//     job ends, alice's queued job goes before bob's older second one, and bob cannot queue past his per-entity limit;
//   - storage: a write past the entity's quota is refused in its family's shape, and DELETE of a dataset frees it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { TrainingPolicy } from '../../src/services/training-jobs.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';
import { HEARTH_BIN, REPO } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { streamChat, type StreamOutcome } from './faults-helpers.js';

describe('inference: one entity\'s flood neither delays another\'s request nor turns it into 429', () => {
  const BASE = 'hearth/tiny-random-llama';
  let s: TestServer;

  beforeAll(async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    s = await startServer({
      home,
      // One model queue of 8 in all; 2 requests per entity in flight and 4 more held. The worker batches 2 sequences.
      env: { HEARTH_WORKERS: 'inference:cpu', HEARTH_MAX_QUEUE_PER_MODEL: '8', HEARTH_INFERENCE_INFLIGHT_PER_ENTITY: '2', HEARTH_INFERENCE_QUEUE_PER_ENTITY: '4' },
      queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024', HEARTH_MAX_NUM_SEQS: '2' } },
    });
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'an inference worker', 60_000);
  }, 90_000);
  afterAll(async () => s?.close());

  it('admits alice at once while bob holds the batch and a queue of his own', async () => {
    const bob = s.key('bob');
    const alice = s.key('alice');
    const long = { model: BASE, messages: [{ role: 'user', content: 'Go on and on' }], max_tokens: 1000, ignore_eos: true };
    // Which of bob's streams have produced a chunk, in the order they did.
    const bobStarted: number[] = [];
    const flood: Promise<StreamOutcome>[] = [];
    let bobEnded = 0;
    for (let i = 0; i < 2; i++) flood.push(streamChat(s.url, bob, long, (n) => n === 1 && bobStarted.push(i)).then((o) => (bobEnded++, o)));
    await waitFor(() => bobStarted.length === 2, 'bob\'s first two streams to run', 60_000, 10);
    const settled: StreamOutcome[] = [];
    for (let i = 2; i < 8; i++) flood.push(streamChat(s.url, bob, long, (n) => n === 1 && bobStarted.push(i)).then((o) => (settled.push(o), o)));
    // Bob's own limits refuse two of these (2 in flight + 4 held), at once; the other four wait for his slots.
    await waitFor(() => settled.length >= 2, 'bob\'s excess to be refused', 30_000, 10);
    expect(settled.map((o) => o.status)).toEqual([429, 429]);
    for (const refused of settled) expect(JSON.stringify(refused.error)).toMatch(/your entity/);

    // Alice: a 4-token chat. Served (never 429 for bob's queue), and before any of bob's held requests starts.
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, ignore_eos: true }),
    });
    const body = (await res.json()) as { choices?: unknown[]; error?: unknown };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.choices).toHaveLength(1);
    // Only his first two (in either order: they start in one batch), none of the held ones.
    expect([...bobStarted].sort()).toEqual([0, 1]);
    // ... and while both of bob's running streams still go on: the worker gave her a slot of bob's at its next step
    // instead of letting her wait for one of his streams to end (a stream of his takes seconds; her answer a few steps).
    expect(bobEnded).toBe(0);

    // Bob's admitted streams all end whole, his preempted one included; only the two refused did not run.
    const outcomes = await Promise.all(flood);
    expect(outcomes.filter((o) => o.status === 429)).toHaveLength(2);
    for (const o of outcomes.filter((x) => x.status !== 429)) {
      expect(o.error, JSON.stringify(o.error)).toBeNull();
      expect(o.done).toBe(true);
    }
    expect(bobStarted).toHaveLength(6);
  }, 180_000);
});

const TRAIN_BASE = 'test-publisher/tiny-base';
const HANDLERS = path.join(REPO, 'test/fixtures/queue-handlers.ts');
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const permissive: TrainingPolicy = { unsupportedRlKeys: () => [], unsupportedSftKeys: () => [], rlSettingsProblem: () => null, resolveSftData: async () => ({ error: 'SFT is not part of these tests' }) };
const handlerEnv = { HEARTH_WORKER_HANDLERS: HANDLERS, HEARTH_HEARTBEAT_INTERVAL_MS: '200', LOG_LEVEL: 'warn' };

/** A server with one trainer running the queue's test handlers: an embedded child, or a `hearth worker` on Redis. */
async function trainingServer(mode: 'embedded' | 'bullmq', env: Record<string, string> = {}) {
  const home = tempHome();
  installManifestOnly(home, TRAIN_BASE);
  const prefix = `hearth-test-${crypto.randomBytes(4).toString('hex')}`;
  const s = await startServer({
    home,
    env: { HEARTH_QUEUE_PREFIX: prefix, ...(mode === 'bullmq' ? { REDIS_URL } : { HEARTH_WORKERS: 'training:cpu' }), ...env },
    queue: { workerEnv: handlerEnv },
    container: { policy: permissive },
  });
  let worker: ChildProcess | null = null;
  if (mode === 'bullmq') {
    worker = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', 'training', '--redis', REDIS_URL], {
      env: { ...process.env, ...handlerEnv, HEARTH_QUEUE_PREFIX: prefix, HEARTH_HOME: home },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0, 'a training worker', 60_000);
  return {
    s,
    async close() {
      if (worker && worker.exitCode === null) worker.kill('SIGKILL');
      await s.close();
      if (mode === 'bullmq') {
        const r = new Redis(REDIS_URL);
        const keys = await r.keys(`${prefix}:*`);
        if (keys.length) await r.del(...keys);
        await r.quit();
      }
    },
  };
}

describe.each(['embedded', 'bullmq'] as const)('training (%s): fair between entities', (mode) => {
  let t: Awaited<ReturnType<typeof trainingServer>>;
  let s: TestServer;
  beforeAll(async () => {
    t = await trainingServer(mode, { HEARTH_TRAINING_QUEUE_PER_ENTITY: '3' });
    s = t.s;
  }, 90_000);
  afterAll(async () => t?.close());

  const gate = () => {
    const file = path.join(s.home, `gate-${crypto.randomUUID()}`);
    fs.writeFileSync(file, '');
    return file;
  };
  const model = async (key: string, name: string) => (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: TRAIN_BASE } })).body.id as string;
  const job = (key: string, modelId: string, plan: Record<string, unknown>) =>
    s.call('POST', '/v1/preview/training-jobs', { key, body: { model_id: modelId, trajectory_groups: [{ trajectories: [{ messages_and_choices: [], reward: 1 }], metadata: plan }], experimental_config: null } });
  const status = async (key: string, id: string) => (await s.call('GET', `/v1/preview/training-jobs/${id}`, { key })).body.status as string;

  it('runs alice\'s job before bob\'s older second one, and caps what bob may queue', async () => {
    const bob = s.key('bob');
    const alice = s.key('alice');
    const [bobGate1, bobGate2, aliceGate] = [gate(), gate(), gate()];
    const b1 = await job(bob, await model(bob, 'b1'), { steps: 2, holdAtStep: 1, gate: bobGate1 });
    expect(b1.status).toBe(200);
    await waitFor(async () => (await status(bob, b1.body.id)) === 'running', 'bob\'s first job to run', 30_000, 50);
    const b2 = await job(bob, await model(bob, 'b2'), { steps: 2, holdAtStep: 1, gate: bobGate2 });
    const a1 = await job(alice, await model(alice, 'a1'), { steps: 2, holdAtStep: 1, gate: aliceGate });
    expect([b2.status, a1.status]).toEqual([200, 200]);

    // Bob's third job is within his limit of 3; a fourth, on yet another model, is his entity's 429. Alice's is not.
    expect((await job(bob, await model(bob, 'b3'), { steps: 1 })).status).toBe(200);
    const over = await job(bob, await model(bob, 'b4'), { steps: 1 });
    expect(over.status).toBe(429);
    expect(over.body.detail).toMatch(/Your entity already has 3 training jobs/);

    // Bob's first job ends: the trainer goes to alice, whose job came after bob's second.
    fs.rmSync(bobGate1);
    await waitFor(async () => (await status(alice, a1.body.id)) === 'running' || (await status(bob, b2.body.id)) === 'running', 'the next job to run', 30_000, 50);
    expect(await status(alice, a1.body.id)).toBe('running');
    expect(await status(bob, b2.body.id)).toBe('queued');
    fs.rmSync(aliceGate);
    fs.rmSync(bobGate2);
    await waitFor(async () => (await status(bob, b2.body.id)) === 'succeeded', 'bob\'s second job to end', 30_000, 50);
    expect(await status(alice, a1.body.id)).toBe('succeeded');
  }, 120_000);
});

describe('storage: a quota per entity', () => {
  const QUOTA = 4096;
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ env: { HEARTH_STORAGE_QUOTA_BYTES: String(QUOTA) } });
  }, 60_000);
  afterAll(async () => s?.close());

  it('refuses a write past the entity\'s storage quota in each family\'s shape, leaves others alone, and DELETE frees it', async () => {
    const bob = s.key('bob');
    const alice = s.key('alice');
    const rows = (n: number, pad: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `${i} ${'x'.repeat(pad)}` }] })).join('\n');
    const upload = (key: string, name: string, text: string) =>
      s.call('POST', `/v1/preview/datasets?project=p&name=${name}`, { key, rawBody: text, headers: { 'content-type': 'application/x-ndjson' } });

    const first = await upload(bob, 'big', rows(10, 300)); // ~3.4 KB of 4 KB
    expect(first.status).toBe(200);
    const over = await upload(bob, 'more', rows(3, 300));
    expect(over.status).toBe(413);
    expect(over.body.detail).toMatch(/Storage quota exceeded/);
    // Weave writes count against the same quota and answer the trace server's {reason}.
    const basic = { authorization: `Basic ${Buffer.from(`api:${bob}`).toString('base64')}` };
    const table = await s.call('POST', '/table/create', { headers: basic, body: { table: { project_id: 'bob/p', rows: [{ text: 'y'.repeat(1500) }] } } });
    expect(table.status).toBe(413);
    expect(table.body.reason).toMatch(/Storage quota exceeded/);
    const obj = await s.call('POST', '/obj/create', { headers: basic, body: { obj: { project_id: 'bob/p', object_id: 'o', val: { text: 'y'.repeat(1500) } } } });
    expect(obj.status).toBe(413);
    // Nothing of the refused writes was stored.
    expect(fs.existsSync(path.join(s.home, 'datasets', 'bob', 'p', 'more'))).toBe(false);
    // Another entity's room is its own.
    expect((await upload(alice, 'big', rows(10, 300))).status).toBe(200);

    // DELETE: unknown → 404; bob's dataset → gone, quota freed, its version number not reused.
    expect((await s.call('DELETE', '/v1/preview/datasets?project=p&name=nothing', { key: bob })).status).toBe(404);
    const gone = await s.call('DELETE', '/v1/preview/datasets?project=p&name=big', { key: bob });
    expect(gone.status).toBe(200);
    expect(gone.body.deleted_versions).toEqual([0]);
    expect(gone.body.freed_bytes).toBe(Buffer.byteLength(rows(10, 300)));
    const again = await upload(bob, 'big', rows(10, 300));
    expect(again.status).toBe(200);
    expect(again.body.url).toBe('wandb-artifact:///bob/p/big:v1');
    // Alice's dataset of the same name is untouched by bob's delete.
    expect(fs.existsSync(path.join(s.home, 'datasets', 'alice', 'p', 'big', 'v0.jsonl'))).toBe(true);
  }, 60_000);
});
