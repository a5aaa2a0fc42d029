// Cancelling compute that blocks its thread, through shared memory. A training micro-batch on a CPU blocks the
// worker's event loop for up to minutes (8B: about 90 s here), so a cancel that travels on that loop is heard only
// after it. Another thread of the process (the worker's pulse thread, worker/pulse.ts) hears the cancel on a channel
// of its own and writes the cancelled job's token here; the compute reads it between two of its native calls
// (every ONNX Runtime run of the training engine: seconds at 8B) and stops by throwing ComputeCancelledError.
//
// Tokens, not job ids: each cancellable stretch gets a fresh number, so a cancel that arrives late for a job that has
// already ended can never stop the next one.

const cancelled = new Int32Array(new SharedArrayBuffer(4));
let current = 0;
let issued = 0;

export class ComputeCancelledError extends Error {
  constructor() {
    super('training was cancelled');
    this.name = 'ComputeCancelledError';
  }
}

/** The cell holding the cancelled stretch's token, for the thread that writes it (Int32Array over it, index 0). */
export function computeCancelMemory(): SharedArrayBuffer {
  return cancelled.buffer as SharedArrayBuffer;
}

/** Cancel the stretch `token` from another thread: writes the cell and wakes a compute waiting on it. */
export function cancelComputeIn(memory: SharedArrayBuffer, token: number): void {
  const cell = new Int32Array(memory);
  Atomics.store(cell, 0, token);
  Atomics.notify(cell, 0);
}

/** A cancellable stretch starts on this thread (one at a time: a worker trains one job at a time); its token. */
export function startCancellableCompute(): number {
  current = ++issued;
  return current;
}

/** The stretch `token` has ended: nothing stops the compute after it. */
export function endCancellableCompute(token: number): void {
  if (current === token) current = 0;
}

/** Called between two native calls of a stretch: throws once it is cancelled. */
export function throwIfComputeCancelled(): void {
  if (current !== 0 && Atomics.load(cancelled, 0) === current) throw new ComputeCancelledError();
}

/** Block this thread up to `ms`, waking early when a cancel is written (fault-points.ts's blocking delays). */
export function waitUnlessCancelled(ms: number): void {
  Atomics.wait(cancelled, 0, Atomics.load(cancelled, 0), ms);
}
