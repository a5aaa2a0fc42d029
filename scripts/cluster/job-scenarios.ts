// Two cluster scenarios about training jobs' checkpoints (run by scripts/cluster/scenarios.ts, which passes in its
// process and HTTP helpers): the API host killed and restarted while training jobs run and wait, and a checkpoint
// fetched by the other worker host over a slow link that is cut half-way. Every wait is bounded in time, every loop
// in count.
import fs from 'node:fs';
import path from 'node:path';
import { buildManifest } from '../../src/protocol/artifact-manifest.js';
import type { StreamOutcome } from '../../test/hardening/faults-helpers.js';
import { setLink, shapeInto, type Topology } from './topology.js';

export interface ClusterHarness {
  topo: Topology;
  dir: string;
  base: string;
  call: (method: string, url: string, body?: unknown, raw?: { text: string; type: string }) => Promise<{ status: number; body: any; headers: Headers }>;
  waitFor: <T>(what: string, ms: number, probe: () => Promise<T | null | false> | T | null | false, every?: number) => Promise<T>;
  sleep: (ms: number) => Promise<unknown>;
  kill: (name: string) => void;
  stopped: (name: string) => Promise<void>;
  startApi: () => void;
  apiUp: () => Promise<unknown>;
  startWorker: (host: 'w1' | 'w2', kind?: 'inference' | 'training') => void;
  workerLive: (name: string) => Promise<unknown>;
  /** A chat stream to the API, bounded: still open at `limitMs` counts as hung. */
  chat: (body: Record<string, unknown>, limitMs: number) => Promise<StreamOutcome & { hung?: boolean }>;
}

/** What a scenario returns for its table row (scenarios.ts adds the name and time). */
export interface JobRow {
  sent: number;
  done: number;
  failed: Record<string, number>;
  broken: number;
  hung: number;
  /** Slowest end of an affected stream or request, after the fault. */
  worstAfterFaultMs: number | null;
  boundMs: number | null;
  ok: boolean;
  notes: string;
}

type Event = { type: string; data: Record<string, unknown> };
const TERMINAL = ['training_ended', 'training_failed'];

const sftRows = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `${tag} ${i}?` }, { role: 'assistant', content: `${tag} answer ${i % 5} `.repeat(30) }] })).join('\n');

/** Each file of a checkpoint folder, with its digest (the manifest's list). */
const filesOf = async (dir: string) => JSON.stringify((await buildManifest(dir, 'x')).files);

/** The ms of the slowest "uploaded checkpoint … in N ms" line of the training workers' logs since `fromBytes`. */
function slowestUpload(dir: string, offsets: Record<string, number>): number | null {
  let worst: number | null = null;
  for (const name of ['w1t', 'w2t']) {
    const file = path.join(dir, `${name}.log`);
    if (!fs.existsSync(file)) continue;
    const text = fs.readFileSync(file, 'utf8').slice(offsets[name] ?? 0);
    for (const m of text.matchAll(/uploaded checkpoint \S+ \(.*?\) in (\d+) ms/g)) worst = Math.max(worst ?? 0, Number(m[1]));
  }
  return worst;
}
const logSizes = (dir: string) => Object.fromEntries(['w1t', 'w2t', 'w1', 'w2'].map((n) => [n, fs.existsSync(path.join(dir, `${n}.log`)) ? fs.statSync(path.join(dir, `${n}.log`)).size : 0]));

/**
 * The API host killed (kill -9) while two training jobs run and four wait (two waiting for a trainer in the API's
 * store, which hands Redis no more jobs than there are trainers, and two queued behind their model's running job), and kept down longer than a worker's old upload retries lasted. Expected: the workers
 * keep training (they report through Redis), their checkpoint uploads wait for the API host, and after it is back
 * every accepted job ends exactly once, each succeeded job with all its gradient steps once, each model's checkpoint
 * rows and step folders the same, every copy of a checkpoint identical to the API host's, no staging left.
 */
export async function apiRestartWithJobs(h: ClusterHarness, downMs: number): Promise<JobRow> {
  const events = async (id: string) => (await h.call('GET', `/v1/preview/training-jobs/${id}/events?limit=100`)).body.data as Event[];
  // Two datasets: a second job with the same model and data would be the first one again (submissions are idempotent).
  const data = (await h.call('POST', '/v1/preview/datasets?project=p&name=api-restart', undefined, { text: sftRows(40, 'R'), type: 'application/x-ndjson' })).body;
  const again = (await h.call('POST', '/v1/preview/datasets?project=p&name=api-restart-2', undefined, { text: sftRows(40, 'S'), type: 'application/x-ndjson' })).body;
  const models: string[] = [];
  for (let i = 0; i < 4; i++) models.push((await h.call('POST', '/v1/preview/models', { project: 'p', name: `api-restart-${i}`, base_model: h.base })).body.id);
  // Submitted in this order: models 0 and 1 run first; 2 and 3 wait for a trainer; the second jobs of 0 and 1 wait
  // behind their model's first; all four in the API's store (Redis gets no more jobs than there are trainers).
  const jobs: { id: string; model: string }[] = [];
  for (const [i, model] of [...models, models[0], models[1]].entries()) {
    const res = await h.call('POST', '/v1/preview/sft-training-jobs', { model_id: model, training_data_url: (i < 4 ? data : again).url, config: { batch_size: 1 } });
    if (res.status !== 200 || jobs.some((j) => j.id === res.body.id)) throw new Error(`job not accepted as a new job: ${res.status} ${JSON.stringify(res.body)}`);
    jobs.push({ id: res.body.id, model });
  }
  const logsFrom = logSizes(h.dir);
  const running = await h.waitFor('two jobs to be half-way', 120_000, async () => {
    const evs = await Promise.all(jobs.map((j) => events(j.id)));
    const inStep = jobs.filter((_, i) => evs[i].filter((e) => e.type === 'gradient_step').length >= 20 && !evs[i].some((e) => TERMINAL.includes(e.type)));
    return inStep.length >= 2 ? inStep : null;
  }, 100);
  const faultAt = Date.now();
  h.kill('api');
  await h.stopped('api');
  await h.sleep(downMs); // longer than the ~6 s a worker's upload used to retry for
  h.startApi();
  await h.apiUp();
  const backMs = Date.now() - faultAt;
  const evs = await h.waitFor('every job to end', 240_000, async () => {
    const all = await Promise.all(jobs.map((j) => events(j.id)));
    return all.every((e) => e.some((x) => TERMINAL.includes(x.type))) ? all : null;
  }, 500);
  await h.sleep(1500); // anything a duplicate would add comes now
  const final = await Promise.all(jobs.map((j) => events(j.id)));
  const summary = final.map((e) => ({
    planned: Number(e.find((x) => x.type === 'training_started')?.data.num_sequences ?? NaN),
    steps: e.filter((x) => x.type === 'gradient_step').length,
    starts: e.filter((x) => x.type === 'training_started').length,
    terminal: e.filter((x) => TERMINAL.includes(x.type)),
  }));
  // Checkpoints: rows, folders on the API host (nothing hidden left), and every worker host's copy of each step.
  const problems: string[] = [];
  const stepsOf: Record<string, number[]> = {};
  let folders = 0;
  for (const model of models) {
    const rows = ((await h.call('GET', `/v1/preview/models/${model}/checkpoints`)).body.data as { step: number }[]).map((c) => c.step).sort((a, b) => a - b);
    stepsOf[model] = rows;
    const dir = path.join(h.dir, 'api', 'checkpoints', model);
    const names = fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
    folders += names.length;
    const want = rows.map((s) => `step-${s}`).sort();
    if (JSON.stringify(names) !== JSON.stringify(want)) problems.push(`${model}: folders ${JSON.stringify(names)}, rows ${JSON.stringify(rows)}`);
    const succeeded = jobs.filter((j, i) => j.model === model && summary[i].terminal[0]?.type === 'training_ended').length;
    if (JSON.stringify(rows) !== JSON.stringify(Array.from({ length: succeeded }, (_, i) => i + 1))) problems.push(`${model}: ${succeeded} jobs succeeded, checkpoint steps ${JSON.stringify(rows)}`);
    for (const step of want.filter((n) => names.includes(n))) {
      const theirs = await filesOf(path.join(dir, step));
      for (const host of ['w1', 'w2']) {
        const copy = path.join(h.dir, host, 'checkpoints', model, step);
        if (fs.existsSync(copy) && (await filesOf(copy)) !== theirs) problems.push(`${host}'s ${model}/${step} differs from the API host's`);
      }
    }
  }
  const succeeded = summary.filter((x) => x.terminal.length === 1 && x.terminal[0].type === 'training_ended');
  const failedJobs = summary.filter((x) => x.terminal[0]?.type === 'training_failed');
  const duplicated = summary.filter((x) => x.terminal.length > 1 || x.starts > 1).length;
  const planned = summary.reduce((n, x) => n + (Number.isFinite(x.planned) ? x.planned : 0), 0);
  const done = summary.reduce((n, x) => n + x.steps, 0);
  const stepsOk = succeeded.every((x) => x.steps === x.planned) && failedJobs.every((x) => x.steps <= x.planned);
  const reasonsOk = failedJobs.every((x) => typeof x.terminal[0].data.error_message === 'string' && x.terminal[0].data.error_message !== '');
  const slowest = slowestUpload(h.dir, logsFrom);
  const ok = duplicated === 0 && summary.every((x) => x.terminal.length === 1) && stepsOk && reasonsOk && problems.length === 0 && running.length === 2 && evs.length === jobs.length;
  const failed: Record<string, number> = {};
  if (failedJobs.length) failed.training_failed = failedJobs.length;
  return {
    sent: jobs.length, done: succeeded.length, failed, broken: 0, hung: 0, worstAfterFaultMs: backMs, boundMs: null, ok,
    notes:
      `API down ${(backMs / 1000).toFixed(1)} s with 2 jobs running, 4 queued in the API's store; jobs accepted ${jobs.length}, finished ${succeeded.length}, failed ${failedJobs.length}, duplicated ${duplicated}; ` +
      `gradient steps planned ${planned}, done ${done}${stepsOk ? ' (each once)' : ' (MISMATCH)'}; checkpoint steps ${models.map((m) => JSON.stringify(stepsOf[m])).join(' ')}, ${folders} step folders, every host's copy identical; ` +
      `slowest checkpoint upload ${slowest === null ? '?' : `${(slowest / 1000).toFixed(1)} s`} (waited for the API host)` +
      `${failedJobs.length ? `; failed: ${failedJobs.map((x) => String(x.terminal[0].data.error_message)).join(' | ')}` : ''}${problems.length ? `; PROBLEMS: ${problems.join('; ')}` : ''}`,
  };
}

/**
 * One worker host trains a checkpoint (uploaded to the API host); the other host, its link into it slowed by tbf,
 * is asked for a completion from that checkpoint, and its link is cut (down, `cutMs`) half-way through the fetch.
 * Expected: the fetch notices the stall (HEARTH_ARTIFACT_STALL_S), resumes with an HTTP range, verifies sha256, and
 * the completion succeeds; the fetched files are the API host's; no staging left.
 */
export async function checkpointOverCutLink(h: ClusterHarness, rate: string, cutMs: number): Promise<JobRow> {
  const events = async (id: string) => (await h.call('GET', `/v1/preview/training-jobs/${id}/events?limit=100`)).body.data as Event[];
  const model = (await h.call('POST', '/v1/preview/models', { project: 'p', name: 'cut-ckpt', base_model: h.base })).body;
  const data = (await h.call('POST', '/v1/preview/datasets?project=p&name=cut-ckpt', undefined, { text: sftRows(4, 'C'), type: 'application/x-ndjson' })).body;
  const job = (await h.call('POST', '/v1/preview/sft-training-jobs', { model_id: model.id, training_data_url: data.url, config: { batch_size: 2 } })).body;
  const end = await h.waitFor('the checkpoint job to end', 120_000, async () => (await events(job.id)).find((e) => TERMINAL.includes(e.type)) ?? null, 250);
  if (end.type !== 'training_ended') throw new Error(`the checkpoint job failed: ${JSON.stringify(end.data)}`);
  const rel = path.join('checkpoints', model.id, 'step-1');
  const trainer = (['w1', 'w2'] as const).find((w) => fs.existsSync(path.join(h.dir, w, rel)));
  if (!trainer) throw new Error('neither worker host has the checkpoint it trained');
  const server = trainer === 'w1' ? 'w2' : 'w1';
  if (fs.existsSync(path.join(h.dir, server, rel))) throw new Error(`${server} already has the checkpoint`);
  const apiCopy = path.join(h.dir, 'api', rel);
  const big = (await buildManifest(apiCopy, 'x')).files.sort((a, b) => b.size - a.size)[0];
  // Only the other host may serve it: the trainer's inference worker (which has the checkpoint) is stopped.
  h.kill(trainer);
  await h.stopped(trainer);
  const logFrom = logSizes(h.dir)[server];
  // A short queue: a long one (a second) makes the round trip, and so the waits of TCP's retransmissions, longer
  // than the stall timeout, and the transfer then stalls by itself (see docs/benchmarks.md).
  shapeInto(h.topo, server, ['tbf', 'rate', rate, 'burst', '32kbit', 'latency', '200ms']);
  const t0 = Date.now();
  let cutAt = 0;
  let partial = 0;
  try {
    const name = `wandb-artifact:///alice/p/cut-ckpt:step1`;
    const answer = h.chat({ model: name, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 8, temperature: 0 }, 90_000);
    const staged = path.join(h.dir, server, 'checkpoints', model.id, '.step-1.fetch', big.path);
    partial = await h.waitFor('the fetch to be a third in', 60_000, () => {
      const size = fs.existsSync(staged) ? fs.statSync(staged).size : 0;
      return size >= big.size / 3 && size < big.size ? size : null;
    }, 20);
    cutAt = Date.now();
    setLink(h.topo, server, 'down');
    await h.sleep(cutMs);
    setLink(h.topo, server, 'up');
    const outcome = await answer;
    const fetchedMs = Date.now() - t0;
    const local = path.join(h.dir, server, rel);
    const same = fs.existsSync(local) && (await filesOf(local)) === (await filesOf(apiCopy));
    const leftovers = fs.readdirSync(path.dirname(local)).filter((n) => n.startsWith('.'));
    // The worker writes JSON lines (src/domain/log-line.ts): read their messages, one a line.
    const log = fs.readFileSync(path.join(h.dir, `${server}.log`), 'utf8').slice(logFrom).split('\n').map((line) => {
      try {
        return String((JSON.parse(line) as { msg?: unknown }).msg ?? line);
      } catch {
        return line;
      }
    }).join('\n');
    const fetched = new RegExp(`fetched ${rel.replace(/[/.]/g, '\\$&')} from the API host: .*sha256 verified.*?(?:\\((\\d+) cut transfers resumed\\))?$`, 'm').exec(log);
    const resumed = Number(fetched?.[1] ?? 0);
    // Why each try was cut, as the worker logged it ("no data for 0.8 s", "fetch failed", …), counted.
    const reasons = new Map<string, number>();
    for (const m of log.matchAll(new RegExp(`download of ${rel.replace(/[/.]/g, '\\$&')}/\\S+: (.*?); retrying`, 'g'))) reasons.set(m[1], (reasons.get(m[1]) ?? 0) + 1);
    const why = [...reasons].map(([r, n]) => `${r} ×${n}`).join(', ');
    const ok = outcome.done && !outcome.hung && same && leftovers.length === 0 && resumed >= 1;
    return {
      sent: 1, done: outcome.done ? 1 : 0, failed: outcome.done || outcome.hung || outcome.broken ? {} : { [outcome.status === 200 ? 'sse' : String(outcome.status)]: 1 },
      broken: outcome.broken ? 1 : 0, hung: outcome.hung ? 1 : 0, worstAfterFaultMs: outcome.endedMs - cutAt, boundMs: 90_000, ok,
      notes:
        `${trainer} trained step 1 (${big.size} bytes of ${big.path}); ${server}'s link in at ${rate}, cut for ${cutMs / 1000} s at ${partial} bytes; ` +
        `the fetch ${fetched ? `completed, sha256 verified, ${resumed} range resume(s) (tries cut by: ${why || 'nothing logged'})` : 'did not complete'}, files ${same ? 'identical to' : 'NOT identical to'} the API host's${leftovers.length ? `, staging left: ${leftovers.join(', ')}` : ''}; ` +
        `the completion from the checkpoint ${outcome.done ? `succeeded (${outcome.chunks.length} chunks)` : `did not: ${JSON.stringify(outcome.error ?? outcome.broken ?? 'hung')}`} ${(fetchedMs / 1000).toFixed(1)} s after it was sent`,
    };
  } finally {
    setLink(h.topo, server, 'up');
    shapeInto(h.topo, server, null);
    h.startWorker(trainer);
    await h.workerLive(trainer);
  }
}
