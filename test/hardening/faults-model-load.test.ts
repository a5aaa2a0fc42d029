// A model load that blocks the inference worker past the heartbeat timeout (as a real-size model's graph build and
// ONNX Runtime session creation do), on real worker processes (embedded queue, generated demo model, real engine).
// The fault point `inference-model-load` holds the worker inside its announced load with its thread blocked, so no
// heartbeat can leave until the test lets it go.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { HEARTH_BIN } from '../helpers/process.js';
import { streamChat } from './faults-helpers.js';

const BASE = 'hearth/tiny-random-llama';
const HEARTBEAT_TIMEOUT_S = 2;
const body = { model: BASE, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, ignore_eos: true, temperature: 0 };

async function serverWithFaults(faultDir: string, env: Record<string, string> = {}): Promise<TestServer> {
  const home = tempHome();
  await ensureDemoModel(home);
  const s = await startServer({
    home,
    env: { HEARTH_WORKERS: 'inference:cpu', HEARTH_HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT_S), ...env },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024', HEARTH_FAULT_DIR: faultDir } },
  });
  await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'an inference worker', 30_000);
  return s;
}

/** Arm the load point, send one streaming request, and return once the worker is blocked inside the load. */
async function requestIntoBlockedLoad(s: TestServer, faultDir: string, key: string) {
  const arm = path.join(faultDir, 'inference-model-load');
  fs.rmSync(`${arm}.reached`, { force: true });
  fs.writeFileSync(arm, '');
  const outcome = streamChat(s.url, key, body);
  await waitFor(() => fs.existsSync(`${arm}.reached`), 'the worker to reach the model load', 30_000);
  return { arm, outcome, pid: Number(fs.readFileSync(`${arm}.reached`, 'utf8')), reachedAt: Date.now() };
}

describe('a model load that blocks the worker longer than the heartbeat timeout (load timeout: default 600 s)', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-load-');
  let key: string;
  const adapter = () => s.ctx.queue!.adapter as EmbeddedQueue;

  beforeAll(async () => {
    s = await serverWithFaults(faultDir);
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'inference-model-load'), { force: true });
    await s?.close();
  });

  it('a worker killed while loading fails its request at once with an error naming the load; the next worker serves', async () => {
    const { outcome, pid } = await requestIntoBlockedLoad(s, faultDir, key);
    process.kill(pid, 'SIGKILL');
    const o = await outcome; // a request that hangs fails the test by its timeout
    expect(o.broken).toBeNull();
    expect(o.done).toBe(false);
    expect(JSON.stringify(o.error)).toMatch(/the inference worker killed by SIGKILL while loading model hearth\/tiny-random-llama; retry/);
    expect(s.ctx.queue!.gateway.inFlight()).toBe(0);

    fs.rmSync(path.join(faultDir, 'inference-model-load'));
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((w) => w.pid !== pid) && adapter().pids('inference').every((p) => p !== pid), 'a respawned inference worker', 30_000);
    const after = await streamChat(s.url, key, body);
    expect(after.error).toBeNull();
    expect(after.done).toBe(true);
  }, 90_000);

  it('keeps the blocked worker and its request alive past the heartbeat timeout, and the request succeeds after the load', async () => {
    // The model is loaded in the worker now: start a fresh worker so the next request loads it again.
    const [old] = adapter().pids('inference');
    process.kill(old, 'SIGKILL');
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((w) => w.pid !== old) && adapter().pids('inference').every((p) => p !== old), 'a respawned inference worker', 30_000);

    const { arm, outcome, pid, reachedAt } = await requestIntoBlockedLoad(s, faultDir, key);
    let settled = false;
    void outcome.then(() => (settled = true));
    // Well past the heartbeat timeout and the API's once-a-second reconcile, with the worker's thread blocked.
    await waitFor(() => Date.now() - reachedAt > (HEARTBEAT_TIMEOUT_S + 2) * 1000, 'the heartbeat timeout to pass', 30_000, 100);
    const worker = s.ctx.queue!.liveWorkers('inference').find((w) => w.pid === pid);
    expect(worker, 'the loading worker is still counted live').toBeDefined();
    // Its main thread is blocked; its pulse thread repeats the heartbeat announcing the load (worker/pulse.ts).
    expect(Date.now() - worker!.lastSeenMs).toBeLessThan(HEARTBEAT_TIMEOUT_S * 1000);
    expect(worker!.loading?.map((l) => l.model)).toEqual([BASE]);
    expect(settled).toBe(false);
    // What the console's system page reads.
    const system = await s.call('GET', '/v1/system', { key });
    expect(system.body.workers.find((w: { pid: number }) => w.pid === pid)?.loading).toEqual([BASE]);

    fs.rmSync(arm);
    const o = await outcome;
    expect(o.error).toBeNull();
    expect(o.broken).toBeNull();
    expect(o.done).toBe(true);
    expect(o.chunks.length).toBeGreaterThan(0);
    // The heartbeat after the load says it ended.
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').find((w) => w.pid === pid && !w.loading), 'a heartbeat without the load', 10_000);
  }, 90_000);
});

describe('a model load that never ends (embedded, HEARTH_LOAD_TIMEOUT=4)', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-load-');
  let key: string;

  beforeAll(async () => {
    s = await serverWithFaults(faultDir, { HEARTH_LOAD_TIMEOUT: '4' });
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'inference-model-load'), { force: true });
    await s?.close();
  });

  it('fails the request once the load timeout passes, naming the load (a load that hangs)', async () => {
    const { arm, outcome } = await requestIntoBlockedLoad(s, faultDir, key);
    const o = await outcome;
    expect(o.broken).toBeNull();
    expect(o.done).toBe(false);
    expect(JSON.stringify(o.error)).toMatch(/the inference worker stopped sending heartbeats while loading model hearth\/tiny-random-llama; retry/);
    expect(s.ctx.queue!.gateway.inFlight()).toBe(0);
    fs.rmSync(arm);
  }, 60_000);
});

describe('Redis mode: a `hearth worker --redis` blocked in a model load (HEARTH_LOAD_TIMEOUT=20)', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-load-');
  const prefix = `faults-load-${crypto.randomBytes(4).toString('hex')}`;
  const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  let key: string;
  const workers: ChildProcess[] = [];
  const spawnWorker = () => {
    const w = spawn(process.execPath, [HEARTH_BIN, 'worker', '--kind', 'inference', '--redis', redisUrl], {
      env: { ...process.env, HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_QUEUE_PREFIX: prefix, HEARTH_HOME: s.home, HEARTH_MAX_CONTEXT: '1024', HEARTH_FAULT_DIR: faultDir, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    workers.push(w);
    return w;
  };

  beforeAll(async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    s = await startServer({
      home, queue: {},
      env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: prefix, HEARTH_HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT_S), HEARTH_LOAD_TIMEOUT: '20' },
    });
    key = s.key('alice');
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(path.join(faultDir, 'inference-model-load'), { force: true });
    for (const w of workers) w.kill('SIGKILL');
    await s?.close();
  });

  it('keeps the blocked worker past the heartbeat timeout and the request succeeds after the load', async () => {
    const w = spawnWorker();
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((x) => x.pid === w.pid), 'the Redis worker', 30_000);
    const { arm, outcome, reachedAt } = await requestIntoBlockedLoad(s, faultDir, key);
    await waitFor(() => Date.now() - reachedAt > (HEARTBEAT_TIMEOUT_S + 2) * 1000, 'the heartbeat timeout to pass', 30_000, 100);
    const worker = s.ctx.queue!.liveWorkers('inference').find((x) => x.pid === w.pid);
    expect(worker, 'the loading worker is still counted live').toBeDefined();
    expect(Date.now() - worker!.lastSeenMs).toBeLessThan(HEARTBEAT_TIMEOUT_S * 1000); // the pulse thread's heartbeats
    expect(worker!.loading?.map((l) => l.model)).toEqual([BASE]);
    fs.rmSync(arm);
    const o = await outcome;
    expect(o.error).toBeNull();
    expect(o.done).toBe(true);
    w.kill('SIGKILL');
  }, 90_000);

  it('a worker killed while loading fails its request before the load timeout (its pulses stopped), naming the load', async () => {
    const w = spawnWorker();
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((x) => x.pid === w.pid), 'a new Redis worker', 30_000);
    const { outcome, pid } = await requestIntoBlockedLoad(s, faultDir, key);
    expect(pid).toBe(w.pid);
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const o = await outcome;
    expect(o.broken).toBeNull();
    expect(o.done).toBe(false);
    // Its pulse thread died with it: silent for the heartbeat timeout, not the load timeout.
    expect(JSON.stringify(o.error)).toMatch(/the inference worker stopped sending heartbeats while loading model hearth\/tiny-random-llama; retry/);
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect(s.ctx.queue!.gateway.inFlight()).toBe(0);
    console.log(`[faults] Redis worker killed while loading: its request failed ${Date.now() - killedAt} ms after the kill (heartbeat timeout 2 s, load timeout 20 s)`);
  }, 90_000);
});
