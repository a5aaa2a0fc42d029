// Partitions that send no reset (run by scripts/cluster/scenarios.ts): a worker host's packets silently dropped with
// its link up, and its own interface down for 30 s and for 90 s. In these, a TCP connection with data outstanding
// does not fail by itself (the kernel retransmits with a back-off up to 120 s), so the worker rejoins only because
// its Redis connections are watched and dropped (src/protocol/redis-liveness.ts). Each cut hits one worker host
// (its inference and training worker) while it is the only inference host; checked: both of its workers are live at
// the API again within REJOIN_BOUND_MS of the fix, a request sent shortly before the fix is answered within that
// bound, a request sent as the cut began is answered or failed with the queue timeout's 503 (never held past it),
// each request ends exactly once, and each worker logs one "lost" and one "back" line.
import fs from 'node:fs';
import path from 'node:path';
import type { ClusterHarness, JobRow } from './job-scenarios.js';

export const REJOIN_BOUND_MS = 5000;

export interface PartitionHarness extends ClusterHarness {
  pidOf: (name: string) => number | undefined;
  queueTimeoutS: number;
  heartbeatTimeoutS: number;
}

export interface Cut {
  apply: () => void;
  heal: () => void;
}

const body = (base: string) => ({ model: base, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 8, ignore_eos: true, temperature: 1 });
const count = (file: string, needle: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split(needle).length - 1 : 0);

export async function partitionAndRejoin(h: PartitionHarness, host: 'w1' | 'w2', cut: Cut, outageMs: number): Promise<JobRow> {
  const names = [host, `${host}t`];
  const logs = names.map((n) => path.join(h.dir, `${n}.log`));
  const before = logs.map((f) => ({ lost: count(f, 'Redis connection lost'), back: count(f, 'Redis connection back') }));
  const livePids = async () => ((await h.call('GET', '/v1/system')).body.workers as { pid: number }[]).map((w) => w.pid);
  const pids = names.map((n) => h.pidOf(n)!);

  const cutAt = Date.now();
  cut.apply();
  let healed = false;
  try {
    // Sent as the cut begins: no inference host is left, so it waits in the queue (at most the queue timeout).
    const early = h.chat(body(h.base), (h.queueTimeoutS + 30) * 1000 + outageMs);
    const goneMs = await h.waitFor('the API to see the cut host gone', (h.heartbeatTimeoutS + 15) * 1000, async () => {
      const live = await livePids();
      return pids.every((p) => !live.includes(p)) && Date.now() - cutAt;
    }, 100);
    await h.sleep(Math.max(0, cutAt + outageMs - 3000 - Date.now()));
    // Sent 3 s before the fix: the host takes it as soon as it is back.
    const late = h.chat(body(h.base), outageMs + 60_000);
    await h.sleep(Math.max(0, cutAt + outageMs - Date.now()));
    cut.heal();
    healed = true;
    const fixAt = Date.now();
    const rejoinMs: (number | null)[] = pids.map(() => null);
    await h.waitFor('the host\'s workers live again', 60_000, async () => {
      const live = await livePids();
      pids.forEach((p, i) => {
        if (rejoinMs[i] === null && live.includes(p)) rejoinMs[i] = Date.now() - fixAt;
      });
      return rejoinMs.every((x) => x !== null);
    }, 100);
    const rejoin = rejoinMs as number[];
    const [e, l] = await Promise.all([early, late]);
    const fresh = await h.chat(body(h.base), 30_000);
    // The lines are written as the connections come back: give the "back" line a moment.
    await h.waitFor('the "back" lines', 10_000, () => logs.every((f, i) => count(f, 'Redis connection back') > before[i].back), 200).catch(() => null);
    const after = logs.map((f) => ({ lost: count(f, 'Redis connection lost'), back: count(f, 'Redis connection back') }));
    const linesOk = after.every((a, i) => a.lost - before[i].lost === 1 && a.back - before[i].back === 1);
    const earlyEndMs = e.endedMs - cutAt;
    const earlyOk = !e.hung && !e.broken && (e.done || e.status === 503 || JSON.stringify(e.error).includes('503')) && earlyEndMs <= h.queueTimeoutS * 1000 + 5000;
    const lateMs = l.endedMs - fixAt;
    const ok = Math.max(...rejoin) <= REJOIN_BOUND_MS && l.done && lateMs <= REJOIN_BOUND_MS && earlyOk && fresh.done && linesOk;
    const outcomes = [e, l, fresh];
    const failed: Record<string, number> = {};
    for (const o of outcomes.filter((x) => !x.done && !x.hung && !x.broken)) failed[String(o.status === 200 ? 'sse 503' : o.status)] = (failed[String(o.status === 200 ? 'sse 503' : o.status)] ?? 0) + 1;
    return {
      sent: 3, done: outcomes.filter((o) => o.done).length, failed, broken: outcomes.filter((o) => o.broken).length, hung: outcomes.filter((o) => o.hung).length,
      worstAfterFaultMs: Math.max(...rejoin, lateMs), boundMs: REJOIN_BOUND_MS, ok,
      notes: `outage ${(outageMs / 1000).toFixed(0)} s; API saw the host gone after ${(goneMs / 1000).toFixed(1)} s; after the fix: inference worker live in ${(rejoin[0] / 1000).toFixed(1)} s, training worker in ${(rejoin[1] / 1000).toFixed(1)} s, request sent 3 s before the fix answered ${(lateMs / 1000).toFixed(1)} s after it; request sent at the cut: ${e.done ? 'answered' : `failed ${e.status === 200 ? 'SSE 503' : e.status}`} after ${(earlyEndMs / 1000).toFixed(1)} s; log lines lost/back per worker: ${after.map((a, i) => `${a.lost - before[i].lost}/${a.back - before[i].back}`).join(', ')}`,
    };
  } finally {
    if (!healed) cut.heal();
  }
}

/**
 * The Redis host's packets silently dropped (link up) for `outageMs`: every process, the API's included, must notice
 * (one "lost" line each), refuse or fail requests as documented meanwhile (503 with Retry-After, within the
 * hand-over bound), and be back within REJOIN_BOUND_MS of the fix: the API answering from Redis again and every
 * worker live (its heartbeats read again).
 */
export async function redisHostSilent(h: PartitionHarness, cut: Cut, outageMs: number, workers: string[]): Promise<JobRow> {
  const files = ['api', ...workers].map((n) => path.join(h.dir, `${n}.log`));
  const before = files.map((f) => ({ lost: count(f, 'Redis connection lost'), back: count(f, 'Redis connection back') }));
  const pids = workers.map((n) => h.pidOf(n)!);
  const system = async () => (await h.call('GET', '/v1/system')).body as { workers: { pid: number; last_seen_ms?: number }[] };
  const cutAt = Date.now();
  cut.apply();
  let healed = false;
  try {
    // Let every process notice (a PING unanswered 2 s, then a 2 s handshake), then ask.
    await h.sleep(Math.min(outageMs - 3000, 8000));
    const during: { status: number; retryAfter: string | null; ms: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const r = await h.call('POST', '/v1/chat/completions', body(h.base)).catch((err: Error) => ({ status: 0, headers: new Headers(), body: err.message }));
      during.push({ status: r.status, retryAfter: r.headers.get('retry-after'), ms: Date.now() - t0 });
    }
    const check = await h.call('GET', '/v1/system-check').catch(() => ({ status: 0, body: null as unknown }));
    await h.sleep(Math.max(0, cutAt + outageMs - Date.now()));
    cut.heal();
    healed = true;
    const fixAt = Date.now();
    // Back: the API's system check passes (its Redis answers) and every worker is live with a heartbeat sent after the fix.
    const apiBackMs = await h.waitFor('the API\'s Redis back', 60_000, async () => (await h.call('GET', '/v1/system-check')).status === 200 && Date.now() - fixAt, 100);
    const rejoin: (number | null)[] = pids.map(() => null);
    await h.waitFor('every worker live again', 60_000, async () => {
      const live = (await system()).workers.map((w) => w.pid);
      pids.forEach((p, i) => {
        if (rejoin[i] === null && live.includes(p)) rejoin[i] = Date.now() - fixAt;
      });
      return rejoin.every((x) => x !== null);
    }, 100);
    const fresh = await Promise.all(Array.from({ length: 4 }, () => h.chat(body(h.base), 30_000)));
    const servedMs = Math.max(...fresh.map((o) => o.endedMs)) - fixAt;
    await h.waitFor('the "back" lines', 10_000, () => files.every((f, i) => count(f, 'Redis connection back') > before[i].back), 200).catch(() => null);
    const after = files.map((f) => ({ lost: count(f, 'Redis connection lost'), back: count(f, 'Redis connection back') }));
    const linesOk = after.every((a, i) => a.lost - before[i].lost === 1 && a.back - before[i].back === 1);
    const refused = during.every((d) => d.status === 503 && Number(d.retryAfter) > 0 && d.ms < 4000);
    const checkNamesQueue = check.status === 503 && JSON.stringify(check.body).includes('"failed":["queue"');
    const worst = Math.max(apiBackMs, ...(rejoin as number[]));
    const ok = worst <= REJOIN_BOUND_MS && fresh.every((o) => o.done) && refused && checkNamesQueue && linesOk;
    return {
      sent: during.length + fresh.length, done: fresh.filter((o) => o.done).length, failed: { 503: during.filter((d) => d.status === 503).length }, broken: 0, hung: fresh.filter((o) => o.hung).length,
      worstAfterFaultMs: worst, boundMs: REJOIN_BOUND_MS, ok,
      notes: `outage ${(outageMs / 1000).toFixed(0)} s; while cut: 3 requests ${during.map((d) => `${d.status}${d.retryAfter ? ` retry-after ${d.retryAfter}` : ''} in ${d.ms} ms`).join(', ')}; system-check ${check.status}${checkNamesQueue ? ' naming the queue' : ''}; after the fix: the API's Redis back in ${(apiBackMs / 1000).toFixed(1)} s, workers live in ${(rejoin as number[]).map((r) => (r / 1000).toFixed(1)).join(', ')} s, 4/4 new requests ${fresh.filter((o) => o.done).length} done by ${(servedMs / 1000).toFixed(1)} s; lines lost/back (api, ${workers.join(', ')}): ${after.map((a, i) => `${a.lost - before[i].lost}/${a.back - before[i].back}`).join(', ')}`,
    };
  } finally {
    if (!healed) cut.heal();
  }
}
