// Entity isolation (issue #9, point 3): alice owns models, checkpoints, trajectory logs, a training job with
// events, a table, a dataset and usage; bob, with his own valid key, must not read, write, delete, list,
// stream, plot or infer with any of it. Another entity's resource answers 404 (or an empty list), exactly
// like a missing one, and is left untouched. Revoked keys stop working on the very next request.
//
// The server runs with the embedded queue (no workers) and this build's training policy, so job creation
// and inference reach the point where they would look up alice's resources.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { installManifestOnly, startServer, type TestServer } from '../helpers/server.js';
import { nowIso } from '../../src/store/records.js';

const BASE = 'iso-pub/tiny-base';
let s: TestServer;
let alice: string;
let bob: string;
const a = {} as { modelId: string; modelName: string; jobId: string; eventId: string; tableDigest: string; rowDigests: string[]; datasetUrl: string; datasetFile: string; checkpointDir: string };

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const basic = (key: string) => ({ authorization: `Basic ${Buffer.from(`api:${key}`).toString('base64')}` });

/** Everything alice owns, as row counts and files: must be identical after bob's attempts. */
function aliceFootprint() {
  const db = s.store.db;
  const n = (sql: string, ...args: unknown[]) => (db.prepare(sql).get(...args) as { n: number }).n;
  return {
    models: n("SELECT count(*) AS n FROM models WHERE entity = 'alice'"),
    checkpoints: n('SELECT count(*) AS n FROM checkpoints WHERE model_id = ?', a.modelId),
    logs: n('SELECT count(*) AS n FROM trajectory_logs WHERE model_id = ?', a.modelId),
    jobStatus: s.store.jobs.get('alice', a.jobId)?.status,
    events: n('SELECT count(*) AS n FROM training_job_events WHERE job_id = ?', a.jobId),
    tables: n("SELECT count(*) AS n FROM weave_tables WHERE entity = 'alice'"),
    tableRows: n("SELECT count(*) AS n FROM weave_table_rows WHERE entity = 'alice'"),
    usage: s.store.usage.list('alice'),
    datasetFile: fs.existsSync(a.datasetFile),
    checkpointDir: fs.existsSync(a.checkpointDir),
  };
}

beforeAll(async () => {
  s = await startServer({ queue: {}, realTraining: true });
  installManifestOnly(s.home, BASE);
  alice = s.key('alice');
  bob = s.key('bob');

  const model = await s.call('POST', '/v1/preview/models', { key: alice, body: { project: 'p', name: 'm', base_model: BASE } });
  expect(model.status).toBe(200);
  a.modelId = model.body.id;
  a.modelName = 'wandb-artifact:///alice/p/m';

  a.checkpointDir = path.join(s.ctx.models.modelCheckpointDir(a.modelId), 'step-1');
  fs.mkdirSync(a.checkpointDir, { recursive: true });
  fs.writeFileSync(path.join(a.checkpointDir, 'adapter_config.json'), '{}');
  s.store.checkpoints.insert({ id: crypto.randomUUID(), modelId: a.modelId, step: 1, metrics: {}, path: a.checkpointDir, createdAt: nowIso() });

  const log = await s.call('POST', `/v1/preview/models/${a.modelId}/log`, {
    key: alice, body: { split: 'train', trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: 'user', content: 'secret' }], reward: 1 }] }] },
  });
  expect(log.status).toBe(200);

  // No training engine runs here: the job and its events go into the store as a worker would leave them.
  a.jobId = crypto.randomUUID();
  s.store.jobs.insert({ id: a.jobId, entity: 'alice', modelId: a.modelId, kind: 'rl', status: 'running', payload: { trajectory_groups: [] }, dedupKey: null, errorMessage: null, createdAt: nowIso(), startedAt: nowIso(), finishedAt: null });
  s.ctx.trainingJobs.recordEvent(a.jobId, 'training_started', { num_sequences: 2 });
  s.ctx.trainingJobs.recordEvent(a.jobId, 'gradient_step', { loss: 1.5 });
  const events = await s.call('GET', `/v1/preview/training-jobs/${a.jobId}/events`, { key: alice });
  expect(events.body.data).toHaveLength(2);
  a.eventId = events.body.data[0].id;

  const table = await s.call('POST', '/table/create', { headers: basic(alice), body: { table: { project_id: 'alice/p', rows: [{ secret: 'alice-row-1' }, { secret: 'alice-row-2' }] } } });
  expect(table.status).toBe(200);
  a.tableDigest = table.body.digest;
  a.rowDigests = table.body.row_digests;

  const dataset = await s.call('POST', '/v1/preview/datasets?project=p&name=d', {
    key: alice, rawBody: '{"messages":[{"role":"user","content":"alice secret"},{"role":"assistant","content":"ok"}]}\n', headers: { 'content-type': 'application/x-ndjson' },
  });
  expect(dataset.status).toBe(200);
  a.datasetUrl = dataset.body.url;
  a.datasetFile = s.ctx.datasets.file('alice', 'p', 'd', 'latest')!;
  expect(fs.existsSync(a.datasetFile)).toBe(true);

  s.store.usage.add({ entity: 'alice', project: 'p', model: a.modelName, promptTokens: 10, completionTokens: 5 });
});
afterAll(async () => s?.close());

describe("bob and alice's resources", () => {
  it('bob sees none of them in lists (models, usage)', async () => {
    const models = await s.call('GET', '/v1/models', { key: bob });
    expect(models.status).toBe(200);
    expect(JSON.stringify(models.body)).not.toContain('alice');
    // alice does see her model: the check above can fail.
    expect(JSON.stringify((await s.call('GET', '/v1/models', { key: alice })).body)).toContain(a.modelName);

    const usage = await s.call('GET', '/v1/usage', { key: bob });
    expect(usage.body).toEqual({ object: 'list', data: [] });
    expect((await s.call('GET', '/v1/usage', { key: alice })).body.data).toHaveLength(1);
  });

  it("answers 404 for every route that names alice's model, job or events, and changes nothing", async () => {
    const before = aliceFootprint();
    const attempts: [string, string, unknown?][] = [
      ['DELETE', `/v1/preview/models/${a.modelId}`],
      ['GET', `/v1/preview/models/${a.modelId}/checkpoints`],
      ['GET', `/v1/preview/models/${a.modelId}/checkpoints?limit=1&order=desc`],
      ['DELETE', `/v1/preview/models/${a.modelId}/checkpoints`, { steps: [1] }],
      ['POST', `/v1/preview/models/${a.modelId}/log`, { split: 'train', trajectory_groups: [] }],
      ['GET', `/v1/preview/training-jobs/${a.jobId}`],
      ['GET', `/v1/preview/training-jobs/${a.jobId}/events`],
      ['GET', `/v1/preview/training-jobs/${a.jobId}/events?after=${a.eventId}&limit=10`],
      ['GET', `/v1/preview/training-jobs/${a.jobId}/plot.png`],
      ['POST', `/v1/preview/training-jobs/${a.jobId}/cancel`],
      ['POST', '/v1/preview/training-jobs', { model_id: a.modelId, trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: 'user', content: 'hi' }], reward: 1 }] }] }],
      ['POST', '/v1/preview/sft-training-jobs', { model_id: a.modelId, training_data_url: a.datasetUrl }],
      ['POST', '/v1/chat/completions', { model: a.modelName, messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/v1/chat/completions', { model: `${a.modelName}:step1`, messages: [{ role: 'user', content: 'hi' }], stream: true }],
      ['POST', '/v1/chat/completions/', { model: a.modelName, messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/v1/completions', { model: a.modelName, prompt: 'hi' }],
      ['GET', `/inference/cpu/v2/hardware?model=${encodeURIComponent(a.modelName)}`],
    ];
    for (const [method, url, body] of attempts) {
      const r = await s.call(method, url, { key: bob, body });
      expect(r.status, `${method} ${url}`).toBe(404);
      // Training routes answer FastAPI's {detail}; OpenAI routes OpenAI's {error}.
      const message = url.startsWith('/v1/preview/') ? r.body.detail : r.body.error?.message;
      expect(typeof message, `${method} ${url}`).toBe('string');
      expect(JSON.stringify(r.body)).not.toContain('secret');
    }
    expect(aliceFootprint()).toEqual(before);
    // The same requests work for alice (so a 404 above means "not yours", not "broken").
    expect((await s.call('GET', `/v1/preview/training-jobs/${a.jobId}`, { key: alice })).status).toBe(200);
    expect((await s.call('GET', `/v1/preview/models/${a.modelId}/checkpoints`, { key: alice })).body.data).toHaveLength(1);
    expect((await fetch(`${s.url}/v1/preview/training-jobs/${a.jobId}/plot.png`, { headers: bearer(alice) })).status).toBe(200);
  });

  it("refuses to create a model in alice's entity", async () => {
    const r = await s.call('POST', '/v1/preview/models', { key: bob, body: { entity: 'alice', project: 'p', name: 'm2', base_model: BASE } });
    expect(r.status).toBe(403);
    expect(s.store.models.findByName('alice', 'p', 'm2')).toBeFalsy();
    // bob's own p/m is a different model.
    const own = await s.call('POST', '/v1/preview/models', { key: bob, body: { project: 'p', name: 'm', base_model: BASE } });
    expect(own.status).toBe(200);
    expect(own.body.id).not.toBe(a.modelId);
    expect(own.body.entity).toBe('bob');
  });

  it("cannot read, query, update or copy alice's tables (Basic or Bearer)", async () => {
    const before = aliceFootprint();
    for (const auth of [basic(bob), bearer(bob)]) {
      const q = await s.call('POST', '/table/query', { headers: auth, body: { project_id: 'alice/p', digest: a.tableDigest } });
      expect(q.status).toBe(200);
      expect(q.body).toEqual({ rows: [] });
      const stats = await s.call('POST', '/table/query_stats', { headers: auth, body: { project_id: 'alice/p', digest: a.tableDigest } });
      expect(stats.status).toBe(404);
      expect(typeof stats.body.reason).toBe('string');
      const batch = await s.call('POST', '/table/query_stats_batch', { headers: auth, body: { project_id: 'alice/p', digests: [a.tableDigest] } });
      expect(batch.body).toEqual({ tables: [] });
      const update = await s.call('POST', '/table/update', { headers: auth, body: { project_id: 'alice/p', base_digest: a.tableDigest, updates: [{ append: { row: { x: 1 } } }] } });
      expect(update.status).toBe(404);
      const create = await s.call('POST', '/table/create', { headers: auth, body: { table: { project_id: 'alice/p', rows: [{ x: 1 }] } } });
      expect(create.status).toBe(404);
      const copy = await s.call('POST', '/table/create_from_digests', { headers: auth, body: { project_id: 'alice/p', row_digests: a.rowDigests } });
      expect(copy.status).toBe(404);
      // Knowing alice's digests does not make her rows readable from bob's own project.
      const own = await s.call('POST', '/table/create_from_digests', { headers: auth, body: { project_id: 'bob/p', row_digests: a.rowDigests } });
      const ownRows = await s.call('POST', '/table/query', { headers: auth, body: { project_id: 'bob/p', digest: own.body.digest ?? a.tableDigest } });
      expect(JSON.stringify(ownRows.body)).not.toContain('alice-row');
      const sameDigest = await s.call('POST', '/table/query', { headers: auth, body: { project_id: 'bob/p', digest: a.tableDigest } });
      expect(JSON.stringify(sameDigest.body)).not.toContain('alice-row');
    }
    expect(aliceFootprint()).toEqual(before);
    const mine = await s.call('POST', '/table/query', { headers: basic(alice), body: { project_id: 'alice/p', digest: a.tableDigest } });
    expect(JSON.stringify(mine.body)).toContain('alice-row-1');
  });

  it("cannot train on alice's dataset or table, by URL or by file path", async () => {
    const bobModel = (await s.call('POST', '/v1/preview/models', { key: bob, body: { project: 'p', name: 'sft', base_model: BASE } })).body;
    const urls = [
      a.datasetUrl,
      'wandb-artifact:///alice/p/d',
      `weave:///alice/p/table/${a.tableDigest}`,
      `file://${a.datasetFile}`,
      `file://${path.join(s.home, 'datasets', 'bob', '..', 'alice', 'p', 'd', 'v0.jsonl')}`,
      `file://${path.join(s.home, 'hearth.db')}`,
    ];
    const jobsBefore = (s.store.db.prepare('SELECT count(*) AS n FROM training_jobs').get() as { n: number }).n;
    for (const url of urls) {
      const r = await s.call('POST', '/v1/preview/sft-training-jobs', { key: bob, body: { model_id: bobModel.id, training_data_url: url } });
      expect(r.status, url).toBe(400);
      expect(r.body.detail).not.toContain('alice secret');
    }
    expect((s.store.db.prepare('SELECT count(*) AS n FROM training_jobs').get() as { n: number }).n).toBe(jobsBefore);
    // bob's upload under the same project and name is his own first version, not alice's second.
    const upload = await s.call('POST', '/v1/preview/datasets?project=p&name=d', { key: bob, rawBody: '{"messages":[{"role":"user","content":"b"}]}', headers: { 'content-type': 'application/x-ndjson' } });
    expect(upload.body).toMatchObject({ url: 'wandb-artifact:///bob/p/d:v0', version: 0 });
    expect(fs.readFileSync(a.datasetFile, 'utf8')).toContain('alice secret');
    // alice can train on her own dataset through the same route (the 400s above are about ownership).
    const aliceModel = (await s.call('POST', '/v1/preview/models', { key: alice, body: { project: 'p', name: 'sft', base_model: BASE } })).body;
    const own = await s.call('POST', '/v1/preview/sft-training-jobs', { key: alice, body: { model_id: aliceModel.id, training_data_url: a.datasetUrl } });
    expect(own.status).toBe(200);
    // DELETE is per entity too: bob's of p/d removes his own upload, never alice's; and alice's own DELETE is refused
    // while her queued job reads the file.
    const bobDelete = await s.call('DELETE', '/v1/preview/datasets?project=p&name=d', { key: bob });
    expect(bobDelete.body).toMatchObject({ deleted_versions: [0] });
    expect(fs.existsSync(a.datasetFile)).toBe(true);
    const inUse = await s.call('DELETE', '/v1/preview/datasets?project=p&name=d', { key: alice });
    expect(inUse.status).toBe(409);
    expect(inUse.body.detail).toContain(own.body.id);
    expect(fs.readFileSync(a.datasetFile, 'utf8')).toContain('alice secret');
  });
});

describe('revoked keys', () => {
  it('stop working on the very next request, Bearer and Basic', async () => {
    const created = s.ctx.keys.create('alice');
    expect((await s.call('GET', '/v1/models', { key: created.key })).status).toBe(200);
    expect((await s.call('POST', '/table/query', { headers: basic(created.key), body: { project_id: 'alice/p', digest: a.tableDigest } })).status).toBe(200);
    expect(s.ctx.keys.revoke(created.prefix)).toBe(1);
    const r = await s.call('GET', '/v1/models', { key: created.key });
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ error: { message: 'Invalid or revoked API key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
    const training = await s.call('GET', '/v1/preview/models/x/checkpoints', { key: created.key });
    expect(training.status).toBe(401);
    expect(training.body).toEqual({ detail: 'Invalid or revoked API key' });
    const t = await s.call('POST', '/table/query', { headers: basic(created.key), body: { project_id: 'alice/p', digest: a.tableDigest } });
    expect(t.status).toBe(401);
    expect(t.body).toEqual({ reason: 'Invalid or revoked API key' });
    // alice's other key is unaffected.
    expect((await s.call('GET', '/v1/models', { key: alice })).status).toBe(200);
  });
});
