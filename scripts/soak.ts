// npm run soak -- --duration <s> --concurrency <n> [--requests <max>] [--warmup <s>] [--jobs <n>]
// A bounded soak test on loopback: starts its own `hearth serve` (temporary HEARTH_HOME, embedded queue with one
// inference and one training worker, the generated demo model), runs mixed traffic from <n> closed-loop clients —
// streaming chat completions, table appends, training-job polling (a few tiny SFT jobs), checkpoint listing —
// until the duration or the request count is reached, then stops the server and prints JSON: errors by kind
// (429s apart: they are the limits working), p50/p99 latency per operation, RSS of the server and its workers
// over time (/proc/<pid>/status VmRSS) and RSS growth after warm-up.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dbPath } from '../src/config/config.js';
import { Store } from '../src/store/sqlite/store.js';
import { ApiKeys } from '../src/services/api-keys.js';
import { startServe as startServeProcess } from '../test/helpers/process.js';
import { machineLabel } from './machine.js';

const arg = (name: string, fallback: string | null) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const DURATION_S = Number(arg('duration', '60'));
const CONCURRENCY = Number(arg('concurrency', '32'));
const MAX_REQUESTS = arg('requests', null) === null ? Infinity : Number(arg('requests', null));
const WARMUP_S = Number(arg('warmup', String(Math.min(30, Math.round(DURATION_S / 4)))));
const JOBS = Number(arg('jobs', '3'));
const SAMPLE_EVERY_MS = 5000;
const MODEL = 'hearth/tiny-random-llama';
for (const [name, v] of [['duration', DURATION_S], ['concurrency', CONCURRENCY], ['warmup', WARMUP_S], ['jobs', JOBS]] as const) {
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`);
}

const quantile = (xs: number[], p: number) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))] * 10) / 10;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- the server under test: `hearth serve` as users run it (embedded queue, both workers) ----

const startServe = (home: string) => startServeProcess({ HEARTH_HOME: home, HOST: '127.0.0.1', HEARTH_WORKERS: 'inference:cpu,training:cpu' }, 60_000);

/** RSS in MiB of a process, or null when it is gone. */
function rssMb(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

/** The worker children of `pid` by kind (from their command line). */
function workerPids(pid: number): { kind: string; pid: number }[] {
  const found: { kind: string; pid: number }[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== pid) continue;
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const k = argv.indexOf('--kind');
      if (k >= 0) found.push({ kind: argv[k + 1], pid: Number(entry) });
    } catch {
      /* exited meanwhile */
    }
  }
  return found;
}

// ---- traffic ----

interface Stats {
  latencies: Map<string, number[]>;
  errors: Map<string, number>;
  limited: Map<string, number>;
  requests: number;
}

class HttpFailure extends Error {
  constructor(readonly kind: string, readonly status: number) {
    super(kind);
  }
}

async function request(url: string, key: string, method: string, p: string, body?: unknown, raw?: { text: string; type: string }) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  let payload: string | undefined;
  if (raw) {
    headers['content-type'] = raw.type;
    payload = raw.text;
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(url + p, { method, headers, body: payload });
  const text = await res.text();
  if (res.status !== 200) throw new HttpFailure(`http_${res.status}`, res.status);
  return JSON.parse(text);
}

/** One streaming chat completion; fails on an SSE error event or a stream without [DONE]. */
async function chatStream(url: string, key: string, i: number) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `Soak request ${i}: tell me something.` }], max_tokens: 24, ignore_eos: true, temperature: 1, stream: true }),
  });
  if (res.status !== 200) {
    await res.text();
    throw new HttpFailure(`http_${res.status}`, res.status);
  }
  const text = await res.text();
  if (text.includes('data: {"error"')) throw new HttpFailure('sse_error_event', 200);
  if (!text.trimEnd().endsWith('data: [DONE]')) throw new HttpFailure('sse_without_done', 200);
}

async function main() {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-soak-'));
  const store = Store.open(dbPath(home));
  const keys = new ApiKeys(store, null);
  const clientKeys = Array.from({ length: CONCURRENCY }, () => keys.create('soak').key); // per-client rate buckets
  store.close();

  const server = await startServe(home);
  const stats: Stats = { latencies: new Map(), errors: new Map(), limited: new Map(), requests: 0 };
  const rss: { t_s: number; server_mb: number | null; workers: Record<string, number | null> }[] = [];
  const t0 = Date.now();
  const deadline = t0 + DURATION_S * 1000;
  let stop = false;
  const stopAll = () => {
    stop = true;
  };
  process.once('SIGINT', stopAll);

  const sample = () => {
    const workers: Record<string, number | null> = {};
    for (const w of workerPids(server.child.pid!)) workers[w.kind] = rssMb(w.pid);
    rss.push({ t_s: Math.round((Date.now() - t0) / 100) / 10, server_mb: rssMb(server.child.pid!), workers });
  };
  try {
    const setupKey = clientKeys[0];
    // Wait for both workers (the first chat completion loads the model).
    for (let tries = 0; ; tries++) {
      const r = await fetch(`${server.url}/v1/system-check`);
      await r.text();
      if (r.status === 200) break;
      if (tries > 120) throw new Error('workers did not come up within 60 s');
      await sleep(500);
    }
    const model = await request(server.url, setupKey, 'POST', '/v1/preview/models', { project: 'soak', name: 'soaked', base_model: MODEL });
    const rows = Array.from({ length: 8 }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `Q${i}?` }, { role: 'assistant', content: `A${i}` }] }));
    const jobIds: string[] = [];
    let jobsCreated = 0;
    sample();
    const sampler = setInterval(sample, SAMPLE_EVERY_MS);

    const record = (op: string, ms: number) => {
      if (!stats.latencies.has(op)) stats.latencies.set(op, []);
      stats.latencies.get(op)!.push(ms);
    };
    const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

    // A few tiny SFT jobs spread over the run (one model: they train one after another).
    const createJob = async (key: string, n: number) => {
      const upload = await request(server.url, key, 'POST', `/v1/preview/datasets?project=soak&name=data-${n}`, undefined, { text: rows.join('\n'), type: 'application/x-ndjson' });
      const job = await request(server.url, key, 'POST', '/v1/preview/sft-training-jobs', { model_id: model.id, training_data_url: upload.url, config: { batch_size: 4, learning_rate: 1e-3 + n * 1e-4 } });
      jobIds.push(job.id);
    };

    const client = async (c: number) => {
      const key = clientKeys[c];
      let tableDigest: string | null = null;
      for (let i = 0; !stop; i++) {
        if (Date.now() >= deadline || stats.requests >= MAX_REQUESTS) return;
        stats.requests++;
        // Mix: half chat streams, a quarter table appends, the rest polling and listing.
        const roll = (c * 7 + i) % 8;
        const dueJob = jobsCreated < JOBS && Date.now() - t0 >= (jobsCreated * DURATION_S * 1000) / Math.max(1, JOBS);
        const op = dueJob && c === 0 ? 'training_job_create' : roll < 4 ? 'chat_stream' : roll < 6 ? 'table_append' : roll === 6 ? 'training_job_poll' : 'checkpoint_list';
        const started = performance.now();
        try {
          switch (op) {
            case 'training_job_create':
              jobsCreated++;
              await createJob(key, jobsCreated);
              break;
            case 'chat_stream':
              await chatStream(server.url, key, i);
              break;
            case 'table_append': {
              const updates = Array.from({ length: 5 }, (_, k) => ({ append: { row: { client: c, i, k, score: Math.random(), text: `row ${i}.${k}` } } }));
              if (!tableDigest) tableDigest = (await request(server.url, key, 'POST', '/table/create', { table: { project_id: 'soak/tables', rows: [{ client: c }] } })).digest;
              tableDigest = (await request(server.url, key, 'POST', '/table/update', { project_id: 'soak/tables', base_digest: tableDigest, updates })).digest;
              break;
            }
            case 'training_job_poll': {
              const id = jobIds[i % Math.max(1, jobIds.length)];
              if (id) {
                await request(server.url, key, 'GET', `/v1/preview/training-jobs/${id}`);
                await request(server.url, key, 'GET', `/v1/preview/training-jobs/${id}/events?limit=100`);
              } else await request(server.url, key, 'GET', '/v1/models');
              break;
            }
            case 'checkpoint_list':
              await request(server.url, key, 'GET', `/v1/preview/models/${model.id}/checkpoints?limit=10&order=desc`);
              break;
          }
          record(op, performance.now() - started);
        } catch (err) {
          const kind = err instanceof HttpFailure ? err.kind : `network: ${(err as Error).message}`;
          if (err instanceof HttpFailure && err.status === 429) bump(stats.limited, op);
          else bump(stats.errors, `${op} ${kind}`);
          if (err instanceof HttpFailure && err.status === 429) await sleep(200);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, c) => client(c)));
    const elapsedS = (Date.now() - t0) / 1000;
    clearInterval(sampler);
    sample();

    // Jobs: how did they end (bounded wait for the last one)?
    const jobStates: Record<string, number> = {};
    for (const id of jobIds) {
      const detail = await request(server.url, clientKeys[0], 'GET', `/v1/preview/training-jobs/${id}`);
      jobStates[detail.status] = (jobStates[detail.status] ?? 0) + 1;
    }

    const after = rss.filter((x) => x.t_s >= WARMUP_S);
    const growth = (pick: (x: (typeof rss)[number]) => number | null | undefined) => {
      const xs = after.map(pick).filter((v): v is number => typeof v === 'number');
      if (xs.length < 2) return null;
      const head = quantile(xs.slice(0, 3), 0.5)!;
      const tail = quantile(xs.slice(-3), 0.5)!;
      return Math.round(((tail - head) / head) * 1000) / 10;
    };
    const ops: Record<string, unknown> = {};
    for (const [op, xs] of stats.latencies) ops[op] = { ok: xs.length, p50_ms: quantile(xs, 0.5), p99_ms: quantile(xs, 0.99), rate_limited_429: stats.limited.get(op) ?? 0 };
    const errorCount = [...stats.errors.values()].reduce((a, b) => a + b, 0);
    const result = {
      date: new Date().toISOString(),
      machine: machineLabel(),
      config: { duration_s: DURATION_S, concurrency: CONCURRENCY, max_requests: Number.isFinite(MAX_REQUESTS) ? MAX_REQUESTS : null, warmup_s: WARMUP_S, jobs: JOBS },
      elapsed_s: Math.round(elapsedS * 10) / 10,
      requests: stats.requests,
      throughput_rps: Math.round((stats.requests / elapsedS) * 10) / 10,
      errors_total: errorCount,
      errors: Object.fromEntries(stats.errors),
      rate_limited_429_total: [...stats.limited.values()].reduce((a, b) => a + b, 0),
      ops,
      training_jobs: jobStates,
      rss_mb: { columns: ['t_s', 'server', 'inference_worker', 'training_worker'], samples: rss.map((x) => [x.t_s, x.server_mb, x.workers.inference ?? null, x.workers.training ?? null]) },
      rss_growth_after_warmup_pct: { server: growth((x) => x.server_mb), inference_worker: growth((x) => x.workers.inference), training_worker: growth((x) => x.workers.training) },
    };
    // One line per RSS sample keeps the printout readable.
    process.stdout.write(`${JSON.stringify(result, null, 2).replace(/\[\s+([\d.]+|null),\s+([\d.]+|null),\s+([\d.]+|null),\s+([\d.]+|null)\s+\]/g, '[$1, $2, $3, $4]')}\n`);
    process.exitCode = errorCount ? 1 : 0;
  } finally {
    // Graceful stop, bounded; then the temporary home goes.
    const exited = new Promise((r) => server.child.once('exit', r));
    server.child.kill('SIGTERM');
    await Promise.race([exited, sleep(15_000).then(() => server.child.kill('SIGKILL'))]);
    fs.rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`soak failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
