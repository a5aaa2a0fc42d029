// A plain single-sequence generation loop (greedy or temperature sampling with a seed), used by
// `hearth generate`, the stories260K check and the decode benchmark. The serving engine has its own
// scheduler and sampler; this is the reference behaviour.
import type { LoadedModel } from './load-model.js';

export interface GenerateOptions {
  maxTokens?: number;
  /** 0 (default) = greedy. */
  temperature?: number;
  seed?: number;
  /** Stop at the model's EOS ids (default true). */
  stopAtEos?: boolean;
}

export interface GenerateResult {
  promptIds: number[];
  outputIds: number[];
  text: string;
}

/** Deterministic 32-bit PRNG (mulberry32), uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/** Sample from softmax(logits / temperature). */
export function sampleToken(logits: Float32Array, temperature: number, random: () => number): number {
  if (temperature <= 0) return argmax(logits);
  let max = -Infinity;
  for (const l of logits) if (l > max) max = l;
  const probs = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) { probs[i] = Math.exp((logits[i] - max) / temperature); sum += probs[i]; }
  let r = random() * sum;
  for (let i = 0; i < probs.length; i++) { r -= probs[i]; if (r <= 0) return i; }
  return probs.length - 1;
}

export async function generateIds(model: LoadedModel, promptIds: number[], opts: GenerateOptions = {}): Promise<number[]> {
  const maxTokens = opts.maxTokens ?? 128;
  const random = seededRandom(opts.seed ?? 0);
  const eos = new Set(opts.stopAtEos === false ? [] : model.config.eosTokenIds);
  const kv = model.runner.newSequence();
  const out: number[] = [];
  if (promptIds.length === 0) throw new Error('empty prompt: nothing to condition on (the model adds no BOS)');
  let [logits] = await model.runner.forward([{ tokens: promptIds, kv }]);
  while (out.length < maxTokens) {
    const token = sampleToken(logits, opts.temperature ?? 0, random);
    out.push(token);
    if (eos.has(token) || kv.length + 1 > model.runner.maxPositions) break;
    [logits] = await model.runner.forward([{ tokens: [token], kv }]);
  }
  return out;
}

/** Raw generation: the prompt is tokenized as the model's tokenizer does it (BOS where the model uses one). */
export async function generateText(model: LoadedModel, prompt: string, opts: GenerateOptions = {}): Promise<GenerateResult> {
  const promptIds = await model.tokenizer.encode(prompt, { addSpecialTokens: true });
  const outputIds = await generateIds(model, promptIds, opts);
  const decoder = model.tokenizer.streamDecoder({ atStart: false });
  const text = outputIds.map((id) => decoder.push(id)).join('') + decoder.flush();
  return { promptIds, outputIds, text };
}
