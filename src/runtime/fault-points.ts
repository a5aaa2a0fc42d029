// Fault-injection points, for the fault tests: they make a race (a kill during a checkpoint write) happen
// at a chosen point instead of by luck. A test sets HEARTH_FAULT_DIR in a worker's environment and arms a
// point by creating the file <dir>/<point>; a worker reaching an armed point writes <dir>/<point>.reached
// (its pid) and waits there until the arm file is removed. Without HEARTH_FAULT_DIR (production), a point
// costs one environment lookup.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { computeProgressed } from './compute-progress.js';
import { throwIfComputeCancelled, waitUnlessCancelled } from './compute-cancel.js';

export type FaultPoint =
  /** Checkpoint files written and synced in the temporary folder, not yet renamed into place. */
  | 'checkpoint-before-rename'
  /** Checkpoint folder renamed into place, not yet reported to the API. */
  | 'checkpoint-after-rename'
  /**
   * An inference worker has announced a model load and is about to load it. Reached with faultPointBlocking: the
   * wait blocks the event loop, as graph build and session creation do, so no heartbeat leaves meanwhile.
   */
  | 'inference-model-load'
  /** A training worker has announced its job's load (worker/training/worker-handler.ts); blocking, as above. */
  | 'training-model-load'
  /**
   * A training step is about to run (after training_started and after each gradient_step, once any announcement
   * for it has left). Reached with faultDelayBlocking: while armed, every step blocks the thread for the
   * milliseconds the arm file says, as a long step's compute does.
   */
  | 'training-step'
  /** Each micro-batch of a step or a measuring pass is about to run (worker/training/train-step.ts): faultDelayBlocking, as above. */
  | 'training-micro-batch';

/** Points that throw instead of waiting (injectedError): the arm file's text is the error message. */
export type ErrorPoint =
  /** An inference worker's next ONNX Runtime run fails with this message (a device fault's text, e.g. "CUDA out of memory"). */
  'inference-run-error';

/** The message of an armed error point, disarming it (it fires once), else null. Costs one environment lookup when unarmed. */
export function injectedError(point: ErrorPoint): string | null {
  const dir = process.env.HEARTH_FAULT_DIR;
  if (!dir) return null;
  const arm = join(dir, point);
  if (!existsSync(arm)) return null;
  const message = readFileSync(arm, 'utf8');
  rmSync(arm, { force: true });
  return message;
}

/** The arm file of `point` when the point is armed (after recording that it was reached), else null. */
function reached(point: FaultPoint): string | null {
  const dir = process.env.HEARTH_FAULT_DIR;
  if (!dir) return null;
  const arm = join(dir, point);
  if (!existsSync(arm)) return null;
  writeFileSync(`${arm}.reached`, String(process.pid));
  return arm;
}

/** Wait at an armed point; the event loop keeps running (heartbeats, other requests). */
export async function faultPoint(point: FaultPoint): Promise<void> {
  const arm = reached(point);
  if (!arm) return;
  while (existsSync(arm)) await sleep(20);
}

/**
 * At an armed point, block the thread for the arm file's milliseconds (each time it is reached while armed), counting
 * compute progress every 100 ms and stopping when the stretch is cancelled, as a real step's ONNX Runtime runs do
 * (compute-progress.ts, compute-cancel.ts).
 */
export function faultDelayBlocking(point: FaultPoint): void {
  const arm = reached(point);
  if (!arm) return;
  const ms = Number(readFileSync(arm, 'utf8'));
  const until = Date.now() + (Number.isFinite(ms) && ms > 0 ? ms : 0);
  for (let left = until - Date.now(); left > 0; left = until - Date.now()) {
    throwIfComputeCancelled();
    waitUnlessCancelled(Math.min(100, left));
    computeProgressed();
  }
  throwIfComputeCancelled();
}

/** Wait at an armed point with the thread blocked: nothing else of the process runs until it is disarmed. */
export function faultPointBlocking(point: FaultPoint): void {
  const arm = reached(point);
  if (!arm) return;
  const cell = new Int32Array(new SharedArrayBuffer(4));
  while (existsSync(arm)) Atomics.wait(cell, 0, 0, 20);
}
