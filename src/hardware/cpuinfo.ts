// Parses Linux /proc/cpuinfo: blocks of `key : value` lines, one block per logical processor.
// x86 lists extensions under `flags`, ARM under `Features`.

/** The SIMD extensions that matter for matrix kernels (ONNX Runtime, XNNPACK, oneDNN pick by these). */
export const SIMD_FEATURES = [
  // x86
  'sse4_2', 'avx', 'avx2', 'fma', 'f16c',
  'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni', 'avx512_bf16', 'avx512_fp16', 'avx_vnni',
  'amx_tile', 'amx_bf16', 'amx_int8',
  // arm64
  'asimd', 'asimddp', 'asimdhp', 'sve', 'sve2', 'i8mm', 'bf16',
] as const;

export interface CpuInfo {
  model: string;
  /** Logical processors (number of `processor` blocks). */
  cores: number;
  /** Distinct (physical id, core id) pairs, when the file lists them. */
  physicalCores?: number;
  simd: string[];
}

export function parseCpuInfo(text: string): CpuInfo {
  const allBlocks = text
    .split(/\n\s*\n/)
    .map((block) => {
      const fields = new Map<string, string>();
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        fields.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      return fields;
    });
  const blocks = allBlocks.filter((f) => f.has('processor') && /^\d+$/.test(f.get('processor') ?? ''));
  if (blocks.length === 0) throw new Error('cpuinfo: no "processor" entries');

  const first = blocks[0];
  // ARM kernels often name the SoC only in a trailing block without `processor`.
  const named = (key: string) => allBlocks.find((b) => b.has(key))?.get(key);
  const armPart = first.has('cpu part') ? `ARM CPU (implementer ${first.get('cpu implementer') ?? '?'}, part ${first.get('cpu part')})` : undefined;
  const model = named('model name') ?? named('hardware') ?? named('cpu model') ?? armPart ?? 'unknown CPU';
  const flags = new Set((first.get('flags') ?? first.get('features') ?? '').split(/\s+/).filter(Boolean));

  const coreIds = new Set<string>();
  for (const b of blocks) {
    if (b.has('physical id') && b.has('core id')) coreIds.add(`${b.get('physical id')}/${b.get('core id')}`);
  }
  const info: CpuInfo = { model, cores: blocks.length, simd: SIMD_FEATURES.filter((f) => flags.has(f)) };
  if (coreIds.size > 0) info.physicalCores = coreIds.size;
  return info;
}
