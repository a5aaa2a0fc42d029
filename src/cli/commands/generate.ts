// `hearth generate --model <id> --prompt <text>`: raw generation (no chat template).
import { defaultHome } from '../../models/model-store.js';
import { loadModel } from '../../runtime/load-model.js';
import { generateText } from '../../runtime/generate.js';
import { parseArgs } from './models.js';

const USAGE = 'usage: hearth generate --model <publisher/name | folder> --prompt <text> [--max-tokens N] [--temperature T] [--seed S] [--device cpu|cuda[:N]|webgpu[:N]] [--weights stored|f32|q4] [--json]';

function numberFlag(v: string | true | undefined, name: string, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (v === true || !Number.isFinite(n)) throw new Error(`--${name} needs a number`);
  return n;
}

export async function run(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(argv, ['json']);
  if (typeof flags.model !== 'string' || typeof flags.prompt !== 'string' || positional.length > 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  try {
    const maxTokens = numberFlag(flags['max-tokens'], 'max-tokens', 128);
    const temperature = numberFlag(flags.temperature, 'temperature', 0);
    const seed = numberFlag(flags.seed, 'seed', 0);
    const weightType = flags.weights ?? 'stored';
    if (weightType !== 'stored' && weightType !== 'f32' && weightType !== 'q4') throw new Error('--weights must be stored, f32 or q4');
    const model = await loadModel(flags.model, {
      weightType,
      home: defaultHome(),
      device: typeof flags.device === 'string' ? flags.device : 'cpu',
      log: (line) => process.stderr.write(`${line}\n`),
    });
    const c = model.config;
    process.stderr.write(`model ${flags.model} (${c.architecture}, ${c.numLayers} layers, d ${c.hiddenSize}) from ${model.dir}; ${model.runner.device}, ${model.runner.attention} attention, ${weightType} weights; loaded in ${Math.round(model.loadMs)} ms\n`);
    const result = await generateText(model, flags.prompt, { maxTokens, temperature, seed });
    await model.runner.release();
    if (flags.json) {
      process.stdout.write(JSON.stringify({ prompt_ids: result.promptIds, output_ids: result.outputIds, text: result.text }) + '\n');
    } else {
      process.stdout.write(`${flags.prompt}${result.text}\n`);
    }
    return 0;
  } catch (err) {
    process.stderr.write(`hearth generate: ${(err as Error).message}\n`);
    return 1;
  }
}
