// Parses `nvidia-smi --query-gpu=<NVIDIA_QUERY_FIELDS> --format=csv,noheader,nounits`.
// One line per GPU, e.g. `0, NVIDIA A100-SXM4-80GB, 81920, 4, 535.104.05, 8.0, GPU-1a2b…`.
import type { GpuDevice } from '../protocol/hardware.js';

export const NVIDIA_QUERY_FIELDS = [
  'index',
  'name',
  'memory.total',
  'memory.used',
  'driver_version',
  'compute_cap',
  'uuid',
] as const;

/** Drivers before ~510 do not know `compute_cap`; detection retries with this shorter list. */
export const NVIDIA_QUERY_FIELDS_LEGACY = NVIDIA_QUERY_FIELDS.filter((f) => f !== 'compute_cap');

/** nvidia-smi writes these when a value does not apply or is not readable. */
function present(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '' || /^\[?(N\/A|Not Supported|Unknown Error|Insufficient Permissions)\]?$/i.test(v)) return undefined;
  return v;
}

function number(value: string | undefined, field: string, line: string): number {
  const v = present(value);
  const n = v === undefined ? NaN : Number(v);
  if (!Number.isFinite(n)) throw new Error(`nvidia-smi: field ${field} is not a number in line "${line}"`);
  return n;
}

/**
 * One GpuDevice per non-empty line. `fields` names the columns in order (the query that was run).
 * The name is the only free-text column, so it is taken as everything between the fixed columns
 * before and after it: a name containing ", " still parses.
 */
export function parseNvidiaSmiCsv(text: string, fields: readonly string[] = NVIDIA_QUERY_FIELDS): GpuDevice[] {
  const nameAt = fields.indexOf('name');
  if (nameAt < 0) throw new Error('parseNvidiaSmiCsv: the query must include "name"');
  const after = fields.length - nameAt - 1;
  const gpus: GpuDevice[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '') continue;
    const parts = line.split(',').map((p) => p.trim());
    if (parts.length < fields.length) {
      throw new Error(`nvidia-smi: expected ${fields.length} columns, got ${parts.length} in line "${line}"`);
    }
    const values = new Map<string, string>();
    fields.slice(0, nameAt).forEach((f, i) => values.set(f, parts[i]));
    values.set('name', parts.slice(nameAt, parts.length - after).join(', '));
    fields.slice(nameAt + 1).forEach((f, i) => values.set(f, parts[parts.length - after + i]));

    const memoryUsed = present(values.get('memory.used'));
    const gpu: GpuDevice = {
      vendor: 'nvidia',
      index: number(values.get('index'), 'index', line),
      name: values.get('name') ?? '',
      memoryMiB: number(values.get('memory.total'), 'memory.total', line),
      driver: present(values.get('driver_version')) ?? 'unknown',
    };
    if (memoryUsed !== undefined && Number.isFinite(Number(memoryUsed))) gpu.memoryUsedMiB = Number(memoryUsed);
    const cc = present(values.get('compute_cap'));
    if (cc !== undefined) gpu.computeCapability = cc;
    const uuid = present(values.get('uuid'));
    if (uuid !== undefined) gpu.uuid = uuid;
    gpus.push(gpu);
  }
  return gpus;
}
