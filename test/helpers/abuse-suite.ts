// Issue #44 item 8, the suite's two runs against a real `hearth serve` (embedded queue, one inference and one
// training worker, the generated demo model, a temporary HEARTH_HOME, a loopback port):
//   - mixedRun: bob abuses (test/helpers/abuse-load.ts) while alice chats and trains; what alice saw, what bob got,
//     and whether any process exited or was replaced;
//   - restartRun: under the same load, kill -9 the server at random moments and time its way back to healthy
//     (GET /v1/health 200 and a chat answered), checking alice's stored data after each restart.
// Both return records; the callers (scripts/abuse-run.ts, test/hardening/abuse-mixed.test.ts) judge the bars.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { dbPath } from '../../src/config/config.js';
import { freePort, startServe, type ServeProcess } from './process.js';
import {
  alive, call, DEMO, makeKeys, newAliceRecord, newBobTally, prepareBob, quantile, queueAliceJobs, runAliceChats, runBob,
  waitForJobs, workerPids, type AliceRecord, type JobTimes, type BobSetup, type BobTally, type Scale,
} from './abuse-load.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Session {
  home: string;
  port: string;
  url: string;
  keys: { alice: string; bob: string };
  server: ServeProcess;
  bobSetup: BobSetup;
  /** Alice's stored things, read back after every restart. */
  aliceData: AliceData;
  /** Server output of earlier (killed) processes, for a failure's report. */
  earlierOutput: string[];
  /** The first start, without load: ms to the "listening" line and to /v1/system-check 200. */
  firstStart: { listening_ms: number; workers_ms: number };
}

interface AliceData {
  tableDigest: string;
  rows: unknown[];
  objectDigest: string;
  objectVal: unknown;
  modelId: string;
}

const serveEnv = (home: string, port: string) => ({ HEARTH_HOME: home, HOST: '127.0.0.1', PORT: port, HEARTH_WORKERS: 'inference:cpu,training:cpu' });

async function waitForWorkers(url: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await fetch(`${url}/v1/system-check`).catch(() => null);
    await r?.text();
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`workers did not come up within ${timeoutMs} ms`);
    await sleep(250);
  }
}

/** A new HEARTH_HOME with alice's and bob's keys, `hearth serve` on it, and both tenants' stored things. */
export async function startSession(scale: Scale): Promise<Session> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-abuse-mixed-'));
  const keys = makeKeys(home);
  const port = String(await freePort());
  const t0 = Date.now();
  const server = await startServe(serveEnv(home, port), 60_000);
  const listening = Date.now() - t0;
  await waitForWorkers(server.url, 90_000);
  const firstStart = { listening_ms: listening, workers_ms: Date.now() - t0 };
  // The first chat loads the model into the worker: not part of any measurement.
  const warm = await call(server.url, keys.alice, 'POST', '/v1/chat/completions', { model: DEMO, messages: [{ role: 'user', content: 'warm up' }], max_tokens: 4 });
  if (warm.status !== 200) throw new Error(`warm-up chat: ${warm.status} ${JSON.stringify(warm.body)}`);
  const bobSetup = await prepareBob(server.url, keys.bob, 1_000_000);
  const rows = Array.from({ length: 50 }, (_, i) => ({ i, text: `alice row ${i}` }));
  const table = await call(server.url, keys.alice, 'POST', '/table/create', { table: { project_id: 'alice/keep', rows } });
  const objectVal = { note: 'alice keeps this', n: [1, 2, 3] };
  const obj = await call(server.url, keys.alice, 'POST', '/obj/create', { obj: { project_id: 'alice/keep', object_id: 'kept', val: objectVal } });
  const model = await call(server.url, keys.alice, 'POST', '/v1/preview/models', { project: 'keep', name: 'kept', base_model: DEMO });
  if (table.status !== 200 || obj.status !== 200 || model.status !== 200) throw new Error('alice\'s stored data could not be written');
  return {
    home, port, url: server.url, keys, server, bobSetup, earlierOutput: [], firstStart,
    aliceData: { tableDigest: table.body.digest, rows, objectDigest: obj.body.digest, objectVal, modelId: model.body.id },
  };
}

/** Stop the server (bounded), run SQLite's integrity check on its store, remove the home; the check's answer. */
export async function stopSession(s: Session): Promise<string> {
  await Promise.race([s.server.stop('SIGTERM'), sleep(15_000)]);
  if (s.server.child.exitCode === null && s.server.child.signalCode === null) s.server.child.kill('SIGKILL');
  try {
    return integrityCheck(s.home);
  } catch (err) {
    return `integrity check failed: ${(err as Error).message}`;
  } finally {
    fs.rmSync(s.home, { recursive: true, force: true });
  }
}

/** Alice's stored things as she wrote them (table rows, object, model, finished jobs): the problems found. */
async function checkAliceData(s: Session, finishedJobs: Record<string, string>): Promise<string[]> {
  const problems: string[] = [];
  const d = s.aliceData;
  const q = await call(s.url, s.keys.alice, 'POST', '/table/query', { project_id: 'alice/keep', digest: d.tableDigest });
  if (q.status !== 200 || JSON.stringify(q.body.rows?.map((r: { val: unknown }) => r.val)) !== JSON.stringify(d.rows)) problems.push(`table: ${q.status} ${JSON.stringify(q.body).slice(0, 200)}`);
  const o = await call(s.url, s.keys.alice, 'POST', '/obj/read', { project_id: 'alice/keep', object_id: 'kept', digest: d.objectDigest });
  if (o.status !== 200 || JSON.stringify(o.body.obj?.val) !== JSON.stringify(d.objectVal)) problems.push(`object: ${o.status} ${JSON.stringify(o.body).slice(0, 200)}`);
  const m = await call(s.url, s.keys.alice, 'GET', `/v1/preview/models/${d.modelId}`);
  if (m.status !== 200 || m.body.id !== d.modelId) problems.push(`model: ${m.status} ${JSON.stringify(m.body).slice(0, 200)}`);
  for (const [id, status] of Object.entries(finishedJobs)) {
    const j = await call(s.url, s.keys.alice, 'GET', `/v1/preview/training-jobs/${id}`);
    if (j.body?.status !== status) problems.push(`job ${id}: was ${status}, now ${j.status} ${JSON.stringify(j.body).slice(0, 200)}`);
  }
  return problems;
}

export interface MixedResult {
  duration_s: number;
  alice_chats: {
    ok: number; p50_ms: number | null; p90_ms: number | null; p99_ms: number | null; max_ms: number | null; over_1s: number; over_2s: number;
    failures_by_status: Record<string, number>; failures: AliceRecord['failures'];
    /** Alice's slowest chats (ms) with bob's requests running meanwhile, by name. */
    slowest: { ms: number; at_s: number; bob_meanwhile: string[] }[];
  };
  alice_jobs: Record<string, string>;
  alice_job_times: Record<string, JobTimes>;
  /** Bob's accepted training jobs by their state once alice's have ended. */
  bob_jobs_by_state: Record<string, number>;
  bob: BobTally;
  /** How long each of bob's requests took (the streams: all 50 together), p50 and max. */
  bob_request_ms: Record<string, { p50: number | null; max: number | null }>;
  processes: { before: { server: number; workers: { kind: string; pid: number }[] }; after: { server_alive: boolean; workers: { kind: string; pid: number }[] }; unchanged: boolean };
  health_after: number;
  system_check_after: number;
}

/** Bob abuses for `durationMs` while alice chats and queues `aliceJobs` small SFT jobs; then her jobs are awaited. */
export async function mixedRun(s: Session, scale: Scale, durationMs: number, aliceJobs: number, jobsTimeoutMs: number): Promise<MixedResult> {
  const serverPid = s.server.child.pid!;
  const before = { server: serverPid, workers: workerPids(serverPid) };
  const deadline = Date.now() + durationMs;
  const until = () => Date.now() >= deadline;
  const alice = newAliceRecord();
  const bob = newBobTally();
  const started = Date.now();
  // Alice's jobs go in while bob's load runs: one at the start, the others spread over the first half.
  const jobIds: string[] = [];
  const aliceTraining = (async () => {
    for (let i = 0; i < aliceJobs; i++) {
      if (i) await sleep(durationMs / 2 / aliceJobs);
      jobIds.push(...(await queueAliceJobs(s.url, s.keys.alice, 1)));
    }
  })();
  await Promise.all([runBob(s.url, s.keys.bob, s.bobSetup, scale, until, bob), runAliceChats(s.url, s.keys.alice, until, alice), aliceTraining]);
  const duration = (Date.now() - started) / 1000;
  const after = { server_alive: alive(serverPid) && s.server.child.exitCode === null, workers: workerPids(serverPid) };
  const health = await call(s.url, s.keys.alice, 'GET', '/v1/health');
  const check = await call(s.url, s.keys.alice, 'GET', '/v1/system-check');
  const jobs = await waitForJobs(s.url, s.keys.alice, jobIds, jobsTimeoutMs);
  const bobJobs: Record<string, number> = {};
  for (const id of new Set(bob.jobIds)) {
    const st = (await call(s.url, s.keys.bob, 'GET', `/v1/preview/training-jobs/${id}`)).body?.status ?? 'unknown';
    bobJobs[st] = (bobJobs[st] ?? 0) + 1;
  }
  const xs = alice.latenciesMs;
  const slowest = xs
    .map((ms, i) => ({ ms, start: alice.startsMs[i] }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 5)
    .map(({ ms, start }) => ({
      ms: Math.round(ms),
      at_s: Math.round((start - started) / 100) / 10,
      bob_meanwhile: [...new Set(bob.spans.filter((sp) => sp.start < start + ms && sp.end > start).map((sp) => sp.name))],
    }));
  const bobMs: Record<string, { p50: number | null; max: number | null }> = {};
  for (const name of new Set(bob.spans.map((sp) => sp.name))) {
    const ds = bob.spans.filter((sp) => sp.name === name).map((sp) => sp.end - sp.start);
    bobMs[name] = { p50: quantile(ds, 0.5), max: quantile(ds, 1) };
  }
  bob.spans = []; // the attribution above is what the summary keeps of them
  return {
    duration_s: Math.round(duration * 10) / 10,
    alice_chats: {
      ok: xs.length, p50_ms: quantile(xs, 0.5), p90_ms: quantile(xs, 0.9), p99_ms: quantile(xs, 0.99), max_ms: quantile(xs, 1),
      over_1s: xs.filter((x) => x > 1000).length, over_2s: xs.filter((x) => x > 2000).length,
      failures_by_status: alice.failuresByStatus, failures: alice.failures, slowest,
    },
    alice_jobs: jobs.states,
    alice_job_times: jobs.times,
    bob_jobs_by_state: bobJobs,
    bob,
    bob_request_ms: bobMs,
    processes: { before, after, unchanged: after.server_alive && JSON.stringify(after.workers) === JSON.stringify(before.workers) && before.workers.length === 2 },
    health_after: health.status,
    system_check_after: check.status,
  };
}

export interface RestartRecord {
  killed_after_load_ms: number;
  /** From the new process's start: its "listening" line, GET /v1/health 200, /v1/system-check 200, alice's chat 200. */
  listening_ms: number | null;
  healthy_ms: number | null;
  workers_ms: number | null;
  chat_ms: number | null;
  orphaned_workers: number[];
  data_problems: string[];
  /** /v1/system-check's last answer other than 200 after the restart (what it waited for). */
  system_check_last?: string;
  error?: string;
}

/**
 * `kills` times: under bob's and alice's load, wait a random 2–`maxWaitMs` ms, kill -9 the server, start it again
 * on the same home and port, and time it until GET /v1/health is 200 and alice's chat is answered.
 */
export async function restartRun(s: Session, scale: Scale, kills: number, maxWaitMs: number, finishedJobs: Record<string, string>, healthyWithinMs: number): Promise<RestartRecord[]> {
  const records: RestartRecord[] = [];
  let stop = false;
  const until = () => stop;
  const bob = newBobTally();
  const alice = newAliceRecord();
  const load = Promise.all([runBob(s.url, s.keys.bob, s.bobSetup, scale, until, bob), runAliceChats(s.url, s.keys.alice, until, alice, () => false)]);
  try {
    for (let k = 0; k < kills; k++) {
      const wait = 2000 + Math.floor(Math.random() * Math.max(0, maxWaitMs - 2000));
      await sleep(wait);
      const rec: RestartRecord = { killed_after_load_ms: wait, listening_ms: null, healthy_ms: null, workers_ms: null, chat_ms: null, orphaned_workers: [], data_problems: [] };
      records.push(rec);
      const old = s.server;
      const workers = workerPids(old.child.pid!).map((w) => w.pid);
      await old.stop('SIGKILL');
      s.earlierOutput.push(old.output());
      // The killed server's workers notice their parent is gone and exit; any still here after 5 s is an orphan
      // (reported, then ended: they are this run's processes).
      const orphanDeadline = Date.now() + 5000;
      while (workers.some(alive) && Date.now() < orphanDeadline) await sleep(100);
      rec.orphaned_workers = workers.filter(alive);
      for (const pid of rec.orphaned_workers) process.kill(pid, 'SIGKILL');

      const t0 = Date.now();
      try {
        s.server = await startServe(serveEnv(s.home, s.port), 60_000);
        rec.listening_ms = Date.now() - t0;
      } catch (err) {
        rec.error = `restart failed: ${(err as Error).message.slice(0, 2000)}`;
        break;
      }
      const limit = t0 + Math.max(60_000, healthyWithinMs * 3);
      while (Date.now() < limit) {
        if (rec.healthy_ms === null && (await call(s.url, s.keys.alice, 'GET', '/v1/health')).status === 200) rec.healthy_ms = Date.now() - t0;
        if (rec.healthy_ms !== null && rec.chat_ms === null) {
          const c = await call(s.url, s.keys.alice, 'POST', '/v1/chat/completions', { model: DEMO, messages: [{ role: 'user', content: 'back?' }], max_tokens: 4 });
          if (c.status === 200) rec.chat_ms = Date.now() - t0;
        }
        if (rec.healthy_ms !== null && rec.workers_ms === null) {
          const check = await call(s.url, s.keys.alice, 'GET', '/v1/system-check');
          if (check.status === 200) rec.workers_ms = Date.now() - t0;
          else rec.system_check_last = `${check.status} ${JSON.stringify(check.body).slice(0, 300)}`;
        }
        if (rec.chat_ms !== null && rec.workers_ms !== null) break;
        await sleep(100);
      }
      rec.data_problems = await checkAliceData(s, finishedJobs);
    }
  } finally {
    stop = true;
    await load;
  }
  return records;
}

/** SQLite's own check of the store after the runs (the server stopped). */
function integrityCheck(home: string): string {
  const db = new Database(dbPath(home), { readonly: true });
  try {
    return String((db.prepare('PRAGMA integrity_check').get() as Record<string, unknown>).integrity_check);
  } finally {
    db.close();
  }
}
