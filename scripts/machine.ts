// The machine a benchmark ran on, as printed in every bench's JSON (the project's boxes vary between
// CPU vendors from day to day, and numbers are only comparable on the same kind).
import os from 'node:os';

export function machineLabel(): string {
  const cpus = os.cpus();
  return `${cpus.length} cores ${cpus[0]?.model?.trim() ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`;
}

/**
 * A fixed single-thread workload (1M exp/log and 32 MB of memory traffic), in ms: the project's boxes are
 * virtual machines on shared hosts whose speed drifts by up to 2x between minutes, so every bench prints
 * this next to its numbers (lower is faster). Compare runs only when their probes agree; on 2026-11-22's AMD
 * EPYC box it drifted between 19 and 48 ms within an hour.
 */
export function speedProbe(): number {
  const a = new Float64Array(1 << 20);
  const times: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    let s = 0;
    for (let i = 0; i < a.length; i++) a[i] = Math.exp(-i / a.length);
    for (let i = 0; i < a.length; i++) s += Math.log(1 + a[i]);
    a.copyWithin(0, a.length >> 1);
    times.push(performance.now() - t0 + (s < 0 ? 1 : 0));
  }
  return Math.round(times.sort((x, y) => x - y)[2] * 100) / 100;
}
