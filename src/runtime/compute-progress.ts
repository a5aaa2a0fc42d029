// Compute progress, counted in shared memory so that another thread of the process can read it while this one is
// blocked in compute (worker/pulse.ts). A training step on a CPU blocks the worker's event loop for minutes (an 8B
// step: about two on this project's 2-core machines), so nothing on that loop can say it is still working; a
// counter that the compute bumps synchronously can.
//
// Who counts: every ONNX Runtime run of the training engine (worker/training/graph/graph-session.ts: one layer's
// forward or backward, seconds at 8B), every micro-batch (worker/training/train-step.ts), and the start of every
// announced stretch. One atomic add each.

const cells = new Int32Array(new SharedArrayBuffer(4));

/** Some compute finished: the pulse thread sees the count move. */
export function computeProgressed(): void {
  Atomics.add(cells, 0, 1);
}

/** The counter's memory, for the thread that watches it (read with Atomics.load on an Int32Array over it). */
export function computeProgressMemory(): SharedArrayBuffer {
  return cells.buffer as SharedArrayBuffer;
}
