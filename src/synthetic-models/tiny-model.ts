// Deterministic, seeded random Llama-family models in Hugging Face folder format, for the demo model,
// tests and benchmarks. The tokenizer is a byte-level BPE trained (by our own trainer) on
// models/tiny-corpus.txt, a short text written for Hearth. Same size + seed → byte-identical folder.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Architecture, ModelConfig, RopeScaling, Weights } from '../runtime/model-config.js';
import { toHfConfig } from '../runtime/hf-model.js';
import { writeSafetensors } from '../runtime/safetensors.js';
import { byteLevelTokenizerJson, trainByteLevelBpe } from '../runtime/bpe-trainer.js';
import { seededRandom } from '../runtime/generate.js';

export type TinySize = 'tiny' | 's20' | 'm120';

/** ~1M, ~20M and ~120M parameters (the last two match the benchmark configs in the engineering notes). */
export const TINY_SIZES: Record<TinySize, Pick<ModelConfig, 'vocabSize' | 'hiddenSize' | 'numLayers' | 'numHeads' | 'numKvHeads' | 'intermediateSize' | 'tieWordEmbeddings'>> = {
  tiny: { vocabSize: 1024, hiddenSize: 128, numLayers: 4, numHeads: 4, numKvHeads: 2, intermediateSize: 384, tieWordEmbeddings: true },
  s20: { vocabSize: 8192, hiddenSize: 384, numLayers: 8, numHeads: 6, numKvHeads: 2, intermediateSize: 1024, tieWordEmbeddings: false },
  m120: { vocabSize: 32000, hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, intermediateSize: 2048, tieWordEmbeddings: false },
};

/** Model shapes the generators write: the tiny sizes plus the dimensions of real models (random weights). */
export type ModelShape = TinySize | '1b' | '8b' | 'qwen0.5b';

type ShapeSpec = (typeof TINY_SIZES)[TinySize] & Partial<Pick<ModelConfig, 'ropeTheta' | 'rmsNormEps' | 'maxPositionEmbeddings' | 'architecture'>>;

export const MODEL_SHAPES: Record<ModelShape, ShapeSpec> = {
  ...TINY_SIZES,
  /** 1.1B parameters: TinyLlama-1.1B's dimensions (the benchmark model). */
  '1b': { vocabSize: 32000, hiddenSize: 2048, numLayers: 16, numHeads: 32, numKvHeads: 8, intermediateSize: 8192, tieWordEmbeddings: false, maxPositionEmbeddings: 2048 },
  /** Llama 3.1 8B's dimensions. */
  '8b': { vocabSize: 128256, hiddenSize: 4096, numLayers: 32, numHeads: 32, numKvHeads: 8, intermediateSize: 14336, tieWordEmbeddings: false, ropeTheta: 500000, maxPositionEmbeddings: 8192 },
  /** Qwen2.5-0.5B's dimensions (tied embeddings, q/k/v biases with the qwen2 architecture). */
  'qwen0.5b': { vocabSize: 151936, hiddenSize: 896, numLayers: 24, numHeads: 14, numKvHeads: 2, intermediateSize: 4864, tieWordEmbeddings: true, ropeTheta: 1000000, rmsNormEps: 1e-6, maxPositionEmbeddings: 32768, architecture: 'qwen2' },
};

/** The config of a named shape (optionally with fewer layers), for the tiny tokenizer's size. */
export function shapeConfig(shape: ModelShape, opts: { architecture?: Architecture; layers?: number } = {}): ModelConfig {
  const spec = MODEL_SHAPES[shape];
  if (!spec) throw new Error(`unknown model shape "${shape}" (known: ${Object.keys(MODEL_SHAPES).join(', ')})`);
  const { architecture: shapeArch, ropeTheta, rmsNormEps, maxPositionEmbeddings, ...dims } = spec;
  const architecture = opts.architecture ?? shapeArch ?? 'llama';
  return tinyConfig({
    architecture,
    overrides: {
      ...dims,
      headDim: dims.hiddenSize / dims.numHeads,
      ...(opts.layers !== undefined ? { numLayers: opts.layers } : {}),
      ...(ropeTheta !== undefined ? { ropeTheta } : {}),
      ...(rmsNormEps !== undefined ? { rmsNormEps } : {}),
      ...(maxPositionEmbeddings !== undefined ? { maxPositionEmbeddings } : {}),
    },
  }, tinyTokenizer().size);
}

export const SPECIAL_TOKENS = ['<s>', '</s>', '<|im_start|>', '<|im_end|>'];

/** ChatML with an optional tool list, the template the generated models ship. */
export const TINY_CHAT_TEMPLATE =
  "{%- if tools %}{{ '<|im_start|>system\\nYou may call these tools:\\n' }}{%- for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{%- endfor %}{{ '<|im_end|>\\n' }}{%- endif %}" +
  "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";

export interface TinyModelOptions {
  dir: string;
  size?: TinySize;
  seed?: number;
  /** Weight standard deviation (default 0.02, as HF initializes; tests use larger values so attention matters). */
  std?: number;
  architecture?: Architecture;
  /** Override any config field (e.g. headDim, ropeScaling, numLayers) for tests. */
  overrides?: Partial<ModelConfig>;
}

export function corpusPath(): string {
  return fileURLToPath(new URL('../../models/tiny-corpus.txt', import.meta.url));
}

export function tinyConfig(opts: Omit<TinyModelOptions, 'dir'>, tokenizerSize: number): ModelConfig {
  const s = TINY_SIZES[opts.size ?? 'tiny'];
  const architecture = opts.architecture ?? 'llama';
  const ids = { bos: SPECIAL_TOKENS.indexOf('<s>'), eos: SPECIAL_TOKENS.indexOf('</s>'), imEnd: SPECIAL_TOKENS.indexOf('<|im_end|>') };
  const base = tokenizerSize - SPECIAL_TOKENS.length;
  const config: ModelConfig = {
    architecture,
    ...s,
    vocabSize: Math.max(s.vocabSize, tokenizerSize),
    headDim: s.hiddenSize / s.numHeads,
    maxPositionEmbeddings: 2048,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: null as RopeScaling | null,
    attentionBias: architecture === 'qwen2',
    qkNorm: architecture === 'qwen3',
    bosTokenId: base + ids.bos,
    eosTokenIds: [base + ids.eos, base + ids.imEnd],
    padTokenId: null,
    ...opts.overrides,
  };
  return config;
}

/** Seeded random weights for a config (norm weights near 1 so a missing norm is detectable). */
export function randomWeights(config: ModelConfig, seed: number, std = 0.02): Weights {
  const random = seededRandom(seed);
  const gauss = (n: number, scale: number, mean = 0) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {
      const u = 1 - random(), v = random();
      const r = Math.sqrt(-2 * Math.log(u)) * scale;
      out[i] = mean + r * Math.cos(2 * Math.PI * v);
      if (i + 1 < n) out[i + 1] = mean + r * Math.sin(2 * Math.PI * v);
    }
    return out;
  };
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F, vocabSize: V } = config;
  const w: Weights = new Map();
  const add = (name: string, shape: number[], scale = std, mean = 0) => w.set(name, { shape, data: gauss(shape.reduce((a, b) => a * b, 1), scale, mean) });
  add('model.embed_tokens.weight', [V, D], std);
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}.`;
    add(p + 'input_layernorm.weight', [D], 0.1, 1);
    add(p + 'post_attention_layernorm.weight', [D], 0.1, 1);
    add(p + 'self_attn.q_proj.weight', [H * hd, D]);
    add(p + 'self_attn.k_proj.weight', [KV * hd, D]);
    add(p + 'self_attn.v_proj.weight', [KV * hd, D]);
    add(p + 'self_attn.o_proj.weight', [D, H * hd]);
    add(p + 'mlp.gate_proj.weight', [F, D]);
    add(p + 'mlp.up_proj.weight', [F, D]);
    add(p + 'mlp.down_proj.weight', [D, F]);
    if (config.attentionBias) {
      add(p + 'self_attn.q_proj.bias', [H * hd]);
      add(p + 'self_attn.k_proj.bias', [KV * hd]);
      add(p + 'self_attn.v_proj.bias', [KV * hd]);
    }
    if (config.qkNorm) {
      add(p + 'self_attn.q_norm.weight', [hd], 0.1, 1);
      add(p + 'self_attn.k_norm.weight', [hd], 0.1, 1);
    }
  }
  add('model.norm.weight', [D], 0.1, 1);
  if (!config.tieWordEmbeddings) add('lm_head.weight', [V, D]);
  return w;
}

let cachedTokenizer: { json: Record<string, unknown>; size: number } | null = null;

/** The byte-level BPE tokenizer of the generated models (trained once per process). */
export function tinyTokenizer(): { json: Record<string, unknown>; size: number } {
  if (!cachedTokenizer) {
    const bpe = trainByteLevelBpe(readFileSync(corpusPath(), 'utf8'), { vocabSize: 1024, specialTokens: SPECIAL_TOKENS });
    cachedTokenizer = { json: byteLevelTokenizerJson(bpe, '<s>'), size: bpe.vocab.size + bpe.specialTokens.length };
  }
  return cachedTokenizer;
}

/** Write a complete HF folder; returns its config. */
export function makeTinyModel(opts: TinyModelOptions): ModelConfig {
  const tok = tinyTokenizer();
  const config = tinyConfig(opts, tok.size);
  const weights = randomWeights(config, opts.seed ?? 0, opts.std);
  writeTinyModelFiles(opts.dir, config);
  writeSafetensors(join(opts.dir, 'model.safetensors'), weights, { generator: 'hearth make-tiny-model', seed: String(opts.seed ?? 0) });
  return config;
}

/** A HF folder's files besides the weights (config, the tiny tokenizer, its chat template) for a config of the tiny tokenizer. */
export function writeTinyModelFiles(dir: string, config: ModelConfig): void {
  const tok = tinyTokenizer();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(toHfConfig(config), null, 2) + '\n');
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok.json));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: '<s>', eos_token: '</s>', pad_token: null, unk_token: null, add_bos_token: true, add_eos_token: false,
    clean_up_tokenization_spaces: false, model_max_length: config.maxPositionEmbeddings,
    tokenizer_class: 'PreTrainedTokenizerFast', chat_template: TINY_CHAT_TEMPLATE,
  }, null, 2) + '\n');
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ bos_token_id: config.bosTokenId, eos_token_id: config.eosTokenIds }, null, 2) + '\n');
}
