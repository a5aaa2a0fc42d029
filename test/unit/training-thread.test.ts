// The training worker's job thread (worker/training/training-thread.ts): jobs run off the main thread, which keeps
// its timers (heartbeats, lock renewals) on time however long the job's thread is blocked; one thread serves job
// after job; a cancel reaches a job mid-run; a job that stops making progress is stopped with its thread; a job that
// leaves the process much larger ends its thread.
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../src/synthetic-models/tiny-model.js';
import type { SftJobSpec } from '../../worker/training/job.js';
import type { TrainingEvent } from '../../worker/training/loop.js';
import { ThreadCancelledError, TrainingThread, type JobCallbacks, type TrainingThreadOptions } from '../../worker/training/training-thread.js';

const root = fs.mkdtempSync(path.join(tmpdir(), 'hearth-training-thread-'));
const modelDir = path.join(root, 'model');
const faultDir = path.join(root, 'faults');
const hold = path.join(faultDir, 'training-model-load');
const threads: TrainingThread[] = [];
let savedFaultDir: string | undefined;

beforeAll(() => {
  makeTinyModel({ dir: modelDir, size: 'tiny', seed: 3 });
  fs.mkdirSync(faultDir);
  // A thread copies the environment when it starts: set before any thread of this file starts.
  savedFaultDir = process.env.HEARTH_FAULT_DIR;
  process.env.HEARTH_FAULT_DIR = faultDir;
});
afterAll(async () => {
  for (const t of threads) await t.close();
  if (savedFaultDir === undefined) delete process.env.HEARTH_FAULT_DIR;
  else process.env.HEARTH_FAULT_DIR = savedFaultDir;
  fs.rmSync(root, { recursive: true, force: true });
});

let n = 0;
const job = (): SftJobSpec => ({
  kind: 'sft', modelDir, baseModelName: 'tiny', resumeFrom: null, checkpointDir: path.join(root, 'ckpt', `step-${++n}`),
  trainJsonl: JSON.stringify({ messages: [{ role: 'user', content: 'Say hi.' }, { role: 'assistant', content: 'Hi!' }] }),
});

function newThread(opts: { stallMs?: number; recycleBytes?: number } = {}): { thread: TrainingThread; lines: string[]; options: TrainingThreadOptions } {
  const lines: string[] = [];
  const options: TrainingThreadOptions = { device: 'cpu', stallMs: opts.stallMs ?? 60_000, recycleBytes: opts.recycleBytes, log: (l) => lines.push(l) };
  const thread = new TrainingThread(options);
  threads.push(thread);
  return { thread, lines, options };
}

function callbacks(isCancelled = () => false): JobCallbacks & { events: TrainingEvent[]; logs: string[] } {
  const events: TrainingEvent[] = [];
  const logs: string[] = [];
  return { events, logs, emit: (e) => events.push(e), log: (l) => logs.push(l), isCancelled };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, probe: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Arm the blocking point the thread reaches before each job's model load; returns its release. */
function holdJobs(): { reached: () => boolean; release: () => void } {
  fs.rmSync(`${hold}.reached`, { force: true });
  fs.writeFileSync(hold, '');
  return { reached: () => fs.existsSync(`${hold}.reached`), release: () => fs.rmSync(hold, { force: true }) };
}

describe('the training job thread', () => {
  it('runs jobs off the main thread: events in order, the main thread on time while the job thread is blocked; one thread for job after job', async () => {
    const { thread } = newThread();
    const first = callbacks();
    const r1 = await thread.run(job(), first);
    expect(first.events.map((e) => e.type)).toEqual(['training_started', 'gradient_step']);
    expect(r1.steps).toBe(1);
    expect(fs.existsSync(path.join(r1.checkpointDir, 'adapter_model.safetensors'))).toBe(true);
    expect(first.logs.some((l) => l.includes('engine: ONNX Runtime graphs on cpu'))).toBe(true);

    // The job thread blocked for 1.5 s (as a long step blocks it): the main thread's 50 ms timer keeps ticking.
    const held = holdJobs();
    let worstGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      worstGap = Math.max(worstGap, now - last);
      last = now;
    }, 50);
    const second = thread.run(job(), callbacks());
    await until('the job thread to block', held.reached);
    await sleep(1500);
    held.release();
    const r2 = await second;
    clearInterval(timer);
    expect(r2.steps).toBe(1);
    expect(worstGap).toBeLessThan(1000);
    expect(thread.started).toBe(1);
  }, 120_000);

  it('a cancel reaches a job whose thread is busy: the job stops at its next check, the thread serves the next job', async () => {
    const { thread } = newThread();
    const held = holdJobs();
    let cancelled = false;
    const run = thread.run(job(), callbacks(() => cancelled));
    await until('the job thread to block', held.reached);
    cancelled = true;
    await sleep(600); // the main thread passes the cancel on within its 250 ms watch
    held.release();
    await expect(run).rejects.toBeInstanceOf(ThreadCancelledError);
    const next = await thread.run(job(), callbacks());
    expect(next.steps).toBe(1);
    expect(thread.started).toBe(1);
  }, 120_000);

  it('a job that counts no progress for the stall time fails; its thread, set aside, ends once it gives up; the next job gets a fresh one', async () => {
    const { thread, options } = newThread({ stallMs: 2000 });
    const held = holdJobs();
    const stalled = job();
    const run = thread.run(stalled, callbacks());
    await until('the job thread to block', held.reached);
    await expect(run).rejects.toThrow(/the training thread made no progress for 2 s \(HEARTH_TRAIN_STALL_S\); the job is failed and the thread told to stop/);
    // A fresh thread's first job starts its backend before its first check (seconds on a busy machine).
    options.stallMs = 60_000;
    const next = thread.run(job(), callbacks());
    held.release(); // the set-aside thread goes on, meets its cancel at its first check, and writes nothing
    expect((await next).steps).toBe(1);
    expect(thread.started).toBe(2);
    await sleep(1000);
    expect(fs.existsSync(stalled.checkpointDir)).toBe(false);
  }, 120_000);

  it('a job that leaves the process larger than recycleBytes ends its thread; a failed job says why', async () => {
    const { thread, lines } = newThread({ recycleBytes: 1 });
    await thread.run(job(), callbacks());
    expect(lines.some((l) => /the job left the process .* GiB larger; its thread ends/.test(l))).toBe(true);
    await expect(thread.run({ ...job(), modelDir: path.join(root, 'no-such-model') }, callbacks())).rejects.toThrow(/no-such-model/);
    expect(thread.started).toBe(2);
  }, 120_000);
});
