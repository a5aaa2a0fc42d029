// The machine a benchmark ran on, as printed in every bench's JSON (the project's boxes vary between
// CPU vendors from day to day, and numbers are only comparable on the same kind).
import os from 'node:os';

export function machineLabel(): string {
  const cpus = os.cpus();
  return `${cpus.length} cores ${cpus[0]?.model?.trim() ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`;
}
