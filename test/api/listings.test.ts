// Hearth's read-only listings over real HTTP: trained models with checkpoints, training jobs (newest first,
// keyset pages), /table/list and /v1/system — each answering only the key's entity.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';

/** A trajectory group as the RL route stores it after validation (its defaults filled in). */
const emptyGroup = () => ({ trajectories: [], exceptions: [], metadata: {}, metrics: {}, logs: [] });

let s: TestServer;
let alice: string;
let bob: string;
beforeAll(async () => {
  const home = tempHome();
  installManifestOnly(home, 'pub/base');
  s = await startServer({ home });
  alice = s.key('alice');
  bob = s.key('bob');
});
afterAll(async () => s?.close());

const createModel = async (key: string, project: string, name: string) =>
  (await s.call('POST', '/v1/preview/models', { key, body: { project, name, base_model: 'pub/base' } })).body as { id: string };

/** A job row as the queue leaves it; creating a real one needs a training engine (test/e2e covers that path). */
function insertJob(entity: string, modelId: string, status: 'queued' | 'succeeded', at: string): string {
  const id = crypto.randomUUID();
  s.store.jobs.insert({ id, entity, modelId, kind: 'sft', status, payload: { resolved_data_path: 'train.jsonl' }, dedupKey: null, errorMessage: null, createdAt: at, startedAt: null, finishedAt: null });
  return id;
}

describe('models listing', () => {
  it('lists the entity\'s models and one model with its checkpoints, sizes and inference names', async () => {
    const m1 = await createModel(alice, 'p1', 'one');
    await createModel(alice, 'p2', 'two');
    await createModel(bob, 'p1', 'bobs');
    const dir = path.join(s.home, 'ckpt-test');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.alloc(1234));
    s.store.checkpoints.insert({ id: crypto.randomUUID(), modelId: m1.id, step: 3, metrics: { loss: 0.5 }, path: dir, createdAt: '2026-01-01T00:00:00.000Z' });

    const all = await s.call('GET', '/v1/preview/models', { key: alice });
    expect(all.status).toBe(200);
    expect(all.body.data.map((m: { name: string }) => m.name).sort()).toEqual(['one', 'two']);
    const filtered = await s.call('GET', '/v1/preview/models?project=p2', { key: alice });
    expect(filtered.body.data.map((m: { name: string }) => m.name)).toEqual(['two']);

    const detail = await s.call('GET', `/v1/preview/models/${m1.id}`, { key: alice });
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ name: 'one', base_model: 'pub/base', latest_step: 3, inference_name: 'wandb-artifact:///alice/p1/one' });
    expect(detail.body.checkpoints).toEqual([
      expect.objectContaining({ step: 3, size_bytes: 1234, metrics: { loss: 0.5 }, inference_name: 'wandb-artifact:///alice/p1/one:step3' }),
    ]);
    expect((await s.call('GET', `/v1/preview/models/${m1.id}`, { key: bob })).status).toBe(404);
    expect((await s.call('GET', '/v1/preview/models', { key: bob })).body.data.map((m: { name: string }) => m.name)).toEqual(['bobs']);
    expect((await s.call('GET', '/v1/preview/models')).status).toBe(401);
  });
});

describe('training jobs listing', () => {
  it('pages the entity\'s jobs newest first and refuses an unknown cursor', async () => {
    const m = await createModel(alice, 'jobs', 'm');
    const mb = await createModel(bob, 'jobs', 'm');
    const ids = [0, 1, 2].map((i) => insertJob('alice', m.id, i === 2 ? 'queued' : 'succeeded', `2026-01-0${i + 1}T00:00:00.000Z`));
    insertJob('bob', mb.id, 'queued', '2026-01-05T00:00:00.000Z');

    const first = await s.call('GET', `/v1/preview/training-jobs?limit=2&model_id=${m.id}`, { key: alice });
    expect(first.status).toBe(200);
    expect(first.body.data.map((j: { id: string }) => j.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.has_more).toBe(true);
    expect(first.body.data[0]).toMatchObject({ status: 'queued', kind: 'sft', model_name: 'm', project: 'jobs' });
    const second = await s.call('GET', `/v1/preview/training-jobs?limit=2&model_id=${m.id}&after=${first.body.last_id}`, { key: alice });
    expect(second.body.data.map((j: { id: string }) => j.id)).toEqual([ids[0]]);
    expect(second.body.has_more).toBe(false);

    s.store.jobs.insert({
      id: '00000000-0000-4000-8000-000000000001', entity: 'alice', modelId: m.id, kind: 'rl', status: 'succeeded', dedupKey: null, errorMessage: null,
      payload: { model_id: m.id, trajectory_groups: [emptyGroup(), emptyGroup()], experimental_config: { learning_rate: 1e-5 } }, createdAt: '2026-01-04T00:00:00.000Z', startedAt: null, finishedAt: null,
    });
    const config = await s.call('GET', '/v1/preview/training-jobs/00000000-0000-4000-8000-000000000001/config', { key: alice });
    expect(config.body).toEqual({
      id: '00000000-0000-4000-8000-000000000001', kind: 'rl', model_id: m.id, trajectory_groups: 2, request: { model_id: m.id, experimental_config: { learning_rate: 1e-5 } },
    });
    expect((await s.call('GET', '/v1/preview/training-jobs/00000000-0000-4000-8000-000000000001/config', { key: bob })).status).toBe(404);

    const bobs = await s.call('GET', '/v1/preview/training-jobs', { key: bob });
    expect(bobs.body.data).toHaveLength(1);
    expect((await s.call('GET', `/v1/preview/training-jobs?after=${ids[0]}`, { key: bob })).status).toBe(400);
    expect((await s.call('GET', '/v1/preview/training-jobs?limit=0', { key: alice })).status).toBe(422);
  });
});

describe('/table/list', () => {
  it('lists table versions newest first per project, pages by cursor, and hides other entities', async () => {
    const digests: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await s.call('POST', '/table/create', { key: alice, body: { table: { project_id: 'alice/evals', rows: [{ i }, { i: i + 1 }] } } });
      expect(r.status).toBe(200);
      digests.push(r.body.digest);
    }
    await s.call('POST', '/table/create', { key: alice, body: { table: { project_id: 'alice/other', rows: [{ z: 1 }] } } });
    await s.call('POST', '/table/create', { key: bob, body: { table: { project_id: 'bob/evals', rows: [{ b: 1 }] } } });

    const first = await s.call('POST', '/table/list', { key: alice, body: { project_id: 'alice/evals', limit: 2 } });
    expect(first.status).toBe(200);
    expect(first.body.tables.map((t: { digest: string }) => t.digest)).toEqual([digests[2], digests[1]]);
    expect(first.body.tables[0]).toMatchObject({ project_id: 'alice/evals', row_count: 2 });
    expect(first.body.projects).toEqual([{ project: 'evals', tables: 3 }, { project: 'other', tables: 1 }]);
    const rest = await s.call('POST', '/table/list', { key: alice, body: { project_id: 'alice/evals', limit: 2, after: first.body.next_cursor } });
    expect(rest.body.tables.map((t: { digest: string }) => t.digest)).toEqual([digests[0]]);
    expect(rest.body.next_cursor).toBeNull();

    expect((await s.call('POST', '/table/list', { key: alice, body: {} })).body.tables).toHaveLength(4);
    expect((await s.call('POST', '/table/list', { key: alice, body: { project_id: 'bob/evals' } })).body.tables).toEqual([]);
    const bad = await s.call('POST', '/table/list', { key: alice, body: { project_id: 'nope' } });
    expect(bad.status).toBe(400);
    expect(bad.body.reason).toMatch(/project_id/);
  });
});

describe('/v1/system', () => {
  it('answers workers, queue depths, base models and the caller\'s job counts', async () => {
    const r = await s.call('GET', '/v1/system', { key: alice });
    expect(r.status).toBe(200);
    expect(r.body.base_models.map((m: { id: string }) => m.id)).toEqual(['pub/base']);
    expect(r.body.queues).toEqual({ inference_in_flight: 0, training_queued: 2, training_running: 0 });
    expect(r.body.your_jobs).toEqual({ queued: 1, running: 0, succeeded: 3, failed: 0, cancelled: 0 });
    expect(r.body.workers).toEqual([]);
    expect(r.body.entity).toBe('alice');
    expect((await s.call('GET', '/v1/system')).status).toBe(401);
  });
});

describe('native runs\' learner models', () => {
  it('are internal: absent from every listing, not found by id or name, their project reserved; the run still resolves', async () => {
    const key = s.key('carol');
    const visible = await createModel(key, 'p', 'mine');
    const spec = { base_model: 'pub/base', dtype: 'bfloat16', lora_rank: 8, lora_target_modules: ['linear_qkv'] };
    const resolved = await s.call('POST', '/v1/training/runs:resolve', { key, body: { request_id: `r-${crypto.randomUUID()}`, run_name: 'mine', spec } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    const learner = s.store.models.getById(s.store.nativeRuns.runById(resolved.body.run_id)!.learnerModelId)!;
    expect(learner.project).toBe('hearth-native-runs');
    const learnerName = `wandb-artifact:///carol/${learner.project}/${learner.name}`;

    const preview = await s.call('GET', '/v1/preview/models', { key });
    expect(preview.body.data.map((m: { id: string }) => m.id)).toEqual([visible.id]);
    const openai = await s.call('GET', '/v1/models', { key });
    expect(openai.body.data.map((m: { id: string }) => m.id)).toContain('wandb-artifact:///carol/p/mine');
    expect(JSON.stringify(openai.body)).not.toContain(learner.project);
    expect((await s.call('GET', `/v1/models/${encodeURIComponent(learnerName)}`, { key })).status).toBe(404);
    expect((await s.call('GET', `/v1/preview/models/${learner.id}`, { key })).status).toBe(404);
    expect((await s.call('DELETE', `/v1/preview/models/${learner.id}`, { key })).status).toBe(404);
    expect((await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: learner.id, training_data_url: 'x' } })).status).toBe(404);
    // (chat and completions resolve names as /v1/models/{model} does; art-native-replay.test.ts chats with one)
    const reserved = await s.call('POST', '/v1/preview/models', { key, body: { project: 'hearth-native-runs', name: 'x', base_model: 'pub/base' } });
    expect([reserved.status, JSON.stringify(reserved.body)]).toEqual([400, expect.stringContaining('reserved')]); // as an uninstalled base model is

    expect(s.store.models.getById(learner.id)).not.toBeNull();
    expect((await s.call('GET', `/v1/training/runs/${resolved.body.run_id}`, { key })).status).toBe(200);
  });
});
