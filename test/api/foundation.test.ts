import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { installManifestOnly, startServer, type TestServer } from '../helpers/server.js';
import { contractErrors } from '../helpers/contract.js';
import { nowIso } from '../../src/store/records.js';

const BASE = 'test-publisher/tiny-base';
let s: TestServer;
let alice: string;
let bob: string;

function counts() {
  const db = s.store.db;
  const n = (t: string) => (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
  return { models: n('models'), checkpoints: n('checkpoints'), jobs: n('training_jobs'), events: n('training_job_events'), logs: n('trajectory_logs') };
}

async function createModel(key: string, name: string, extra: Record<string, unknown> = {}) {
  return s.call('POST', '/v1/preview/models', { key, body: { entity: null, project: 'proj', name, base_model: BASE, return_existing: true, ...extra } });
}

function addCheckpoints(modelId: string, steps: number[]) {
  for (const step of steps) {
    const dir = path.join(s.ctx.models.modelCheckpointDir(modelId), `step-${step}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'adapter_config.json'), '{}');
    s.store.checkpoints.insert({ id: crypto.randomUUID(), modelId, step, metrics: { 'val/reward': step / 100 }, path: dir, createdAt: nowIso() });
  }
}

beforeAll(async () => {
  s = await startServer();
  installManifestOnly(s.home, BASE);
  alice = s.key('alice');
  bob = s.key('bob');
});
afterAll(async () => s.close());

describe('models', () => {
  it('creates a model, returns the existing one with return_existing, and 409s without it', async () => {
    const a = await createModel(alice, 'm1');
    expect(a.status).toBe(200);
    // run_id: the model name, the W&B run id ART's own backends use for a model (wandb.init(id=model.name)).
    expect(a.body).toMatchObject({ entity: 'alice', project: 'proj', name: 'm1', base_model: BASE, run_id: 'm1' });
    expect(contractErrors('ModelResponse', a.body)).toEqual([]);
    const again = await createModel(alice, 'm1');
    expect(again.body.id).toBe(a.body.id);
    const conflict = await createModel(alice, 'm1', { return_existing: false });
    expect(conflict.status).toBe(409);
    expect(typeof conflict.body.detail).toBe('string');
  });

  it('refuses a base model that is not installed, naming how to import it', async () => {
    const r = await createModel(alice, 'm-x', { base_model: 'nope/missing' });
    expect(r.status).toBe(400);
    expect(r.body.detail).toContain('hearth models import');
  });

  it('refuses to create in another entity', async () => {
    const r = await createModel(alice, 'm-y', { entity: 'bob' });
    expect(r.status).toBe(403);
  });

  it('deletes a model with its checkpoints and their files', async () => {
    const m = (await createModel(alice, 'to-delete')).body;
    addCheckpoints(m.id, [1, 2, 3]);
    const dir = s.ctx.models.modelCheckpointDir(m.id);
    expect(fs.existsSync(dir)).toBe(true);
    const r = await s.call('DELETE', `/v1/preview/models/${m.id}`, { key: alice });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ model_id: m.id, deleted_checkpoints: 3, deleted_run: true });
    expect(contractErrors('DeleteModelResponse', r.body)).toEqual([]);
    expect(fs.existsSync(dir)).toBe(false);
    expect(s.store.checkpoints.all(m.id)).toEqual([]);
    expect((await s.call('DELETE', `/v1/preview/models/${m.id}`, { key: alice })).status).toBe(404);
  });
});

describe('checkpoints', () => {
  it('pages 45 checkpoints by 20 in both orders the way the openai cursor pager walks them', async () => {
    const m = (await createModel(alice, 'paged')).body;
    addCheckpoints(m.id, Array.from({ length: 45 }, (_, i) => i + 1));
    for (const order of ['asc', 'desc'] as const) {
      const seen: number[] = [];
      let after: string | undefined;
      let pages = 0;
      for (;;) {
        const q = new URLSearchParams({ limit: '20', order, ...(after ? { after } : {}) });
        const r = await s.call('GET', `/v1/preview/models/${m.id}/checkpoints?${q}`, { key: alice });
        expect(r.status).toBe(200);
        expect(contractErrors('PaginatedResponse_CheckpointResponse_', r.body)).toEqual([]);
        pages++;
        seen.push(...r.body.data.map((c: { step: number }) => c.step));
        if (r.body.data.length) {
          expect(r.body.first_id).toBe(r.body.data[0].id);
          expect(r.body.last_id).toBe(r.body.data[r.body.data.length - 1].id);
        }
        if (!r.body.has_more || r.body.data.length === 0) break;
        after = r.body.last_id;
      }
      expect(pages).toBe(3);
      const expected = Array.from({ length: 45 }, (_, i) => i + 1);
      expect(seen).toEqual(order === 'asc' ? expected : expected.reverse());
    }
    const latest = await s.call('GET', `/v1/preview/models/${m.id}/checkpoints?limit=1&order=desc`, { key: alice });
    expect(latest.body.data[0].step).toBe(45);
    expect(latest.body.has_more).toBe(true);
  });

  it('answers an empty page for a model without checkpoints', async () => {
    const m = (await createModel(alice, 'fresh')).body;
    const r = await s.call('GET', `/v1/preview/models/${m.id}/checkpoints?limit=1&order=desc`, { key: alice });
    expect(r.body).toEqual({ object: 'list', data: [], first_id: '', last_id: '', has_more: false });
  });

  it('deletes checkpoints by step and reports the missing ones', async () => {
    const m = (await createModel(alice, 'del-steps')).body;
    addCheckpoints(m.id, [1, 2, 3, 4]);
    const r = await s.call('DELETE', `/v1/preview/models/${m.id}/checkpoints`, { key: alice, body: { steps: [1, 2, 3, 5] } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ deleted_count: 3, not_found_steps: [5] });
    expect(contractErrors('DeleteCheckpointsResponse', r.body)).toEqual([]);
    expect(s.store.checkpoints.all(m.id).map((c) => c.step)).toEqual([4]);
    expect(fs.existsSync(path.join(s.ctx.models.modelCheckpointDir(m.id), 'step-1'))).toBe(false);
    expect(fs.existsSync(path.join(s.ctx.models.modelCheckpointDir(m.id), 'step-4'))).toBe(true);
  });

  it('rejects limits out of range with FastAPI 422s', async () => {
    const m = (await createModel(alice, 'limits')).body;
    for (const bad of ['0', '101', 'abc', '-1', '1.5']) {
      const r = await s.call('GET', `/v1/preview/models/${m.id}/checkpoints?limit=${bad}`, { key: alice });
      expect(r.status).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['query', 'limit']);
      expect(contractErrors('HTTPValidationError', r.body)).toEqual([]);
    }
    const o = await s.call('GET', `/v1/preview/models/${m.id}/checkpoints?order=sideways`, { key: alice });
    expect(o.status).toBe(422);
    expect(o.body.detail[0]).toMatchObject({ loc: ['query', 'order'], type: 'enum' });
  });
});

describe('log', () => {
  it('stores trajectory groups and writes split metrics onto the latest checkpoint', async () => {
    const m = (await createModel(alice, 'logged')).body;
    addCheckpoints(m.id, [1, 2]);
    const traj = (reward: number, duration: number) => ({ messages_and_choices: [{ role: 'user', content: 'hi' }], reward, metrics: { duration } });
    const body = {
      model_id: m.id,
      split: 'val',
      trajectory_groups: [
        { trajectories: [traj(1, 2), traj(0, 4)], exceptions: [] },
        { trajectories: [traj(0.5, 1), traj(0.5, 1)], exceptions: [{ type: 'E', message: 'boom', traceback: '' }] },
      ],
    };
    const r = await s.call('POST', `/v1/preview/models/${m.id}/log`, { key: alice, body });
    expect(r.status).toBe(200);
    const latest = s.store.checkpoints.latest(m.id)!;
    expect(latest.step).toBe(2);
    expect(latest.metrics['val/reward']).toBeCloseTo(0.5, 12);
    expect(latest.metrics['val/reward_std_dev']).toBeCloseTo(0.25, 12); // (0.5 + 0) / 2
    expect(latest.metrics['val/exception_rate']).toBeCloseTo(1 / 5, 12);
    expect(latest.metrics['val/duration']).toBeCloseTo(2, 12);
    expect(s.store.checkpoints.byStep(m.id, 1)!.metrics).toEqual({ 'val/reward': 0.01 });
  });
});

describe('auth', () => {
  it('answers 401 with WWW-Authenticate without a key, with a wrong key and with a revoked key', async () => {
    const none = await s.call('GET', '/v1/models');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    const wrong = await s.call('GET', '/v1/models', { key: 'hearth_not-a-real-key-at-all-000000000' });
    expect(wrong.status).toBe(401);
    const k = s.ctx.keys.create('carol');
    expect((await s.call('GET', '/v1/models', { key: k.key })).status).toBe(200);
    s.ctx.keys.revoke(k.prefix);
    expect((await s.call('GET', '/v1/models', { key: k.key })).status).toBe(401);
  });

  it('accepts Basic only where the contract allows it (tables), Bearer everywhere', async () => {
    const basic = 'Basic ' + Buffer.from(`api:${alice}`).toString('base64');
    const r = await s.call('GET', '/v1/models', { headers: { authorization: basic } });
    expect(r.status).toBe(401);
  });

  it('leaves health, system-check, openapi and docs open', async () => {
    expect((await s.call('GET', '/v1/health')).body).toEqual({ status: 'ok' });
    // Open means answered without a key: this server runs no queue, so the check answers 503 saying so (not 401).
    const check = await s.call('GET', '/v1/system-check');
    expect(check.status).toBe(503);
    expect(check.body).toMatchObject({ api: true, database: true, cpu_queue: { success: false, error: 'no queue is configured' } });
    expect((await s.call('GET', '/openapi.json')).status).toBe(200);
    expect((await s.call('GET', '/docs/')).status).toBe(200);
  });

  it("hides another entity's models, checkpoints and logs behind 404", async () => {
    const m = (await createModel(alice, 'private')).body;
    addCheckpoints(m.id, [1]);
    const before = counts();
    expect((await s.call('GET', `/v1/preview/models/${m.id}/checkpoints`, { key: bob })).status).toBe(404);
    expect((await s.call('DELETE', `/v1/preview/models/${m.id}/checkpoints`, { key: bob, body: { steps: [1] } })).status).toBe(404);
    expect((await s.call('POST', `/v1/preview/models/${m.id}/log`, { key: bob, body: { split: 'val', trajectory_groups: [] } })).status).toBe(404);
    expect((await s.call('DELETE', `/v1/preview/models/${m.id}`, { key: bob })).status).toBe(404);
    expect(counts()).toEqual(before);
    const models = await s.call('GET', '/v1/models', { key: bob });
    expect(models.body.data.some((e: { id: string }) => e.id.includes('/private'))).toBe(false);
  });
});

describe('bad input leaves the store unchanged', () => {
  it('answers wrong types, missing fields, malformed JSON and unknown ids with clear errors', async () => {
    const m = (await createModel(alice, 'bad-input')).body;
    addCheckpoints(m.id, [1]);
    const before = counts();
    const cases: [string, string, { body?: unknown; rawBody?: string }, number][] = [
      ['POST', '/v1/preview/models', { body: { project: 5, name: 'x' } }, 422],
      ['POST', '/v1/preview/models', { body: { project: 'p', name: '../etc', base_model: BASE } }, 422],
      ['POST', '/v1/preview/models', { rawBody: '{"project": "p",' }, 422],
      ['POST', '/v1/preview/models', { rawBody: '[1,2,3]' }, 422],
      ['POST', '/v1/preview/models', {}, 422],
      ['DELETE', `/v1/preview/models/${m.id}/checkpoints`, { body: { steps: ['one'] } }, 422],
      ['DELETE', `/v1/preview/models/${m.id}/checkpoints`, { body: {} }, 422],
      ['POST', `/v1/preview/models/${m.id}/log`, { body: { split: 'val', trajectory_groups: [{ trajectories: [{ reward: 'high' }] }] } }, 422],
      ['DELETE', `/v1/preview/models/${crypto.randomUUID()}`, {}, 404],
      ['GET', `/v1/preview/models/${crypto.randomUUID()}/checkpoints`, {}, 404],
      ['GET', `/v1/preview/training-jobs/${crypto.randomUUID()}`, {}, 404],
      ['GET', `/v1/preview/training-jobs/${crypto.randomUUID()}/events`, {}, 404],
      ['POST', '/v1/preview/training-jobs', { body: { model_id: m.id, trajectory_groups: 'lots' } }, 422],
      ['POST', '/v1/preview/sft-training-jobs', { body: { model_id: m.id } }, 422],
    ];
    for (const [method, url, o, status] of cases) {
      const r = await s.call(method, url, { key: alice, ...o, headers: o.rawBody ? { 'content-type': 'application/json' } : undefined });
      expect(r.status, `${method} ${url} ${JSON.stringify(o)}`).toBe(status);
      if (status === 422) {
        expect(Array.isArray(r.body.detail)).toBe(true);
        for (const d of r.body.detail) expect(d).toMatchObject({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
        expect(['body', 'query', 'path']).toContain(r.body.detail[0].loc[0]);
        expect(contractErrors('HTTPValidationError', r.body)).toEqual([]);
      } else expect(typeof r.body.detail).toBe('string');
      expect(JSON.stringify(r.body)).not.toMatch(/at .*\.ts:\d+/); // no stack traces
    }
    expect(counts()).toEqual(before);
  });

  it('answers 413 for a body over the limit and stays healthy', async () => {
    const small = await startServer({ env: { HEARTH_BODY_LIMIT: '1024' } });
    try {
      const k = small.key('alice');
      const r = await small.call('POST', '/v1/preview/models', { key: k, body: { project: 'p', name: 'n', base_model: 'x'.repeat(5000) } });
      expect(r.status).toBe(413);
      expect(r.body.detail).toContain('1024');
      expect((await small.call('GET', '/v1/health')).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('answers 404 for unknown paths: FastAPI shape outside the OpenAI routes, OpenAI\'s "Invalid URL" on them', async () => {
    for (const url of ['/v1/preview/nope', '/nope', '/table/nope']) {
      const r = await s.call('GET', url, { key: alice });
      expect(r.status, url).toBe(404);
      expect(r.body, url).toEqual({ detail: 'Not Found' });
    }
    const r = await s.call('GET', '/v1/nope?x=1', { key: alice });
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: { message: 'Invalid URL (GET /v1/nope)', type: 'invalid_request_error', param: null, code: null } });
  });

  it('answers 404, not 422, for unknown paths whatever their body (the body is not parsed before routing decides)', async () => {
    for (const [url, rawBody] of [['/v1/preview/nope', 'not json'], ['/v1/nope', '{"unterminated'], ['/nope', '[[[']] as const) {
      const r = await s.call('POST', url, { key: alice, rawBody, headers: { 'content-type': 'application/json' } });
      expect(r.status, url).toBe(404);
    }
    const deep = await s.call('POST', '/v1/preview/nope', { key: alice, rawBody: '['.repeat(2000) + ']'.repeat(2000), headers: { 'content-type': 'text/plain' } });
    expect(deep.status).toBe(404);
    expect(deep.body).toEqual({ detail: 'Not Found' });
  });
});

describe('rate limit', () => {
  it('answers 429 with retry-after past the per-key limit, per key', async () => {
    const limited = await startServer({ env: { HEARTH_RATE_LIMIT: '5' } });
    try {
      const k1 = limited.key('alice');
      const k2 = limited.key('bob');
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++) statuses.push((await limited.call('GET', '/v1/models', { key: k1 })).status);
      expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      const last = await limited.call('GET', '/v1/models', { key: k1 });
      expect(last.status).toBe(429);
      expect(Number(last.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect((await limited.call('GET', '/v1/models', { key: k2 })).status).toBe(200);
      expect((await limited.call('GET', '/v1/health')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('openapi', () => {
  it('documents every contract path with version 0.1.0', async () => {
    const doc = (await s.call('GET', '/openapi.json')).body;
    expect(doc.info.version).toBe('0.1.0');
    for (const p of [
      '/v1/chat/completions', '/v1/chat/completions/', '/v1/preview/models', '/v1/preview/models/{model_id}', '/v1/preview/models/{model_id}/checkpoints',
      '/v1/preview/models/{model_id}/log', '/v1/preview/training-jobs', '/v1/preview/sft-training-jobs', '/v1/preview/training-jobs/{training_job_id}',
      '/v1/preview/training-jobs/{training_job_id}/events', '/v1/health', '/v1/system-check', '/v1/models', '/inference/{vendor}/v2/hardware',
    ]) expect(Object.keys(doc.paths)).toContain(p);
    expect(doc.components.schemas.ModelCreate.required).toEqual(['project', 'name', 'base_model']);
  });
});
