// The model loads a worker has under way, announced to the API before they start.
// Loading a model (graph build, ONNX Runtime session creation: seconds to minutes for a real-size model) runs on
// the worker's main thread and blocks its event loop, so no heartbeat can leave from there until it ends. The worker
// therefore says "loading <model>" in a heartbeat sent *before* the load begins: its pulse thread repeats that
// heartbeat meanwhile (worker/pulse.ts: for up to HEARTH_LOAD_TIMEOUT without progress), and a worker without one is
// given HEARTH_LOAD_TIMEOUT instead of HEARTH_HEARTBEAT_TIMEOUT to speak again (src/queue/worker-directory.ts). The
// announcement also names what blocks in the API's errors and its System page. The BullMQ transport listens too: it
// extends its job locks for the load (worker/job-locks.ts).

import { withDeadline } from '../src/domain/deadline.js';
import { longestBlockingMs } from '../src/protocol/blocking-announcements.js';

/** Longest a load waits for its announcement to leave (Redis reconnecting): the load goes ahead after it. */
const ANNOUNCE_WAIT_MS = 5000;

export interface ModelLoad {
  model: string;
  /** Worker clock, when the load was announced. */
  sinceMs: number;
  /**
   * A long training step of `model` rather than a load (worker/training/step-announcements.ts): its number and how
   * long it is expected to block; the API allows that much silence, the BullMQ locks are held that long.
   */
  step?: number;
  expectedMs?: number;
}

export class ModelLoads {
  private readonly underway = new Map<symbol, ModelLoad>();
  private readonly listeners: (() => Promise<void> | void)[] = [];

  /**
   * Called when a load starts (awaited, up to ANNOUNCE_WAIT_MS, before the load begins) and when it ends: the host
   * sends a heartbeat (worker/host.ts), the BullMQ transport renews its job locks (worker/job-locks.ts).
   */
  onChange(listener: () => Promise<void> | void): void {
    this.listeners.push(listener);
  }

  private announce(): Promise<unknown> {
    // A listener that fails (Redis down) does not stop the load; the next heartbeat says it.
    return Promise.all(this.listeners.map((l) => Promise.resolve().then(l).catch(() => {})));
  }

  current(): ModelLoad[] {
    return [...this.underway.values()];
  }

  /**
   * How long the announced stretches may block: `loadMs` while a model load is under way, else the longest expected
   * training step; 0 when nothing is announced.
   */
  blockingMs(loadMs: number): number {
    return longestBlockingMs(this.underway.values(), loadMs);
  }

  /**
   * Announce a load of `model` and resolve once the announcement has been handed to the transport (the load may
   * block from then on); the returned function ends the load (announced at once; calling it again does nothing).
   */
  async begin(model: string, step?: { step: number; expectedMs: number }): Promise<() => void> {
    const key = Symbol(model);
    this.underway.set(key, { model, sinceMs: Date.now(), ...step });
    await withDeadline(this.announce(), ANNOUNCE_WAIT_MS, () => undefined);
    return () => {
      if (this.underway.delete(key)) void this.announce();
    };
  }

  /**
   * Run `load` as an announced load of `model`: the heartbeat saying so has been handed to the transport before
   * `load` starts blocking, and the one saying it ended goes out as soon as it returns or throws.
   */
  async during<T>(model: string, load: () => Promise<T>): Promise<T> {
    const end = await this.begin(model);
    try {
      return await load();
    } finally {
      end();
    }
  }
}
