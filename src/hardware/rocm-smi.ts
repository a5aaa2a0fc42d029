// Parses `rocm-smi <ROCM_SMI_ARGS>` JSON: one object per card ("card0", "card1", …) with string
// values, plus a "system" object holding the driver version. Key spelling has changed between
// ROCm releases ("Card series" / "Card Series"), so keys are matched case-insensitively.
import type { GpuDevice } from '../protocol/hardware.js';

export const ROCM_SMI_ARGS = [
  '--showproductname',
  '--showmeminfo',
  'vram',
  '--showdriverversion',
  '--showuniqueid',
  '--json',
] as const;

type Fields = Record<string, unknown>;

function field(fields: Fields, ...names: string[]): string | undefined {
  const wanted = names.map((n) => n.toLowerCase());
  for (const want of wanted) {
    for (const [key, value] of Object.entries(fields)) {
      if (key.toLowerCase() !== want) continue;
      const v = String(value ?? '').trim();
      if (v !== '' && !/^(N\/A|unknown)$/i.test(v)) return v;
    }
  }
  return undefined;
}

/** rocm-smi may print warnings around the JSON; keep the outermost {...}. */
function jsonPart(text: string): unknown {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end < start) throw new Error('rocm-smi: no JSON object in output');
  return JSON.parse(text.slice(start, end + 1));
}

export function parseRocmSmiJson(text: string): GpuDevice[] {
  const doc = jsonPart(text);
  if (doc === null || typeof doc !== 'object') throw new Error('rocm-smi: JSON output is not an object');
  const entries = Object.entries(doc as Record<string, unknown>);
  const system = (entries.find(([k]) => k.toLowerCase() === 'system')?.[1] ?? {}) as Fields;
  const systemDriver = field(system, 'Driver version');

  const gpus: GpuDevice[] = [];
  for (const [key, value] of entries) {
    const match = /^card(\d+)$/i.exec(key);
    if (!match || value === null || typeof value !== 'object') continue;
    const fields = value as Fields;
    const bytes = Number(field(fields, 'VRAM Total Memory (B)'));
    if (!Number.isFinite(bytes)) throw new Error(`rocm-smi: ${key} has no "VRAM Total Memory (B)"`);
    const usedBytes = Number(field(fields, 'VRAM Total Used Memory (B)'));
    const gpu: GpuDevice = {
      vendor: 'amd',
      index: Number(match[1]),
      name: field(fields, 'Card series', 'Marketing Name', 'Card model', 'Card SKU') ?? `AMD GPU ${match[1]}`,
      memoryMiB: Math.floor(bytes / 2 ** 20),
      driver: field(fields, 'Driver version') ?? systemDriver ?? 'unknown',
    };
    if (Number.isFinite(usedBytes)) gpu.memoryUsedMiB = Math.floor(usedBytes / 2 ** 20);
    const gfx = field(fields, 'GFX Version');
    if (gfx !== undefined) gpu.computeCapability = gfx;
    const uuid = field(fields, 'Unique ID');
    if (uuid !== undefined) gpu.uuid = uuid;
    gpus.push(gpu);
  }
  return gpus.sort((a, b) => a.index - b.index);
}
