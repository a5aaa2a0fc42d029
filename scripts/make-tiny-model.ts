// Generate a deterministic random Llama-family HF folder:
//   npx tsx scripts/make-tiny-model.ts <out-dir> [--size tiny|s20|m120] [--seed N] [--std X] [--arch llama|mistral|qwen2|qwen3]
// Sizes: tiny ≈ 1M, s20 ≈ 20M, m120 ≈ 120M parameters. The logic lives in src/models/tiny-model.ts.
import { makeTinyModel, TINY_SIZES, type TinySize } from '../src/models/tiny-model.js';
import type { Architecture } from '../worker/runtime/model-config.js';

export { makeTinyModel, tinyConfig, randomWeights, TINY_SIZES } from '../src/models/tiny-model.js';
export { ensureDemoModel } from '../src/models/demo-model.js';

async function main(argv: string[]): Promise<number> {
  const positional: string[] = [];
  const flags: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) flags[argv[i].slice(2)] = argv[++i] ?? '';
    else positional.push(argv[i]);
  }
  const size = (flags.size ?? 'tiny') as TinySize;
  if (positional.length !== 1 || !(size in TINY_SIZES)) {
    process.stderr.write('usage: tsx scripts/make-tiny-model.ts <out-dir> [--size tiny|s20|m120] [--seed N] [--std X] [--arch llama|mistral|qwen2|qwen3]\n');
    return 2;
  }
  const config = makeTinyModel({
    dir: positional[0], size, seed: Number(flags.seed ?? 0), std: flags.std ? Number(flags.std) : undefined,
    architecture: (flags.arch as Architecture | undefined) ?? 'llama',
  });
  process.stdout.write(JSON.stringify({ dir: positional[0], size, config }) + '\n');
  return 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  process.exitCode = await main(process.argv.slice(2));
}
