// kill -9 of `hearth serve` (a real child process) while table appends and checkpoint deletes are in flight.
// After a restart the store must be intact: SQLite integrity, every table's digest recomputes from its rows,
// acknowledged writes survived, and checkpoint rows and folders match (serve sweeps orphan folders at start).
import { afterAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { checkpointsDir, dbPath } from '../../src/config/config.js';
import { Store } from '../../src/store/sqlite/store.js';
import { TableStore } from '../../src/tables/table-store.js';
import { rowDigest, tableDigest } from '../../src/tables/digest.js';
import { parseLosslessJson } from '../../src/tables/lossless-parse.js';
import { spawn } from 'node:child_process';
import { HEARTH_BIN, startServe, type ServeProcess } from '../helpers/process.js';
import { tempHome } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const KEY = `hearth_fault_${crypto.randomBytes(8).toString('hex')}`;
const ENV = { HEARTH_API_KEY: KEY, HEARTH_ENTITY: 'alice', HEARTH_WORKERS: 'none', HEARTH_RATE_LIMIT: '0' };
const PROJECT = 'alice/faults';
const running: ServeProcess[] = [];
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop('SIGKILL');
});

async function serve(home: string): Promise<ServeProcess> {
  const p = await startServe({ ...ENV, HEARTH_HOME: home });
  running.push(p);
  return p;
}

async function call(url: string, method: string, p: string, body?: unknown) {
  const res = await fetch(url + p, {
    method, headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

/** Append batches to one table until stopped; remembers the last digest the server acknowledged. */
async function appendLoop(url: string, lane: number, state: { stop: boolean; acked: Map<number, { digest: string; rows: number }> }) {
  const created = await call(url, 'POST', '/table/create', { table: { project_id: PROJECT, rows: [{ lane, i: 0, x: 0.1 }] } });
  let digest = created.body.digest as string;
  let rows = 1;
  state.acked.set(lane, { digest, rows });
  for (let n = 1; !state.stop; n++) {
    const updates = Array.from({ length: 20 }, (_, k) => ({ append: { row: { lane, i: n * 20 + k, x: 1e-5 * k, text: `row ${n}/${k} 😀`, nested: { a: [k, 1.5] } } } }));
    try {
      const r = await call(url, 'POST', '/table/update', { project_id: PROJECT, base_digest: digest, updates });
      if (r.status !== 200) throw new Error(`table update answered ${r.status}`);
      digest = r.body.digest;
      rows += 20;
      state.acked.set(lane, { digest, rows });
    } catch {
      return; // the server is gone
    }
  }
}

/** Delete checkpoints one step at a time, oldest first, until stopped. */
async function deleteLoop(url: string, modelId: string, steps: number[], state: { stop: boolean; deleted: number }) {
  for (const step of steps) {
    if (state.stop) return;
    try {
      const r = await call(url, 'DELETE', `/v1/preview/models/${modelId}/checkpoints`, { steps: [step] });
      if (r.status === 200) state.deleted++;
    } catch {
      return;
    }
  }
}

describe('kill -9 of hearth serve under writes', () => {
  it('restarts with an intact store: integrity, table digests, acknowledged writes, checkpoint rows = folders', async () => {
    const home = tempHome();
    // First run: create models through the API, then add checkpoint rows and folders as training would.
    let p = await serve(home);
    const modelIds: string[] = [];
    for (let m = 0; m < 3; m++) {
      const r = await call(p.url, 'POST', '/v1/preview/models', { project: 'p', name: `m${m}`, base_model: 'hearth/tiny-random-llama' });
      expect(r.status).toBe(200);
      modelIds.push(r.body.id);
    }
    await p.stop('SIGTERM');
    const STEPS = Array.from({ length: 300 }, (_, i) => i + 1);
    {
      const store = Store.open(dbPath(home));
      for (const modelId of modelIds) {
        store.tx(() => {
          for (const step of STEPS) {
            const dir = path.join(checkpointsDir(home), modelId, `step-${step}`);
            fs.mkdirSync(dir, { recursive: true });
            fs.writeFileSync(path.join(dir, 'adapter_config.json'), '{}');
            fs.writeFileSync(path.join(dir, 'adapter_model.safetensors'), Buffer.alloc(4096));
            store.checkpoints.insert({ id: crypto.randomUUID(), modelId, step, metrics: {}, path: dir, createdAt: new Date().toISOString() });
          }
        });
      }
      store.close();
    }

    // Second run: writes in flight, then kill -9.
    p = await serve(home);
    const state = { stop: false, deleted: 0, acked: new Map<number, { digest: string; rows: number }>() };
    const loops = [
      ...[0, 1, 2, 3].map((lane) => appendLoop(p.url, lane, state)),
      ...modelIds.map((id) => deleteLoop(p.url, id, STEPS, state)),
    ];
    // Kill once every lane has had appends acknowledged and deletes are going on (counters, not a time).
    await waitFor(() => state.acked.size === 4 && [...state.acked.values()].every((a) => a.rows >= 41) && state.deleted >= 3 * modelIds.length, 'appends and deletes in flight', 60_000, 10);
    p.child.kill('SIGKILL');
    await new Promise((r) => p.child.once('exit', r));
    state.stop = true;
    await Promise.all(loops);
    expect(state.acked.size).toBe(4);
    const totalAcked = [...state.acked.values()].reduce((a, b) => a + b.rows, 0);
    expect(totalAcked).toBeGreaterThan(4 * 21); // the kill landed while appends were going on

    // Leftovers the sweep must remove: a folder without a row, a temporary folder of an interrupted write,
    // and a folder of a model that no longer exists.
    const orphan = path.join(checkpointsDir(home), modelIds[0], 'step-9999');
    const tmp = path.join(checkpointsDir(home), modelIds[0], '.step-301.tmp-123-abcd');
    const ghostModel = path.join(checkpointsDir(home), crypto.randomUUID(), 'step-1');
    for (const d of [orphan, tmp, ghostModel]) fs.mkdirSync(d, { recursive: true });

    // Third run: the server starts, serves the acknowledged tables, and takes new writes.
    p = await serve(home);
    expect((await call(p.url, 'GET', '/v1/health')).status).toBe(200);
    for (const [lane, acked] of state.acked) {
      const q = await call(p.url, 'POST', '/table/query_stats', { project_id: PROJECT, digest: acked.digest });
      expect(q.status, `lane ${lane}`).toBe(200);
      expect(q.body.count).toBe(acked.rows);
      const more = await call(p.url, 'POST', '/table/update', { project_id: PROJECT, base_digest: acked.digest, updates: [{ append: { row: { after: lane } } }] });
      expect(more.status).toBe(200);
    }
    await p.stop('SIGTERM');

    const store = Store.open(dbPath(home));
    try {
      expect(store.db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(store.db.pragma('foreign_key_check')).toEqual([]);

      // Every stored table: digest = sha256 over its row digests, row count matches, each row body hashes to its digest.
      const tables = new TableStore(store.db);
      const versions = store.db.prepare('SELECT entity, project, digest, row_count FROM weave_tables').all() as { entity: string; project: string; digest: string; row_count: number }[];
      expect(versions.length).toBeGreaterThan(8);
      for (const v of versions) {
        const rows = [...tables.iterateRows({ entity: v.entity, project: v.project }, v.digest)];
        expect(rows.length).toBe(v.row_count);
        expect(tableDigest(rows.map((r) => r.digest))).toBe(v.digest);
        for (const r of rows) expect(rowDigest(parseLosslessJson(r.valJson))).toBe(r.digest);
      }

      // Checkpoints: no row without its folder, no folder without its row.
      const rowPaths = new Set(store.checkpoints.allPaths().map((x) => path.resolve(x)));
      for (const x of rowPaths) expect(fs.existsSync(x), x).toBe(true);
      const folders: string[] = [];
      for (const m of fs.readdirSync(checkpointsDir(home))) {
        const dir = path.join(checkpointsDir(home), m);
        if (fs.statSync(dir).isDirectory()) for (const step of fs.readdirSync(dir)) folders.push(path.resolve(dir, step));
      }
      expect(folders.filter((f) => !rowPaths.has(f))).toEqual([]);
      expect(fs.existsSync(ghostModel)).toBe(false);
      expect(rowPaths.size).toBeLessThan(3 * STEPS.length); // deletes were in flight
      expect(rowPaths.size).toBeGreaterThan(0);
    } finally {
      store.close();
    }
  }, 90_000);

  it('takes its worker processes down with it, and fails the interrupted training job at restart', async () => {
    const home = tempHome();
    const env = { HEARTH_WORKERS: 'inference:cpu,training:cpu' };
    let p = await startServe({ ...ENV, ...env, HEARTH_HOME: home, HEARTH_HEARTBEAT_INTERVAL_MS: '200' });
    running.push(p);
    await waitFor(async () => (await fetch(`${p.url}/v1/system-check`)).status === 200, 'both workers', 60_000, 200);
    const workerPids = childPids(p.child.pid!);
    expect(workerPids.length).toBe(2);

    // The inference worker has its engine loaded (and a request in flight) when the parent dies.
    expect((await call(p.url, 'POST', '/v1/chat/completions', { model: 'hearth/tiny-random-llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })).status).toBe(200);
    void call(p.url, 'POST', '/v1/chat/completions', { model: 'hearth/tiny-random-llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2000, ignore_eos: true }).catch(() => {});
    const model = (await call(p.url, 'POST', '/v1/preview/models', { project: 'p', name: 'interrupted', base_model: 'hearth/tiny-random-llama' })).body;
    const lines = Array.from({ length: 400 }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Q${i}` }, { role: 'assistant', content: `A${i}` }] }));
    const up = await fetch(`${p.url}/v1/preview/datasets?project=p&name=d`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/x-ndjson' }, body: lines.join('\n') });
    const dataUrl = ((await up.json()) as { url: string }).url;
    const job = await call(p.url, 'POST', '/v1/preview/sft-training-jobs', { model_id: model.id, training_data_url: dataUrl, config: { batch_size: 1 } });
    expect(job.status).toBe(200);
    await waitFor(async () => (await call(p.url, 'GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`)).body.data.some((e: { type: string }) => e.type === 'gradient_step'), 'training to run', 60_000, 100);

    const killedAt = Date.now();
    p.child.kill('SIGKILL');
    // The workers notice their parent is gone (IPC disconnect) and exit: no orphans left computing.
    await waitFor(() => workerPids.every((pid) => !alive(pid)), 'the workers to exit after their parent', 15_000, 50).catch((err) => {
      const left = workerPids.filter(alive).map((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
      throw new Error(`${err.message}; still running: ${left.join(' | ')}`);
    });
    console.log(`[faults] serve kill: both workers exited ${Date.now() - killedAt} ms after their parent`);

    p = await startServe({ ...ENV, ...env, HEARTH_HOME: home });
    running.push(p);
    const detail = (await call(p.url, 'GET', `/v1/preview/training-jobs/${job.body.id}`)).body;
    expect(detail).toMatchObject({ status: 'failed', error_message: expect.stringMatching(/restarted/) });
    const evs = (await call(p.url, 'GET', `/v1/preview/training-jobs/${job.body.id}/events?limit=100`)).body.data;
    expect(evs[evs.length - 1].type).toBe('training_failed');
    const dir = path.join(checkpointsDir(home), model.id);
    expect(fs.existsSync(dir) ? fs.readdirSync(dir) : []).toEqual([]); // killed mid-step: nothing was written
    await p.stop('SIGTERM');
  }, 120_000);
});

describe('a worker whose parent dies while it is still starting', () => {
  it('exits too (it missed the disconnect event while loading)', async () => {
    // A parent that starts an embedded-mode worker and is gone 50 ms later, long before the worker is ready.
    const script = `
      const { spawn } = require('node:child_process');
      const c = spawn(process.execPath, [${JSON.stringify(HEARTH_BIN)}, 'worker', '--kind', 'inference', '--ipc'], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
      console.log(c.pid);
      setTimeout(() => process.exit(0), 50);`;
    const out = await new Promise<string>((resolve) => {
      const parent = spawn(process.execPath, ['-e', script], { env: { ...process.env, HEARTH_HOME: tempHome() }, stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      parent.stdout!.on('data', (d) => (text += d));
      parent.on('exit', () => resolve(text));
    });
    const pid = Number(out.trim());
    expect(pid).toBeGreaterThan(0);
    try {
      await waitFor(() => !alive(pid), 'the orphaned worker to exit', 20_000, 100);
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 30_000);
});

function alive(pid: number): boolean {
  try {
    // A zombie (exited, not yet reaped: its parent was killed) counts as gone.
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function childPids(ppid: number): number[] {
  return fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid;
    } catch {
      return false;
    }
  });
}
