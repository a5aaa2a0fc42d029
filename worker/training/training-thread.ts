// The training worker's thread for jobs (job-thread.ts runs in it). A step is synchronous compute, minutes long
// for an 8B base on a CPU: on the worker's main thread it would hold back the heartbeats, the BullMQ lock renewals
// and the cancel messages until it ended, and the API would declare the worker dead mid-step. On a thread of its
// own the main thread stays free for them.
//
// One thread serves job after job (starting one costs a second or more: modules, the TF.js backend, ONNX Runtime),
// except after a job that left the process much larger than it found it (an 8B base's pieces, the engine's
// sessions, TF.js's wasm heap, garbage not yet collected: 9.7 GiB after an 8B job): that thread is ended, which
// returns its memory at once, and the next job starts a fresh one.
import { Worker } from 'node:worker_threads';
import type { TrainingJobSpec } from './job.js';
import type { TrainingEvent, TrainingResult } from './loop.js';

/** What the thread is started with (structured-cloned). */
export interface ThreadInput {
  /** The worker's --device (training-device.ts). */
  device: string;
}

/** One job for the thread; `control` is shared. */
export interface JobMessage {
  type: 'job';
  spec: TrainingJobSpec;
  /** Int32 cells: CANCEL (set by the main thread), PROGRESS (counted by the thread). */
  control: SharedArrayBuffer;
}

/** Control cell: 1 once the job is to stop at its next check (between micro-batches and steps). */
export const CANCEL = 0;
/** Control cell: the thread's count of its cancellation checks, its proof of progress. */
export const PROGRESS = 1;

/** What the thread sends back, in order; a job's `result` or `failed` last. */
export type ThreadMessage =
  /** The thread took the job (a fresh thread first loads its modules: that time is not the job's). */
  | { type: 'begun' }
  | { type: 'log'; line: string }
  | { type: 'event'; event: TrainingEvent }
  | { type: 'result'; result: TrainingResult }
  | { type: 'failed'; message: string; stack?: string; cancelled: boolean };

export class ThreadCancelledError extends Error {
  constructor() {
    super('training was cancelled');
  }
}

export interface JobCallbacks {
  emit: (event: TrainingEvent) => void;
  log: (line: string) => void;
  isCancelled: () => boolean;
}

export interface TrainingThreadOptions {
  device: string;
  /**
   * A job that counts no progress (no cancellation check, no event) for this long fails and its thread is set aside
   * (HEARTH_TRAIN_STALL_S): the worker's heartbeats no longer say whether the compute is alive.
   */
  stallMs: number;
  /** A job that leaves the process's resident memory this much larger ends its thread (default 512 MiB). */
  recycleBytes?: number;
  /** Lines the thread says outside a job. */
  log: (line: string) => void;
}

/** How often the main thread passes a cancel on and looks at the job's progress. */
const WATCH_MS = 250;
const ENTRY = new URL('./job-thread-entry.mjs', import.meta.url);

export class TrainingThread {
  private thread: Worker | null = null;
  private exited: Promise<void> = Promise.resolve();
  /** The job in flight on `thread`: it gets that thread's messages. */
  private current: ((m: ThreadMessage | { type: 'exit'; error: Error }) => void) | null = null;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: TrainingThreadOptions) {}

  /** Threads started so far (a fresh one after each recycle, stall or crash). */
  started = 0;

  /** Run `spec` on the thread, after the jobs handed over before it. */
  run(spec: TrainingJobSpec, job: JobCallbacks): Promise<TrainingResult> {
    const next = this.queue.then(() => this.runNow(spec, job));
    this.queue = next.catch(() => {});
    return next;
  }

  /** End the thread (its job, if any, fails). */
  async close(): Promise<void> {
    await this.thread?.terminate();
    await this.exited;
  }

  private ensureThread(): Worker {
    if (this.thread) return this.thread;
    const workerData: ThreadInput = { device: this.opts.device };
    const thread = new Worker(ENTRY, { workerData });
    thread.unref(); // the worker's transport keeps the process alive; an idle thread must not keep it from exiting
    this.started++;
    this.thread = thread;
    let error: Error | null = null;
    thread.on('message', (m: ThreadMessage) => {
      if (this.thread === thread) return this.current ? this.current(m) : m.type === 'log' && this.opts.log(m.line);
      // A thread set aside after a stall: once its job gives up (it was told to cancel) it is idle, and ends.
      if (m.type === 'result' || m.type === 'failed') void thread.terminate();
    });
    // An uncaught error in the thread (a wasm abort outside the job's try): the thread then exits.
    thread.on('error', (err) => void (error = err));
    this.exited = new Promise((resolve) => thread.once('exit', (code) => {
      if (this.thread === thread) {
        this.thread = null;
        this.current?.({ type: 'exit', error: error ?? new Error(`the training thread exited (code ${code}) before its job ended`) });
      }
      resolve();
    }));
    return thread;
  }

  private async runNow(spec: TrainingJobSpec, job: JobCallbacks): Promise<TrainingResult> {
    const thread = this.ensureThread();
    const rssBefore = process.memoryUsage.rss();
    const control = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
    const outcome = await new Promise<{ result: TrainingResult } | { error: Error }>((settle) => {
      let progress = 0;
      let progressAt = Date.now();
      let begun = false;
      const done = (o: { result: TrainingResult } | { error: Error }) => {
        clearInterval(watch);
        this.current = null;
        settle(o);
      };
      const watch = setInterval(() => {
        if (job.isCancelled()) Atomics.store(control, CANCEL, 1);
        const now = Atomics.load(control, PROGRESS);
        if (now !== progress || !begun) [progress, progressAt] = [now, Date.now()];
        else if (Date.now() - progressAt > this.opts.stallMs) {
          // Stopping a thread that is inside native code (an ONNX Runtime run, a wasm compile) aborts the process
          // when that code returns to a thread being torn down; so the stuck thread is set aside, told to cancel,
          // and ended once it gives up; the next job gets a fresh thread.
          Atomics.store(control, CANCEL, 1);
          this.thread = null;
          done({ error: new Error(`the training thread made no progress for ${Math.round(this.opts.stallMs / 1000)} s (HEARTH_TRAIN_STALL_S); the job is failed and the thread told to stop`) });
        }
      }, WATCH_MS);
      this.current = (m) => {
        if (m.type === 'begun') begun = true;
        else if (m.type === 'log') job.log(m.line);
        else if (m.type === 'event') {
          Atomics.add(control, PROGRESS, 1);
          job.emit(m.event);
        } else if (m.type === 'result') done({ result: m.result });
        else if (m.type === 'exit') done({ error: m.error });
        else {
          const error = m.cancelled ? new ThreadCancelledError() : new Error(m.message);
          if (m.stack && !m.cancelled) error.stack = m.stack;
          done({ error });
        }
      };
      const message: JobMessage = { type: 'job', spec, control: control.buffer as SharedArrayBuffer };
      thread.postMessage(message);
    });
    const grown = process.memoryUsage.rss() - rssBefore;
    if (this.thread === thread && grown > (this.opts.recycleBytes ?? 512 * 2 ** 20)) {
      // Idle now (its job has ended), so ending it is safe.
      this.opts.log(`[training] the job left the process ${(grown / 2 ** 30).toFixed(2)} GiB larger; its thread ends (memory returned) and the next job starts a fresh one`);
      await thread.terminate();
      await this.exited;
    }
    if ('result' in outcome) return outcome.result;
    throw outcome.error;
  }
}
