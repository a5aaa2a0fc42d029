// Generate a deterministic random Llama-family model:
//   HF folder: npx tsx scripts/make-tiny-model.ts <out-dir> [--size tiny|s20|m120] [--seed N] [--std X] [--arch llama|mistral|qwen2|qwen3]
//   GGUF file: npx tsx scripts/make-tiny-model.ts --gguf out.gguf [--type Q4_K] [--arch llama|qwen2|qwen3]
//              [--shape tiny|s20|m120|1b|8b|qwen0.5b] [--layers N] [--seed S]
// Sizes: tiny ≈ 1M, s20 ≈ 20M, m120 ≈ 120M parameters; 1b, 8b and qwen0.5b have the dimensions of
// TinyLlama-1.1B, Llama 3.1 8B and Qwen2.5-0.5B. GGUF types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K
// Q6_K (every matrix in that type) and Q4_K_M (llama.cpp's mixture). The logic lives in src/models/.
import { makeTinyModel, MODEL_SHAPES, shapeConfig, TINY_SIZES, type ModelShape, type TinySize } from '../src/synthetic-models/tiny-model.js';
import { GGUF_FILE_TYPES, writeGgufModel, type GgufFileType } from '../src/synthetic-models/tiny-gguf.js';
import type { Architecture } from '../src/runtime/model-config.js';

export { makeTinyModel, tinyConfig, randomWeights, TINY_SIZES } from '../src/synthetic-models/tiny-model.js';
export { ensureDemoModel } from '../src/models/demo-model.js';

const USAGE = 'usage: tsx scripts/make-tiny-model.ts <out-dir> [--size tiny|s20|m120] [--seed N] [--std X] [--arch llama|mistral|qwen2|qwen3]\n' +
  `       tsx scripts/make-tiny-model.ts --gguf out.gguf [--type ${GGUF_FILE_TYPES.join('|')}] [--arch llama|qwen2|qwen3] [--shape ${Object.keys(MODEL_SHAPES).join('|')}] [--layers N] [--seed S]\n`;

async function main(argv: string[]): Promise<number> {
  const positional: string[] = [];
  const flags: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) flags[argv[i].slice(2)] = argv[++i] ?? '';
    else positional.push(argv[i]);
  }
  if (flags.gguf) return makeGguf(flags);
  const size = (flags.size ?? 'tiny') as TinySize;
  if (positional.length !== 1 || !(size in TINY_SIZES)) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = makeTinyModel({
    dir: positional[0], size, seed: Number(flags.seed ?? 0), std: flags.std ? Number(flags.std) : undefined,
    architecture: (flags.arch as Architecture | undefined) ?? 'llama',
  });
  process.stdout.write(JSON.stringify({ dir: positional[0], size, config }) + '\n');
  return 0;
}

function makeGguf(flags: Record<string, string>): number {
  const shape = (flags.shape ?? 'tiny') as ModelShape;
  const type = (flags.type ?? 'Q4_K_M') as GgufFileType;
  const arch = flags.arch as Architecture | undefined;
  const layers = flags.layers !== undefined ? Number(flags.layers) : undefined;
  const problems = [
    !(shape in MODEL_SHAPES) && `unknown --shape ${shape}`,
    !GGUF_FILE_TYPES.includes(type) && `unknown --type ${type}`,
    arch !== undefined && !['llama', 'qwen2', 'qwen3'].includes(arch) && `unknown --arch ${arch}`,
    layers !== undefined && !(Number.isInteger(layers) && layers > 0) && `--layers must be a positive integer`,
  ].filter(Boolean);
  if (problems.length) {
    process.stderr.write(`${problems.join('; ')}\n${USAGE}`);
    return 2;
  }
  const config = shapeConfig(shape, { architecture: arch, layers });
  const started = Date.now();
  let lastReport = 0;
  const info = writeGgufModel(flags.gguf, {
    config, type, seed: Number(flags.seed ?? 0), name: `hearth-synthetic-${shape}`,
    onProgress: (done, total) => {
      if (Date.now() - lastReport < 2000) return;
      lastReport = Date.now();
      process.stderr.write(`  ${(done / 2 ** 20).toFixed(0)} / ${(total / 2 ** 20).toFixed(0)} MiB\n`);
    },
  });
  const types: Record<string, number> = {};
  for (const t of info.tensors) types[t.type] = (types[t.type] ?? 0) + 1;
  process.stdout.write(JSON.stringify({ path: info.path, shape, type, bytes: info.bytes, seconds: (Date.now() - started) / 1000, tensorTypes: types, config }) + '\n');
  return 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  process.exitCode = await main(process.argv.slice(2));
}
