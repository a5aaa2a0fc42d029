// BullMQ job locks that follow the worker's announced model loads.
//
// BullMQ keeps a job "active" only while its worker renews the job's lock (lockDuration, 30 s by default), and it
// renews from a timer on the worker's event loop. A model load blocks that loop (graph build, ONNX Runtime session
// creation: tens of seconds for a real-size model), so a load longer than the lock lets it expire: another worker's
// stalled check then fails the job ("job stalled more than allowable limit"), and the loading worker's own completion
// later fails with "Missing lock for job". (Measured: a 5 s blocked load under a 2 s lock, test/hardening/
// faults-job-lock.test.ts.) With maxStalledCount above 0 the job would even run twice.
//
// So, while a load is announced (worker/model-loads.ts), every lock this worker holds is extended to the load
// timeout, the same silence the API allows a loading worker (HEARTH_LOAD_TIMEOUT): at once when the load is
// announced, before it starts blocking, for each job taken while a load is under way, and by every renewal in
// between. An announced long training step holds them for its expected time instead (the silence the API allows it). When the last load ends, the next renewal brings the locks back to the normal duration, so a worker that
// dies outside a load is still noticed by BullMQ within one lock duration.
import { LockManager, Worker, type LockManagerOptions, type LockManagerWorkerContext, type Processor, type WorkerOptions } from 'bullmq';
import type { ModelLoads } from './model-loads.js';

export class LoadAwareLockManager extends LockManager {
  constructor(
    worker: LockManagerWorkerContext,
    opts: LockManagerOptions,
    /** How long the announced stretches may block (0: none announced): ModelLoads.blockingMs. */
    private readonly blockingMs: () => number,
    /** Told the locks held after each change: the pulse thread extends them while this loop is blocked (worker/pulse.ts). */
    private readonly onLocksChanged: (locks: { jobId: string; token: string }[]) => void = () => {},
  ) {
    super(worker, opts);
    const normalMs = opts.lockDuration;
    // LockManager reads opts.lockDuration on every renewal: make it follow the loads.
    this.opts = { ...opts, get lockDuration() { return Math.max(blockingMs(), normalMs); } };
  }

  /** Renew every held lock now, for the current duration (long while a load is under way). */
  async renewAll(): Promise<void> {
    const ids = [...this.trackedJobs.keys()];
    const now = Date.now();
    for (const id of ids) {
      const tracked = this.trackedJobs.get(id)!;
      this.trackedJobs.set(id, { ...tracked, ts: now });
    }
    if (ids.length) await this.extendLocks(ids);
  }

  override trackJob(jobId: string, token: string, ts: number, shouldCreateController?: boolean) {
    const controller = super.trackJob(jobId, token, ts, shouldCreateController);
    // Taken while a load blocks (or is about to block) this loop: its fresh lock has the normal duration.
    if (this.blockingMs() > 0 && jobId) void this.extendLocks([jobId]);
    this.locksChanged();
    return controller;
  }

  override untrackJob(jobId: string): void {
    super.untrackJob(jobId);
    this.locksChanged();
  }

  private locksChanged(): void {
    this.onLocksChanged([...this.trackedJobs.entries()].map(([jobId, t]) => ({ jobId, token: t.token })));
  }
}

export interface LoadAwareWorkerOptions {
  loads: ModelLoads;
  /** Lock duration while a load is under way (the API's HEARTH_LOAD_TIMEOUT). */
  loadLockMs: number;
  /** The locks held, after each change (the pulse thread's copy). */
  onLocksChanged?: (locks: { jobId: string; token: string }[]) => void;
}

/** A BullMQ Worker whose locks follow `loads`; renewed at once whenever a load starts or ends. */
export function createLoadAwareWorker<T, R>(name: string, processor: Processor<T, R>, opts: WorkerOptions, load: LoadAwareWorkerOptions): Worker<T, R> {
  // createLockManager runs inside Worker's constructor, before a subclass's own fields exist: it reads `load`
  // from this closure.
  class LoadAwareWorker extends Worker<T, R> {
    protected override createLockManager(): void {
      this.lockManager = new LoadAwareLockManager(
        this as unknown as LockManagerWorkerContext, // what BullMQ's own createLockManager passes (its trace() typing differs)
        { lockRenewTime: this.opts.lockRenewTime!, lockDuration: this.opts.lockDuration!, workerId: this.id, workerName: this.opts.name },
        () => load.loads.blockingMs(load.loadLockMs),
        load.onLocksChanged,
      );
    }

    renewLocksNow(): Promise<void> {
      return (this.lockManager as LoadAwareLockManager).renewAll();
    }
  }
  const worker = new LoadAwareWorker(name, processor, opts);
  // Awaited by ModelLoads.during before the load starts: the long locks are in Redis before the loop blocks.
  load.loads.onChange(() => worker.renewLocksNow());
  return worker;
}
