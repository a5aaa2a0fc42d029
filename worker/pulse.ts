// A worker's pulse: its heartbeats, sent again by a thread of their own while the main thread computes.
//
// Why: a model load or a training step blocks the worker's only event loop (an 8B LoRA micro-batch on a 2-core CPU:
// 90–140 s here), so its heartbeats stop. Announcing the stretch (worker/model-loads.ts) tells the API how
// long to wait, which had two costs: a host lost during a stretch was noticed only after that wait (a job's first
// step runs under its load's announcement: HEARTH_LOAD_TIMEOUT, 10 minutes), and a stretch longer than its
// announcement (a first step of eight micro-batches: ~15 minutes here) was taken for a hang and killed.
//
// The pulse thread (pulse-thread.ts) repeats the main thread's last heartbeat every heartbeat interval while
//   - a stretch is under way (an announced load, or a training job: this file counts them), and
//   - the main thread's own heartbeats have stopped, and
//   - its compute made progress within the stall limit (HEARTH_LOAD_TIMEOUT; src/runtime/compute-progress.ts counts
//     every ONNX Runtime run of the training engine and every micro-batch; a stretch's start counts too, so a
//     model load, one long native call, keeps the allowance it had).
// Its heartbeats say `pulse: true`, and the API then allows such a worker only the heartbeat timeout of silence
// (src/queue/worker-directory.ts): a host lost mid-stretch (its pulses stop) is noticed within it whatever was
// announced, a stretch that computes stays live however long it runs, and one whose compute stopped moving for the
// stall limit goes silent and is killed as a hang. In Redis mode the thread also extends the BullMQ locks of the jobs
// the worker holds (worker/job-locks.ts), so a stretch longer than its announced lock keeps its job.
//
// The thread also hears cancels of the training job under way, on a channel of its own (embedded: the same socket
// pair, read the other way; Redis: the control channel, on its own connection), and writes them into shared memory
// (src/runtime/compute-cancel.ts), which the training engine reads before each ONNX Runtime run: a micro-batch stops
// within one run (seconds at 8B) instead of at its end. The main thread hears the same cancel through its transport,
// between micro-batches (train-step.ts); whichever comes first stops the job. Results and events stay with the main
// thread.
import { Worker } from 'node:worker_threads';
import type { WorkerMessage } from '../src/protocol/messages.js';
import { computeProgressMemory, computeProgressed } from '../src/runtime/compute-progress.js';
import { computeCancelMemory, endCancellableCompute, startCancellableCompute } from '../src/runtime/compute-cancel.js';

/**
 * Where the thread's heartbeats go and its cancels come from: a socket pair with the embedded queue (fd), or the
 * installation's Redis (reports stream, control channel).
 */
export type PulseTransport =
  | { kind: 'ipc'; fd: number }
  | { kind: 'redis'; url: string; prefix: string; queue: string; lockMs: number };

/** What the thread is started with (worker_threads' workerData). */
export interface PulseThreadData {
  transport: PulseTransport;
  /** How often the thread looks, and the longest the main thread's heartbeats may lag before it sends one. */
  everyMs: number;
  /** Compute without progress this long ends the pulses (HEARTH_LOAD_TIMEOUT). */
  stallMs: number;
  /** compute-progress.ts's counter. */
  progress: SharedArrayBuffer;
  /** [stretches under way] (Int32). */
  stretches: SharedArrayBuffer;
  /** [worker clock of the main thread's last heartbeat] (BigInt64). */
  mainBeat: SharedArrayBuffer;
  /** compute-cancel.ts's cell: the thread writes the token of a cancelled job there. */
  cancel: SharedArrayBuffer;
}

/** Messages to the thread. */
export type PulseCommand =
  | { type: 'heartbeat'; message: Extract<WorkerMessage, { type: 'heartbeat' }> }
  | { type: 'locks'; locks: { jobId: string; token: string }[] }
  /** A training job runs under this cancel token (compute-cancel.ts) until its `job-ended`. */
  | { type: 'job'; jobId: string; token: number }
  | { type: 'job-ended'; jobId: string };

/** Whether the thread sends a heartbeat now (pure: the rule above). */
export function pulseDue(s: { stretches: number; sinceMainBeatMs: number; sinceProgressMs: number; everyMs: number; stallMs: number }): boolean {
  return s.stretches > 0 && s.sinceMainBeatMs > 1.5 * s.everyMs && s.sinceProgressMs < s.stallMs;
}

const ENTRY = new URL('./pulse-thread-entry.mjs', import.meta.url);

export class Pulse {
  private loads = 0;
  private jobs = 0;
  private ended = false;

  private constructor(
    private readonly thread: Worker,
    private readonly stretchCount: Int32Array,
    private readonly mainBeat: BigInt64Array,
  ) {}

  /** Start the thread; null (and one log line) where it cannot start: the worker then relies on announcements alone. */
  static start(transport: PulseTransport, everyMs: number, stallMs: number, log: (m: string) => void): Pulse | null {
    try {
      const stretches = new Int32Array(new SharedArrayBuffer(4));
      const mainBeat = new BigInt64Array(new SharedArrayBuffer(8));
      const data: PulseThreadData = {
        transport, everyMs, stallMs, progress: computeProgressMemory(),
        stretches: stretches.buffer as SharedArrayBuffer, mainBeat: mainBeat.buffer as SharedArrayBuffer, cancel: computeCancelMemory(),
      };
      const thread = new Worker(ENTRY, { workerData: data });
      thread.unref(); // never what keeps the process up
      const pulse = new Pulse(thread, stretches, mainBeat);
      thread.on('error', (err) => log(`pulse thread failed: ${err.message}; long stretches rely on their announcements`));
      thread.on('exit', () => (pulse.ended = true));
      return pulse;
    } catch (err) {
      log(`pulse thread could not start: ${(err as Error).message}; long stretches rely on their announcements`);
      return null;
    }
  }

  /**
   * Whether the thread still runs. Heartbeats claim a pulse only while it does: a worker whose thread died is allowed
   * its announcements' silence again, instead of being taken for dead in its next long stretch.
   */
  get running(): boolean {
    return !this.ended;
  }

  /** The main thread's heartbeat, just made: the one the thread repeats, and proof that the main thread is not blocked. */
  beat(message: Extract<WorkerMessage, { type: 'heartbeat' }>): void {
    Atomics.store(this.mainBeat, 0, BigInt(Date.now()));
    this.thread.postMessage({ type: 'heartbeat', message } satisfies PulseCommand);
  }

  /** How many announced loads are under way (worker/model-loads.ts). */
  setLoads(n: number): void {
    this.loads = n;
    this.publish();
  }

  /** The training job `jobId` runs from now until the returned function is called; the thread hears its cancels. */
  job(jobId: string): () => void {
    this.jobs++;
    this.publish();
    const token = startCancellableCompute();
    this.thread.postMessage({ type: 'job', jobId, token } satisfies PulseCommand);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.jobs--;
      this.publish();
      endCancellableCompute(token);
      this.thread.postMessage({ type: 'job-ended', jobId } satisfies PulseCommand);
    };
  }

  /** The BullMQ locks this worker holds (Redis mode). */
  setLocks(locks: { jobId: string; token: string }[]): void {
    this.thread.postMessage({ type: 'locks', locks } satisfies PulseCommand);
  }

  private publish(): void {
    computeProgressed(); // a stretch's start counts as progress
    Atomics.store(this.stretchCount, 0, this.loads + this.jobs);
  }

  stop(): Promise<number> {
    return this.thread.terminate();
  }
}
