// Fault-injection points, for the fault tests: they make a race (a kill during a checkpoint write) happen
// at a chosen point instead of by luck. A test sets HEARTH_FAULT_DIR in a worker's environment and arms a
// point by creating the file <dir>/<point>; a worker reaching an armed point writes <dir>/<point>.reached
// (its pid) and waits there until the arm file is removed. Without HEARTH_FAULT_DIR (production), a point
// costs one environment lookup.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export type FaultPoint =
  /** Checkpoint files written and synced in the temporary folder, not yet renamed into place. */
  | 'checkpoint-before-rename'
  /** Checkpoint folder renamed into place, not yet reported to the API. */
  | 'checkpoint-after-rename';

export async function faultPoint(point: FaultPoint): Promise<void> {
  const dir = process.env.HEARTH_FAULT_DIR;
  if (!dir) return;
  const arm = join(dir, point);
  if (!existsSync(arm)) return;
  writeFileSync(`${arm}.reached`, String(process.pid));
  while (existsSync(arm)) await sleep(20);
}
