// Worker hosts without a shared filesystem (issue 33, point 1), through real HTTP on this machine: the API host's
// HEARTH_HOME and the workers' own homes are different folders, and everything a worker lacks comes over the
// artifact routes with the worker credential.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { HEARTH_BIN } from '../helpers/process.js';
import { streamChat } from './faults-helpers.js';
import { ArtifactClient, ArtifactRefusedError, ArtifactVerifyError } from '../../worker/artifacts/artifact-client.js';
import { LocalArtifacts } from '../../worker/artifacts/local-artifacts.js';
import { HostPins } from '../../worker/artifacts/host-pins.js';
import { ArtifactPathError, buildManifest } from '../../src/protocol/artifact-manifest.js';

const BASE = 'hearth/tiny-random-llama';
const TOKEN = crypto.randomBytes(24).toString('hex');
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = `artifacts-${crypto.randomBytes(4).toString('hex')}`;
const sha = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

let s: TestServer;
let key: string;
let modelDir: string;
const children: ChildProcess[] = [];
const servers: http.Server[] = [];

beforeAll(async () => {
  const home = tempHome();
  await ensureDemoModel(home);
  s = await startServer({ home, queue: {}, realTraining: true, env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: prefix, HEARTH_WORKER_TOKEN: TOKEN } });
  key = s.key('alice');
  modelDir = s.ctx.catalog.get(BASE)!.dir;
}, 60_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const x of servers) x.close();
  await s?.close();
});

const api = (route: string, query: Record<string, string>, init: RequestInit = {}, token: string | null = TOKEN) =>
  fetch(`${s.url}/v1/worker/artifacts/${route}?${new URLSearchParams(query)}`, { ...init, headers: { ...(init.headers as Record<string, string>), ...(token ? { authorization: `Bearer ${token}` } : {}) } });

async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('the artifact routes', () => {
  it('answer the worker credential only: no credential 401, a user key 403; the credential opens no user route', async () => {
    expect((await api('manifest', { path: `models/${BASE}` }, {}, null)).status).toBe(401);
    const asUser = await api('manifest', { path: `models/${BASE}` }, {}, key);
    expect(asUser.status).toBe(403);
    expect(JSON.stringify(await asUser.json())).toMatch(/worker credential/);
    expect((await s.call('GET', '/v1/preview/models?project=p', { key: TOKEN })).status).toBe(401);
    expect((await s.call('GET', '/v1/models', { key: TOKEN })).status).toBe(401);
  });

  it("a user key never reads another entity's checkpoint through them", async () => {
    const bob = (await s.call('POST', '/v1/preview/models', { key: s.key('bob'), body: { project: 'p', name: 'secret', base_model: BASE } })).body;
    const dir = path.join(s.ctx.models.modelCheckpointDir(bob.id), 'step-1');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'adapter_model.safetensors'), 'bob only');
    const rel = path.relative(s.home, dir).split(path.sep).join('/');
    for (const route of ['manifest', 'file']) expect((await api(route, { path: rel, file: 'adapter_model.safetensors' }, {}, key)).status).toBe(403);
    expect((await api('manifest', { path: rel })).status).toBe(200); // the worker credential does read it
  });

  it('list a manifest with each file sha256, and serve byte ranges', async () => {
    const res = await api('manifest', { path: `models/${BASE}` });
    expect(res.status).toBe(200);
    const manifest = (await res.json()) as { kind: string; files: { path: string; size: number; sha256: string }[] };
    expect(manifest.kind).toBe('dir');
    expect(manifest.files.length).toBeGreaterThan(1);
    for (const f of manifest.files) expect(f.sha256).toBe(sha(path.join(modelDir, f.path)));
    const big = [...manifest.files].sort((a, b) => b.size - a.size)[0];
    const part = await api('file', { path: `models/${BASE}`, file: big.path }, { headers: { range: 'bytes=100-' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 100-${big.size - 1}/${big.size}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(fs.readFileSync(path.join(modelDir, big.path)).subarray(100))).toBe(true);
    expect((await api('file', { path: `models/${BASE}`, file: big.path }, { headers: { range: `bytes=${big.size}-` } })).status).toBe(416);
  });

  it('refuse paths that leave the home folder or its artifact folders, and say so', async () => {
    for (const bad of ['../etc/passwd', '/etc/passwd', 'hearth.db', 'models/../hearth.db', 'models/../../x', 'models//x', 'models/.x', 'models\\x', 'checkpoints']) {
      const res = await api('manifest', { path: bad });
      expect(res.status, bad).toBe(400);
    }
    expect((await api('file', { path: `models/${BASE}`, file: '../../../hearth.db' })).status).toBe(400);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/hearth_artifact_refusals_total\{reason="bad_path"\} \d+/);
  });

  it("take a checkpoint upload only under checkpoints/, from its running job, verify every file, and commit it whole or not at all", async () => {
    // A running job of the model, as the API records one a worker started (no worker runs it here).
    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'upload-test', base_model: BASE } })).body;
    const jobId = crypto.randomUUID();
    const now = new Date().toISOString();
    s.store.jobs.insert({ id: jobId, entity: 'alice', modelId: model.id, kind: 'sft', status: 'running', payload: { resolved_data_path: 'train.jsonl' }, dedupKey: null, errorMessage: null, createdAt: now, startedAt: now, finishedAt: null });
    const rel = `checkpoints/${model.id}/step-1`;
    const body = Buffer.from('weights');
    const good = crypto.createHash('sha256').update(body).digest('hex');
    const put = (file: string, data: Buffer, digest: string, p = rel, job = jobId) =>
      api('file', { path: p, file, sha256: digest, job }, { method: 'PUT', body: new Uint8Array(data), headers: { 'content-type': 'application/octet-stream' } });
    const commit = (manifest: unknown, job = jobId) => api('commit', { path: rel, job }, { method: 'POST', body: JSON.stringify(manifest), headers: { 'content-type': 'application/json' } });
    const one = { path: rel, kind: 'dir', files: [{ path: 'a.bin', size: 7, sha256: good }] };

    expect((await put('x', body, good, `models/${BASE}`)).status).toBe(400); // models are not uploadable
    expect((await put('a.bin', body, good, rel, crypto.randomUUID())).status).toBe(409); // no such running job
    expect((await put('a.bin', body, good, `checkpoints/other-model/step-1`)).status).toBe(409); // not its model
    expect((await put('a.bin', body.subarray(0, 3), good)).status).toBe(422); // truncated: digest mismatch
    expect((await put('a.bin', body, good)).status).toBe(200);
    expect((await commit({ ...one, files: [{ path: '../../escape', size: 7, sha256: good }] })).status).toBe(422);
    expect((await commit({ ...one, files: [{ path: 'a.bin', size: 7, sha256: 'f'.repeat(64) }] })).status).toBe(422); // forged digest
    expect(fs.existsSync(path.join(s.home, rel))).toBe(false);
    expect((await put('a.bin', body, good)).status).toBe(200);
    expect((await put('b.bin', body, good)).status).toBe(200);
    expect((await commit(one)).status).toBe(422); // b.bin is not in the manifest
    expect(fs.existsSync(path.join(s.home, rel))).toBe(false);
    expect((await put('a.bin', body, good)).status).toBe(200);
    expect((await commit(one)).status).toBe(200);
    expect(fs.readFileSync(path.join(s.home, rel, 'a.bin'), 'utf8')).toBe('weights');
    expect((await commit(one)).status).toBe(200); // a retried commit
    // Once the job has ended (its worker presumed lost), a late upload for it is refused.
    s.store.jobs.finish(jobId, 'failed', new Date().toISOString(), 'the worker running this job stopped sending heartbeats');
    expect((await put('a.bin', body, good, `checkpoints/${model.id}/step-2`)).status).toBe(409);
  });
});

describe("a worker host's fetcher", () => {
  it('resumes a transfer cut half-way (HTTP range), verifies it, and fetches once for many waiting requests', async () => {
    // A proxy in front of the API that cuts the first transfer of every file after half its bytes.
    const cut = new Set<string>();
    let manifests = 0;
    let resumedRanges = 0;
    const target = new URL(s.url);
    const proxy = await listen((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname.endsWith('/manifest')) manifests++;
      if (req.headers.range) resumedRanges++;
      const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode!, r.headers);
        const file = url.searchParams.get('file');
        const size = Number(r.headers['content-length'] ?? 0);
        if (!url.pathname.endsWith('/file') || !file || cut.has(file) || size < 2) return void r.pipe(res);
        cut.add(file);
        let sent = 0;
        r.on('data', (chunk: Buffer) => {
          const room = Math.floor(size / 2) - sent;
          if (room <= 0) return;
          res.write(chunk.subarray(0, room));
          sent += Math.min(room, chunk.length);
          if (sent >= Math.floor(size / 2)) setTimeout(() => (res.socket?.destroy(), r.destroy()), 20);
        });
      });
      req.pipe(up);
    });
    const home = tempHome('hearth-worker-home-');
    const logs: string[] = [];
    const artifacts = new LocalArtifacts({ home, mode: 'fetch', client: new ArtifactClient(proxy, TOKEN, (m) => logs.push(m)), budgetBytes: 2 ** 40, log: (m) => logs.push(m) });
    const local = await Promise.all(Array.from({ length: 5 }, () => artifacts.localize({ home: s.home }, modelDir)));
    expect(new Set(local)).toEqual(new Set([path.join(home, 'models', BASE)]));
    expect(manifests).toBe(1); // one fetch for five waiting requests
    expect(cut.size).toBeGreaterThan(1);
    expect(resumedRanges).toBe(cut.size); // every cut file resumed with a range, not fetched again from the start
    const theirs = await buildManifest(modelDir, 'x');
    const ours = await buildManifest(local[0], 'x');
    expect(ours.files).toEqual(theirs.files);
    expect(fs.readdirSync(path.dirname(local[0])).filter((n) => n.startsWith('.'))).toEqual([]); // no staging left
    expect(logs.join('\n')).toMatch(/cut transfers resumed/);
    // Present now: used as it is, nothing asked of the API.
    await artifacts.localize({ home: s.home }, modelDir);
    expect(manifests).toBe(1);
  }, 60_000);

  /** A fake API host answering one manifest and its file bodies. */
  async function forger(manifest: unknown, files: Record<string, Buffer>): Promise<string> {
    return listen((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname.endsWith('/manifest')) return void res.end(JSON.stringify(manifest));
      const body = files[url.searchParams.get('file') ?? ''];
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-length': String(body.length) }).end(body);
    });
  }

  const fetchFrom = async (url: string, rel: string) => {
    const home = tempHome('hearth-worker-home-');
    const artifacts = new LocalArtifacts({ home, mode: 'fetch', client: new ArtifactClient(url, TOKEN, () => {}, { attempts: 6, baseDelayMs: 20 }), budgetBytes: 2 ** 40, log: () => {} });
    const apiHome = '/srv/hearth';
    return { home, result: artifacts.localize({ home: apiHome }, path.join(apiHome, rel)) };
  };

  it('refuses a forged file (digest mismatch) and a manifest path that leaves the artifact; nothing is placed', async () => {
    const rel = 'checkpoints/m/step-2';
    const data = Buffer.from('real bytes');
    const forged = await forger({ path: rel, kind: 'dir', files: [{ path: 'adapter_model.safetensors', size: data.length, sha256: crypto.createHash('sha256').update('other').digest('hex') }] }, { 'adapter_model.safetensors': data });
    const a = await fetchFrom(forged, rel);
    await expect(a.result).rejects.toBeInstanceOf(ArtifactVerifyError);
    expect(fs.existsSync(path.join(a.home, rel))).toBe(false);

    const escaping = await forger({ path: rel, kind: 'dir', files: [{ path: '../../../../evil', size: 1, sha256: 'a'.repeat(64) }] }, { '../../../../evil': Buffer.from('x') });
    const b = await fetchFrom(escaping, rel);
    await expect(b.result).rejects.toBeInstanceOf(ArtifactPathError);
    expect(fs.existsSync(path.join(b.home, rel))).toBe(false);
    expect(fs.existsSync(path.join(b.home, 'evil'))).toBe(false);

    const otherPath = await forger({ path: 'models/other', kind: 'dir', files: [] }, {});
    await expect((await fetchFrom(otherPath, rel)).result).rejects.toThrow(/manifest is for/);
  });

  it('refuses a truncated file that never completes, after bounded retries', async () => {
    const rel = 'datasets/alice/p/d/v1.jsonl';
    const data = Buffer.from('{"messages": []}\n'.repeat(10));
    const digest = crypto.createHash('sha256').update(data).digest('hex');
    let requests = 0;
    const truncating = await listen((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname.endsWith('/manifest')) return void res.end(JSON.stringify({ path: rel, kind: 'file', files: [{ path: 'v1.jsonl', size: data.length, sha256: digest }] }));
      requests++;
      res.writeHead(200, { 'content-length': String(data.length) }); // always stops after 10 bytes
      res.write(data.subarray(0, 10));
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const t = await fetchFrom(truncating, rel);
    await expect(t.result).rejects.toThrow();
    expect(requests).toBeLessThanOrEqual(12);
    expect(fs.existsSync(path.join(t.home, rel))).toBe(false);
  }, 60_000);

  it('keeps resuming a transfer that is cut again and again while each try brings it further', async () => {
    // Every try sends at most an eighth of the file, honouring the range, then cuts: 2 tries in a row without
    // progress would give up, but each try progresses, so the file completes (and is verified).
    const rel = 'datasets/alice/p/flaky/v1.jsonl';
    const data = crypto.randomBytes(64 * 1024);
    const digest = crypto.createHash('sha256').update(data).digest('hex');
    let tries = 0;
    const flaky = await listen((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname.endsWith('/manifest')) return void res.end(JSON.stringify({ path: rel, kind: 'file', files: [{ path: 'v1.jsonl', size: data.length, sha256: digest }] }));
      tries++;
      const start = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
      res.writeHead(start ? 206 : 200, { 'content-length': String(data.length - start), ...(start ? { 'content-range': `bytes ${start}-${data.length - 1}/${data.length}` } : {}) });
      res.write(data.subarray(start, Math.min(data.length, start + data.length / 8)));
      if (start + data.length / 8 >= data.length) return void res.end();
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const home = tempHome('hearth-worker-home-');
    const artifacts = new LocalArtifacts({ home, mode: 'fetch', client: new ArtifactClient(flaky, TOKEN, () => {}, { attempts: 2, baseDelayMs: 10 }), budgetBytes: 2 ** 40, log: () => {} });
    const local = await artifacts.localize({ home: '/srv/hearth' }, path.join('/srv/hearth', rel));
    expect(tries).toBe(8);
    expect(sha(local)).toBe(digest);
  }, 60_000);

  it('a checkpoint upload waits for an API host that is down (restarting) up to its wait, then commits; past it, fails saying why', async () => {
    const dir = tempHome('hearth-ckpt-');
    fs.writeFileSync(path.join(dir, 'adapter_model.safetensors'), crypto.randomBytes(1000));
    // A port nobody listens on yet: connections are refused, as while the API host restarts.
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    const received: string[] = [];
    const api = http.createServer((req, res) => {
      received.push(`${req.method} ${new URL(req.url!, 'http://x').pathname.split('/').pop()}`);
      req.resume().on('end', () => res.end('{}'));
    });
    servers.push(api);
    const url = `http://127.0.0.1:${port}`;
    const shortWait = new ArtifactClient(url, TOKEN, () => {}, { attempts: 2, baseDelayMs: 50, uploadWaitMs: 300 });
    await expect(shortWait.uploadCheckpoint('checkpoints/m/step-1', dir, 'job-1')).rejects.toThrow(/gave up after \d+ tries in \d+ s/);
    const backLater = setTimeout(() => api.listen(port, '127.0.0.1'), 1500);
    const t0 = Date.now();
    const longWait = new ArtifactClient(url, TOKEN, () => {}, { attempts: 2, baseDelayMs: 50, uploadWaitMs: 30_000 });
    await longWait.uploadCheckpoint('checkpoints/m/step-1', dir, 'job-1');
    clearTimeout(backLater);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400); // it waited for the API host rather than giving up
    expect(received).toEqual(['PUT file', 'POST commit']);
  }, 60_000);

  it('is refused with a user key', async () => {
    const home = tempHome('hearth-worker-home-');
    const artifacts = new LocalArtifacts({ home, mode: 'fetch', client: new ArtifactClient(s.url, key), budgetBytes: 2 ** 40, log: () => {} });
    await expect(artifacts.localize({ home: s.home }, modelDir)).rejects.toBeInstanceOf(ArtifactRefusedError);
  });

  /** A 1000-byte dataset file on the API host, `datasets/<folder>/d<n>/v1.jsonl`. */
  const datasetOf = (folder: string) => (n: number) => {
    const dir = path.join(s.home, 'datasets', folder, `d${n}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'v1.jsonl'), 'x'.repeat(1000));
    return path.join(dir, 'v1.jsonl');
  };

  it('evicts the least recently used fetched artifact past its budget, never a pinned one', async () => {
    const ds = datasetOf('evict');
    const home = tempHome('hearth-worker-home-');
    const artifacts = new LocalArtifacts({ home, mode: 'fetch', client: new ArtifactClient(s.url, TOKEN), budgetBytes: 2500, log: () => {} });
    const one = await artifacts.localize({ home: s.home }, ds(1));
    const unpin = artifacts.pin(one);
    const two = await artifacts.localize({ home: s.home }, ds(2));
    const three = await artifacts.localize({ home: s.home }, ds(3)); // 3000 bytes > 2500: the oldest unpinned (two) goes
    expect([fs.existsSync(one), fs.existsSync(two), fs.existsSync(three)]).toEqual([true, false, true]);
    unpin();
    await artifacts.localize({ home: s.home }, ds(2)); // fetched again; now one is the oldest and unpinned
    expect([fs.existsSync(one), fs.existsSync(two), fs.existsSync(three)]).toEqual([false, true, true]);
  });

  it("never evicts what another process of the host pinned (the inference and training workers share a home)", async () => {
    const ds = datasetOf('evict-host');
    const home = tempHome('hearth-worker-home-');
    const other = spawn('sleep', ['60']); // a live process of this host: the other worker
    children.push(other);
    const opts = { home, mode: 'fetch' as const, client: new ArtifactClient(s.url, TOKEN), budgetBytes: 2500, log: () => {} };
    const inference = new LocalArtifacts({ ...opts, pins: new HostPins(path.join(home, '.artifact-pins'), other.pid!) });
    const training = new LocalArtifacts(opts);
    const api = { home: s.home };
    const unpin = inference.pinFor(api, ds(1)); // pinned before it is localized, as the workers do
    const one = await inference.localize(api, ds(1));
    const two = await training.localize(api, ds(2));
    const three = await training.localize(api, ds(3)); // over budget: one is the oldest, but the other process holds it
    expect([fs.existsSync(one), fs.existsSync(two), fs.existsSync(three)]).toEqual([true, false, true]);
    unpin();
    await training.localize(api, ds(2));
    expect([fs.existsSync(one), fs.existsSync(two), fs.existsSync(three)]).toEqual([false, true, true]);
    // Pins of a process that is gone (a crashed worker) hold nothing.
    const pinsDir = path.join(home, '.artifact-pins');
    inference.pinFor(api, ds(3));
    other.kill('SIGKILL');
    await new Promise((resolve) => other.once('exit', resolve));
    await training.localize(api, ds(1)); // three is the oldest now, pinned only by the dead process: evicted
    expect([fs.existsSync(three), fs.existsSync(path.join(pinsDir, `${other.pid}.json`))]).toEqual([false, false]);
  });
});

describe('worker hosts with their own HEARTH_HOME (Redis mode, real engines)', () => {
  const spawnWorker = (kind: 'inference' | 'training', home: string, storage = 'fetch') => {
    const w = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', kind, '--redis', redisUrl], {
      env: {
        // fetch: the API host's folders are on this machine too, and `auto` would use them
        ...process.env, HEARTH_HOME: home, HEARTH_STORAGE: storage, HEARTH_QUEUE_PREFIX: prefix, HEARTH_API_URL: s.url, HEARTH_WORKER_TOKEN: TOKEN,
        HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024', LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(w);
    return w;
  };

  it('a training host fetches the model and data, uploads its checkpoint before training_ended, and another host serves it', async () => {
    const trainHome = tempHome('hearth-train-host-');
    const serveHome = tempHome('hearth-serve-host-');
    const trainer = spawnWorker('training', trainHome);
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid === trainer.pid), 'the training worker', 30_000);

    const model = (await s.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'remote', base_model: BASE } })).body;
    const rows = Array.from({ length: 4 }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Q${i}?` }, { role: 'assistant', content: `A${i}` }] }));
    const upload = await s.call('POST', '/v1/preview/datasets?project=p&name=remote', { key, rawBody: rows.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    const job = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: model.id, training_data_url: upload.body.url, config: { batch_size: 4 } } });
    expect(job.status).toBe(200);
    const events = await waitFor(async () => {
      const e = (await s.call('GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`, { key })).body.data as { type: string; data: Record<string, unknown> }[];
      return e.some((x) => x.type === 'training_failed' || x.type === 'training_ended') ? e : null;
    }, 'the job to end', 90_000, 100);
    expect(events.at(-1), JSON.stringify(events.at(-1))).toMatchObject({ type: 'training_ended' });

    const apiStep = path.join(s.ctx.models.modelCheckpointDir(model.id), 'step-1');
    const hostStep = path.join(trainHome, path.relative(s.home, apiStep));
    expect(s.store.checkpoints.all(model.id).map((c) => c.path)).toEqual([apiStep]);
    expect((await buildManifest(apiStep, 'x')).files).toEqual((await buildManifest(hostStep, 'x')).files); // uploaded, identical
    expect(fs.existsSync(path.join(trainHome, 'models', BASE))).toBe(true); // fetched
    expect(fs.existsSync(path.join(trainHome, 'datasets'))).toBe(true);

    const server = spawnWorker('inference', serveHome);
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((w) => w.pid === server.pid), 'the inference worker', 30_000);
    const o = await streamChat(s.url, key, { model: `wandb-artifact:///alice/p/remote:step1`, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(o.error).toBeNull();
    expect(o.done).toBe(true);
    expect((await buildManifest(path.join(serveHome, path.relative(s.home, apiStep)), 'x')).files).toEqual((await buildManifest(apiStep, 'x')).files);
    server.kill('SIGKILL');
    await waitFor(() => !s.ctx.queue!.liveWorkers('inference').some((w) => w.pid === server.pid), 'the fetching worker gone', 30_000);

    // HEARTH_STORAGE=auto (the default) on a host that sees the API host's home (here: the same machine): its
    // paths are used as they are, nothing is fetched into the worker's own home.
    const autoHome = tempHome('hearth-auto-host-');
    const auto = spawnWorker('inference', autoHome, '');
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((w) => w.pid === auto.pid), 'the auto worker', 30_000);
    const again = await streamChat(s.url, key, { model: `wandb-artifact:///alice/p/remote:step1`, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(again.error).toBeNull();
    expect(fs.readdirSync(autoHome).filter((n) => ['models', 'checkpoints'].includes(n))).toEqual([]);
  }, 150_000);
});
