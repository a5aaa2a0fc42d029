// Issue #44's probes against the API, each one request from one tenant's key, scaled to run in seconds: every
// one is refused (or served in slices) while the API keeps answering, and a stored job that cannot be handed to a
// worker fails with its reason at the next start instead of taking the API down at every start.
import { afterAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';
import { hearthSync, REPO } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { hearthMetrics } from '../../src/metrics/metrics.js';
import { RefResolver } from '../../src/weave-objects/ref-resolver.js';
import type { ObjectStore } from '../../src/weave-objects/object-store.js';
import type { TableStore } from '../../src/tables/table-store.js';
import type { TrainingPolicy } from '../../src/services/training-jobs.js';
import type { TrainingDispatcher } from '../../src/queue/port.js';
import { MAX_RL_MESSAGES } from '../../src/domain/rl-body-counts.js';
import type { RlTrainingPayload } from '../../src/protocol/training-task.js';

const BASE = 'test/base';
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
});

async function serve(opts: Parameters<typeof startServer>[0] = {}): Promise<TestServer> {
  const s = await startServer(opts);
  servers.push(s);
  return s;
}

async function post(s: TestServer, url: string, text: string, auth: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(s.url + url, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: text });
  const raw = await res.text();
  let body: unknown = raw;
  try {
    body = JSON.parse(raw);
  } catch {
    /* keep the text */
  }
  return { status: res.status, body, headers: res.headers };
}

/** GET /v1/health answers, and soon: the API is up and its event loop free. */
async function expectResponsive(s: TestServer): Promise<void> {
  const started = Date.now();
  const res = await fetch(`${s.url}/v1/health`);
  expect(res.status).toBe(200);
  expect(Date.now() - started).toBeLessThan(5_000); // generous on a loaded 2-core machine; a blocked loop took 45-59 s
}

const noEngineWork: TrainingDispatcher = { admitTraining: () => {}, enqueueTraining: async () => {}, cancelTraining: async () => {} };
const permissive: TrainingPolicy = { unsupportedRlKeys: () => [], unsupportedSftKeys: () => [],
      rlSettingsProblem: () => null, resolveSftData: async () => ({ error: 'no SFT here' }) };

describe('bounded memory per request', () => {
  it('probe 1: an RL job of millions of empty messages is refused before the parse (413 naming the setting), nothing is stored', async () => {
    const s = await serve({ container: { dispatcher: noEngineWork, policy: permissive } });
    const key = s.key('bob');
    installManifestOnly(s.home, BASE);
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'm', base_model: BASE } })).body;
    // Over 8M values (the default HEARTH_TRAINING_MAX_JSON_VALUES): 24 MiB that would parse to ~0.5 GB.
    const messages = `[${'{},'.repeat(8_000_000)}{}]`;
    const text = `{"model_id":"${model.id}","trajectory_groups":[{"trajectories":[{"messages_and_choices":${messages}}]}]}`;
    const res = await post(s, '/v1/preview/training-jobs', text, `Bearer ${key}`);
    expect(res.status).toBe(413);
    expect(res.body.detail).toMatch(/more than 8000000 JSON values \(HEARTH_TRAINING_MAX_JSON_VALUES/);
    expect(s.store.jobs.count()).toBe(0);
    await expectResponsive(s);
  }, 60_000);

  it('probe 1 (messages): more messages than a job may carry, within the value budget, answer 422 too_long before validation', async () => {
    const s = await serve({ container: { dispatcher: noEngineWork, policy: permissive } });
    const key = s.key('bob');
    installManifestOnly(s.home, BASE);
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'm', base_model: BASE } })).body;
    const text = `{"model_id":"${model.id}","trajectory_groups":[{"trajectories":[{"messages_and_choices":[${'{},'.repeat(MAX_RL_MESSAGES)}{}]}]}]}`;
    const res = await post(s, '/v1/preview/training-jobs', text, `Bearer ${key}`);
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([expect.objectContaining({ type: 'too_long', loc: ['body', 'trajectory_groups'], msg: expect.stringContaining(`at most ${MAX_RL_MESSAGES} messages`) })]);
    expect(s.store.jobs.count()).toBe(0);
  }, 60_000);

  it('probe 3: /table/create with millions of {} rows is refused before the parse in the Weave shape', async () => {
    const s = await serve();
    const key = s.key('bob');
    const rows = `[${'{},'.repeat(2_000_000)}{}]`; // over the default HEARTH_MAX_JSON_VALUES (2M)
    const res = await post(s, '/table/create', `{"table":{"project_id":"bob/p","rows":${rows}}}`, `Bearer ${key}`);
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ reason: expect.stringMatching(/more than 2000000 JSON values \(HEARTH_MAX_JSON_VALUES/) });
    await expectResponsive(s);
  }, 60_000);

  it('probe 3 (served): a large legal table is digested and stored in slices, other requests are answered meanwhile', async () => {
    const s = await serve();
    const key = s.key('bob');
    const rows = Array.from({ length: 100_000 }, (_, i) => ({ i, s: `row ${i}` }));
    let created = false;
    const started = Date.now();
    const creating = post(s, '/table/create', JSON.stringify({ table: { project_id: 'bob/p', rows } }), `Bearer ${key}`).then((r) => {
      created = true;
      return r;
    });
    // Health checks one after another while the table is created. Done in one piece, the create would hold the
    // event loop for nearly all of its time (one gap between two health answers as long as the whole create);
    // in slices, health is answered between them.
    let last = Date.now();
    let longestGap = 0;
    while (!created) {
      const res = await fetch(`${s.url}/v1/health`);
      expect(res.status).toBe(200);
      if (!created) longestGap = Math.max(longestGap, Date.now() - last);
      last = Date.now();
    }
    const res = await creating;
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.body.row_digests).toHaveLength(100_000);
    expect(longestGap, `longest wait for /v1/health ${longestGap} ms of ${took} ms`).toBeLessThan(took / 2);
    const page = await s.call('POST', '/table/query', { key, body: { project_id: 'bob/p', digest: res.body.digest, limit: 2, offset: 99_998 } });
    expect(page.body.rows.map((r: { val: unknown }) => r.val)).toEqual([rows[99_998], rows[99_999]]);
  }, 120_000);

  it('probe 2: /refs/read_batch of 1000 refs to one large object answers 413 instead of building a huge answer', async () => {
    const s = await serve();
    const key = s.key('bob');
    const big = { blob: 'x'.repeat(100_000) };
    const obj = await s.call('POST', '/obj/create', { key, body: { obj: { project_id: 'bob/p', object_id: 'big', val: big } } });
    expect(obj.status).toBe(200);
    const ref = `weave:///bob/p/object/big:${obj.body.digest}`;
    const res = await s.call('POST', '/refs/read_batch', { key, body: { refs: Array(1000).fill(ref) } }); // 100 MB of answer
    expect(res.status).toBe(413);
    expect(res.body.reason).toMatch(/exceed 67108864 characters of JSON in one answer/);
    const few = await s.call('POST', '/refs/read_batch', { key, body: { refs: Array(10).fill(ref) } });
    expect(few.status).toBe(200);
    expect(few.body.vals).toEqual(Array(10).fill(big));
    await expectResponsive(s);
  }, 60_000);

  it('probe 2: a batch resolves each distinct ref once and parses each stored object once', () => {
    let reads = 0;
    const objects = { read: () => (reads++, { valJson: '{"a":[1,2,3],"b":"x"}' }) } as unknown as ObjectStore;
    const resolver = new RefResolver(objects, {} as TableStore, 'bob');
    const ref = 'weave:///bob/p/object/o:abc';
    const vals = resolver.readBatch([...Array(499).fill(ref), ...Array(500).fill(`${ref}/key/a`), `${ref}/key/b`]);
    expect(vals).toHaveLength(1000);
    expect(vals[0]).toBe('{"a":[1,2,3],"b":"x"}');
    expect(vals[998]).toBe('[1,2,3]');
    expect(vals[999]).toBe('"x"');
    expect(reads).toBe(1);
  });
});

describe('crash-safe intake', () => {
  it('a restart after jobs that cannot be handed over is healthy at once, and those jobs fail with their reason', async () => {
    const home = tempHome();
    installManifestOnly(home, BASE);
    const env = { HEARTH_TRAINING_MAX_JSON_VALUES: '1000', HEARTH_WORKERS: 'training:cpu' };
    // The store as a crashed API left it: jobs stored, one of them mid-hand-over.
    const before = await startServer({ home, env: { HEARTH_WORKERS: 'none' } });
    const key = before.key('bob');
    const modelOf = async (name: string) => (await before.call('POST', '/v1/preview/models', { key, body: { project: 'p', name, base_model: BASE } })).body.id as string;
    // What a crashed or older server may have left in the table: any JSON, typed as the store would read it.
    const plant = (modelId: string, payload: unknown) => {
      const id = crypto.randomUUID();
      before.store.jobs.insert({ id, entity: 'bob', modelId, kind: 'rl', status: 'queued', payload: payload as RlTrainingPayload, dedupKey: null, errorMessage: null, createdAt: new Date().toISOString(), startedAt: null, finishedAt: null });
      return id;
    };
    const plan = { steps: 1 };
    const group = (messages: unknown[]) => ({ trajectory_groups: [{ trajectories: [{ messages_and_choices: messages, reward: 1 }], metadata: plan }], experimental_config: null });
    const huge = plant(await modelOf('huge'), group(Array(5000).fill({}))); // over twice the (test-sized) value budget
    const unparsable = plant(await modelOf('unparsable'), group([]));
    before.store.db.prepare('UPDATE training_jobs SET payload = ? WHERE id = ?').run('{"trajectory_groups": [', unparsable);
    const crashed = plant(await modelOf('crashed'), group([]));
    fs.writeFileSync(path.join(home, 'dispatching-job'), crashed); // the hand-over the killed process was in
    const fine = plant(await modelOf('fine'), group([{ role: 'user', content: 'hi' }]));
    await before.close();

    const s = await serve({
      home, env, realTraining: false, container: { policy: permissive },
      queue: { workerEnv: { HEARTH_WORKER_HANDLERS: path.join(REPO, 'test/fixtures/queue-handlers.ts'), HEARTH_HEARTBEAT_INTERVAL_MS: '200', LOG_LEVEL: 'warn' } },
    });
    await expectResponsive(s);
    const jobOf = (id: string) => s.store.jobs.getById(id)!;
    await waitFor(() => [huge, unparsable, crashed].every((id) => jobOf(id).status === 'failed'), 'the undispatchable jobs failed', 30_000);
    expect(jobOf(huge).errorMessage).toMatch(/more than 2000 JSON values/);
    expect(jobOf(unparsable).errorMessage).toMatch(/not valid JSON/);
    expect(jobOf(crashed).errorMessage).toMatch(/stopped while handing this job to a worker/);
    expect(fs.existsSync(path.join(home, 'dispatching-job'))).toBe(false);
    // The scheduler went on: the good job runs to its end on the real (test-double) worker.
    await waitFor(() => jobOf(fine).status === 'succeeded', 'the good job succeeded', 60_000);
    await expectResponsive(s);
  }, 120_000);
});

describe('lesser items', () => {
  it('/metrics shows no model ids unless the metrics key is presented', async () => {
    const modelId = crypto.randomUUID();
    hearthMetrics.tokensGenerated.inc({ model: modelId }, 3);
    const open = await serve();
    const text = await (await fetch(`${open.url}/metrics`)).text();
    expect(text).toContain('hearth_tokens_generated_total');
    expect(text).not.toContain(modelId);

    const keyed = await serve({ env: { HEARTH_METRICS_KEY: 'scrape-secret' } });
    expect(await (await fetch(`${keyed.url}/metrics`)).text()).not.toContain(modelId);
    expect(await (await fetch(`${keyed.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).text()).not.toContain(modelId);
    expect(await (await fetch(`${keyed.url}/metrics`, { headers: { authorization: 'Bearer scrape-secret' } })).text()).toContain(`model="${modelId}"`);
  });

  it('a Host name the server was not configured for is refused (DNS rebinding); loopback names and IPs pass', async () => {
    const s = await serve();
    const { port } = new URL(s.url);
    const get = (host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, path: '/v1/health', headers: { host } }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
    const refused = await get(`rebind.attacker.example:${port}`);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).detail).toMatch(/HEARTH_ALLOWED_HOSTS/);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `10.0.0.7:${port}`]) expect((await get(host)).status, host).toBe(200);

    const listed = await serve({ env: { HEARTH_ALLOWED_HOSTS: 'hearth.internal' } });
    const listedPort = new URL(listed.url).port;
    const viaName = await new Promise<number>((resolve, reject) => {
      http.request({ host: '127.0.0.1', port: listedPort, path: '/v1/health', headers: { host: 'hearth.internal' } }, (res) => resolve(res.statusCode!)).on('error', reject).end();
    });
    expect(viaName).toBe(200);
  });

  it('an address presenting unknown keys is limited (429 with retry-after), other checks unaffected before that', async () => {
    const s = await serve({ env: { HEARTH_AUTH_FAILURE_LIMIT: '5' } });
    const good = s.key('alice');
    for (let i = 0; i < 4; i++) expect((await s.call('GET', '/v1/preview/models', { key: `hearth_guess${i}` })).status).toBe(401);
    expect((await s.call('GET', '/v1/preview/models', { key: good })).status).toBe(200); // successes cost nothing
    expect((await s.call('GET', '/v1/preview/models', { key: 'hearth_guess4' })).status).toBe(401); // the 5th failure
    const limited = await s.call('GET', '/v1/preview/models', { key: 'hearth_guess5' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body.detail).toMatch(/invalid API key from this address/);
    // While limited, the address's keys are not looked at (a 200 for a good key would tell a guesser it found one).
    expect((await s.call('GET', '/v1/preview/models', { key: good })).status).toBe(429);
    // A missing key is no guess: it still answers 401.
    expect((await s.call('GET', '/v1/preview/models')).status).toBe(401);
  });

  it('HEARTH_HOME is created 0700 and its files 0600', () => {
    const home = path.join(tempHome(), 'home');
    const created = hearthSync(['keys', 'create', '--entity', 'alice'], { HEARTH_HOME: home });
    expect(created.status, created.stderr).toBe(0);
    expect(fs.statSync(home).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(home, 'hearth.db')).mode & 0o777).toBe(0o600);
  });

  it('a worker upload over HEARTH_WORKER_UPLOAD_LIMIT answers 413 and leaves no partial file', async () => {
    const token = 'w'.repeat(40);
    const s = await serve({ env: { HEARTH_WORKER_TOKEN: token, HEARTH_WORKER_UPLOAD_LIMIT: '1000' } });
    installManifestOnly(s.home, BASE);
    const model = (await s.call('POST', '/v1/preview/models', { key: s.key('alice'), body: { project: 'p', name: 'up', base_model: BASE } })).body;
    const jobId = crypto.randomUUID();
    const now = new Date().toISOString();
    s.store.jobs.insert({ id: jobId, entity: 'alice', modelId: model.id, kind: 'sft', status: 'running', payload: { resolved_data_path: 'train.jsonl' }, dedupKey: null, errorMessage: null, createdAt: now, startedAt: now, finishedAt: null });
    const put = (bytes: Buffer) => {
      const query = new URLSearchParams({ path: `checkpoints/${model.id}/step-1`, file: 'a.bin', sha256: crypto.createHash('sha256').update(bytes).digest('hex'), job: jobId });
      return fetch(`${s.url}/v1/worker/artifacts/file?${query}`, { method: 'PUT', body: new Uint8Array(bytes), headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' } });
    };
    const over = await put(Buffer.alloc(5000, 1));
    expect(over.status).toBe(413);
    expect((await over.json()).detail).toMatch(/HEARTH_WORKER_UPLOAD_LIMIT/);
    expect((await put(Buffer.alloc(1000, 1))).status).toBe(200);
  });
});
