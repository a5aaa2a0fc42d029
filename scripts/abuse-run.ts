// npm run test:abuse -- [--duration <s>] [--kills <n>] [--jobs <n>] [--streams <n>]
// Issue #44 item 8, the abuse suite's mixed run and restart bar, against its own `hearth serve` on 127.0.0.1
// (temporary HEARTH_HOME, embedded queue, demo model; see test/helpers/abuse-suite.ts):
//   1. for --duration seconds (default 75) bob sends every abusive request of the items 1–6 in a loop while
//      alice sends 4-token chats one after another and queues --jobs (default 3) small SFT jobs. Bars: alice's
//      chat p99 ≤ 2 s; every bob answer a 4xx or served; alice never 429 or 5xx; her jobs succeed; the server and
//      its two workers are the same processes at the end; /v1/health and /v1/system-check answer 200.
//   2. --kills times (default 3), under the same load, kill -9 the server at a random moment and start it again:
//      bar: GET /v1/health 200 and a chat answered within 10 s of the restart, alice's stored data intact.
// Prints one JSON summary (CPU model and vector flags included); exits 1 when a bar fails. Bounded: both phases
// stop by themselves (the job wait and each restart have their own limits).
import { cpuLabel, DEFAULT_SCALE, type Scale } from '../test/helpers/abuse-load.js';
import { mixedRun, restartRun, startSession, stopSession } from '../test/helpers/abuse-suite.js';
import { speedProbe } from './machine.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`);
  return v;
};
const DURATION_S = arg('duration', 75);
const KILLS = arg('kills', 3);
const JOBS = arg('jobs', 3);
const scale: Scale = { ...DEFAULT_SCALE, streams: arg('streams', DEFAULT_SCALE.streams) };
const P99_BAR_MS = 2000;
const HEALTHY_BAR_MS = 10_000;

async function main() {
  const startedAt = new Date().toISOString();
  const probeBefore = speedProbe();
  const s = await startSession(scale);
  let integrity = 'not run';
  const failed: string[] = [];
  let mixed: Awaited<ReturnType<typeof mixedRun>> | null = null;
  let restarts: Awaited<ReturnType<typeof restartRun>> = [];
  try {
    mixed = await mixedRun(s, scale, DURATION_S * 1000, JOBS, 240_000);
    const a = mixed.alice_chats;
    if (a.p99_ms === null || a.p99_ms > P99_BAR_MS) failed.push(`alice's chat p99 ${a.p99_ms} ms > ${P99_BAR_MS} ms`);
    if (Object.keys(a.failures_by_status).length) failed.push(`alice's chats failed: ${JSON.stringify(a.failures_by_status)}`);
    if (mixed.bob.bad.length) failed.push(`bob got answers neither 4xx nor served: ${mixed.bob.bad.length}`);
    const jobStates = Object.values(mixed.alice_jobs);
    if (jobStates.length !== JOBS || jobStates.some((x) => x !== 'succeeded')) failed.push(`alice's jobs: ${JSON.stringify(mixed.alice_jobs)}`);
    if (!mixed.processes.unchanged) failed.push(`processes changed: ${JSON.stringify(mixed.processes)}`);
    if (mixed.health_after !== 200 || mixed.system_check_after !== 200) failed.push(`after the load: health ${mixed.health_after}, system-check ${mixed.system_check_after}`);

    restarts = await restartRun(s, scale, KILLS, 12_000, mixed.alice_jobs, HEALTHY_BAR_MS);
    restarts.forEach((r, i) => {
      if (r.error) failed.push(`restart ${i + 1}: ${r.error}`);
      else if (r.healthy_ms === null || r.chat_ms === null || r.chat_ms > HEALTHY_BAR_MS) failed.push(`restart ${i + 1}: healthy ${r.healthy_ms} ms, chat ${r.chat_ms} ms (bar ${HEALTHY_BAR_MS} ms)`);
      if (r.data_problems.length) failed.push(`restart ${i + 1}: stored data: ${r.data_problems.join('; ')}`);
      if (r.orphaned_workers.length) failed.push(`restart ${i + 1}: workers outlived the killed server: ${r.orphaned_workers.join(', ')}`);
    });
    if (restarts.length !== KILLS) failed.push(`${restarts.length} of ${KILLS} restarts ran`);
  } catch (err) {
    failed.push(`run failed: ${(err as Error).stack ?? err}`);
  } finally {
    integrity = await stopSession(s);
  }
  if (integrity !== 'ok') failed.push(`SQLite integrity_check: ${integrity}`);
  const summary = {
    date: startedAt,
    cpu: cpuLabel(),
    speed_probe_ms: { before: probeBefore, after: speedProbe() },
    config: { duration_s: DURATION_S, kills: KILLS, alice_jobs: JOBS, scale, bars: { alice_chat_p99_ms: P99_BAR_MS, healthy_after_restart_ms: HEALTHY_BAR_MS } },
    first_start_without_load: s.firstStart,
    mixed,
    restarts,
    sqlite_integrity: integrity,
    passed: failed.length === 0,
    failed,
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  if (failed.length) {
    process.stderr.write(`server output (last 4000 chars):\n${s.server.output().slice(-4000)}\n`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  process.stderr.write(`abuse run failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
