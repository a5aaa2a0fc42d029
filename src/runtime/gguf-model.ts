// GGUF (llama.cpp) → Hearth ModelConfig + Weights in Hugging Face names and layout.
// Architectures: llama (also used by Mistral GGUFs), qwen2, qwen3.
import type { Architecture, ModelConfig, RopeScaling, Weights } from './model-config.js';
import { readGgufHeader, type GgufFile, type GgufTensorInfo, type GgufValue } from './gguf-reader.js';
import { dequantize, GGML_TYPE, GGML_TYPES } from './gguf-dequant.js';
import { halfWords, readRange, type SourceTensor, type WeightSource } from './weight-source.js';
import { GLOBAL_NAMES as HF_GLOBAL_NAMES, LAYER_NAMES as HF_LAYER_NAMES } from './gguf-llama-layout.js';
import { buildTokenizerFromGguf, type GgufTokenizerFiles } from './gguf-tokenizer.js';
import { llamaRopeFactors } from './rope.js';

const SUPPORTED: Record<string, Architecture> = { llama: 'llama', qwen2: 'qwen2', qwen3: 'qwen3' };

export interface GgufModel extends GgufTokenizerFiles {
  config: ModelConfig;
  weights: Weights;
}

export type ProgressFn = (doneBytes: number, totalBytes: number) => void;

/** GGUF tensor name → HF name: the inverse of the writer's layout (gguf-llama-layout.ts). */
const invert = (m: Record<string, string>) => Object.fromEntries(Object.entries(m).map(([hf, gguf]) => [gguf, hf]));
const LAYER_NAMES = invert(HF_LAYER_NAMES);
const GLOBAL_NAMES = invert(HF_GLOBAL_NAMES);

export function hfTensorName(ggufName: string): string | null {
  if (ggufName in GLOBAL_NAMES) return GLOBAL_NAMES[ggufName];
  const m = /^blk\.(\d+)\.(.+)$/.exec(ggufName);
  if (m && m[2] in LAYER_NAMES) return `model.layers.${m[1]}.${LAYER_NAMES[m[2]]}`;
  return null;
}

function num(md: Map<string, GgufValue>, key: string, fallback?: number): number {
  const v = md.get(key);
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (fallback !== undefined) return fallback;
  throw new Error(`GGUF metadata ${key} is missing`);
}

export function ggufConfig(file: GgufFile): ModelConfig {
  const md = file.metadata;
  const archName = String(md.get('general.architecture') ?? '');
  const architecture = SUPPORTED[archName];
  if (!architecture) throw new Error(`unsupported architecture "${archName}" in ${file.path} (supported GGUF architectures: ${Object.keys(SUPPORTED).join(', ')})`);
  const p = (k: string) => `${archName}.${k}`;
  const hiddenSize = num(md, p('embedding_length'));
  const numHeads = num(md, p('attention.head_count'));
  const headDim = num(md, p('attention.key_length'), hiddenSize / numHeads);
  const ropeDim = num(md, p('rope.dimension_count'), headDim);
  if (ropeDim !== headDim) throw new Error(`unsupported partial rotary embedding (rope.dimension_count ${ropeDim} != head dim ${headDim})`);
  const scalingType = md.get(p('rope.scaling.type'));
  if (scalingType !== undefined && scalingType !== 'none') throw new Error(`unsupported rope scaling "${String(scalingType)}" in GGUF`);
  const embd = file.tensors.find((t) => t.name === 'token_embd.weight');
  if (!embd) throw new Error('GGUF is missing tensor token_embd.weight');
  const vocabSize = embd.dims[1];
  const id = (k: string) => { const v = md.get(k); return typeof v === 'number' && v >= 0 && v < vocabSize ? v : null; };
  const eos = id('tokenizer.ggml.eos_token_id');
  const eot = id('tokenizer.ggml.eot_token_id');
  const headKv = md.get(p('attention.head_count_kv'));
  return {
    architecture,
    vocabSize,
    hiddenSize,
    intermediateSize: num(md, p('feed_forward_length')),
    numLayers: num(md, p('block_count')),
    numHeads,
    numKvHeads: typeof headKv === 'number' ? headKv : numHeads,
    headDim,
    maxPositionEmbeddings: num(md, p('context_length'), 2048),
    rmsNormEps: num(md, p('attention.layer_norm_rms_epsilon'), 1e-6),
    ropeTheta: num(md, p('rope.freq_base'), 10000),
    ropeScaling: null,
    tieWordEmbeddings: !file.tensors.some((t) => t.name === 'output.weight'),
    attentionBias: file.tensors.some((t) => t.name === 'blk.0.attn_q.bias'),
    qkNorm: file.tensors.some((t) => t.name === 'blk.0.attn_q_norm.weight'),
    bosTokenId: id('tokenizer.ggml.bos_token_id'),
    eosTokenIds: [...new Set([eos, eot].filter((x): x is number => x !== null))],
    padTokenId: id('tokenizer.ggml.padding_token_id'),
  };
}

/**
 * llama.cpp's converter permutes q/k rows of Llama models so its rotary kernel can pair
 * adjacent elements: HF row (j·hd/2 + i) of each head sits at GGUF row (2i + j). Undo that.
 * Works on float rows and on rows of ggml blocks alike (a row is `rowLen` array elements).
 */
export function unpermuteQK<T extends Float32Array | Uint8Array>(data: T, rows: number, rowLen: number, heads: number): T {
  const hd = rows / heads;
  const half = hd / 2;
  const out = new (data.constructor as new (n: number) => T)(data.length);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < half; i++)
      for (let j = 0; j < 2; j++) {
        const src = (h * hd + 2 * i + j) * rowLen;
        const dst = (h * hd + j * half + i) * rowLen;
        out.set(data.subarray(src, src + rowLen), dst);
      }
  return out;
}

/** Known Llama-3 rope_scaling settings; GGUF stores only the resulting per-frequency factors. */
const LLAMA3_SCALINGS: RopeScaling[] = [8, 32, 16, 4].map((factor) => ({
  type: 'llama3', factor, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192,
}));

function matchRopeFactors(factors: Float32Array, config: ModelConfig): RopeScaling {
  for (const s of LLAMA3_SCALINGS) {
    const expected = llamaRopeFactors(config.headDim, config.ropeTheta, s);
    if (expected.every((f, i) => Math.abs(f - factors[i]) <= 1e-3 * Math.abs(f))) return s;
  }
  throw new Error('unsupported rope_freqs tensor in GGUF: it matches no known Llama-3 rope scaling');
}

/** Float types, which have no block form: served and trained as float32. */
const FLOAT_TYPES = new Set([0, 1, 30]);

export interface GgufSource extends GgufTokenizerFiles {
  config: ModelConfig;
  /** Every tensor under its HF name, read from the file when asked (rope_freqs is folded into the config). */
  source: WeightSource;
  file: GgufFile;
}

/**
 * A GGUF file as a weight source: nothing but the header is read here. Quantized tensors keep their ggml
 * bytes (q/k rows of Llama files put back in HF order, block rows moved whole).
 */
export function openGguf(path: string): GgufSource {
  const file = readGgufHeader(path);
  const config = ggufConfig(file);
  const { tokenizerJson, tokenizerConfig } = buildTokenizerFromGguf(file.metadata);
  const source: WeightSource = new Map();
  const raw = (info: GgufTensorInfo) => readRange(path, info.fileOffset, info.byteSize);
  const elements = (info: GgufTensorInfo) => info.dims.reduce((a, b) => a * b, 1);
  for (const info of file.tensors) {
    if (info.name === 'rope_freqs.weight') { config.ropeScaling = matchRopeFactors(dequantize(info.type, raw(info), elements(info)), config); continue; }
    const name = hfTensorName(info.name);
    if (!name) throw new Error(`unsupported tensor ${info.name} in GGUF (architecture ${config.architecture})`);
    const shape = [...info.dims].reverse();
    const qkHeads = config.architecture === 'llama' && /self_attn\.[qk]_proj\.weight$/.test(name) ? (name.includes('q_proj') ? config.numHeads : config.numKvHeads) : 0;
    const rows = shape[0], rowElems = shape[1] ?? 1;
    const bytes = () => {
      const b = raw(info);
      if (!qkHeads) return b;
      const { blockElems, blockBytes } = GGML_TYPES[info.type];
      return unpermuteQK(b, rows, (rowElems / blockElems) * blockBytes, qkHeads);
    };
    const tensor: SourceTensor = {
      shape,
      f32: () => {
        const data = dequantize(info.type, raw(info), elements(info));
        return qkHeads ? unpermuteQK(data, rows, rowElems, qkHeads) : data;
      },
    };
    if (!FLOAT_TYPES.has(info.type)) tensor.ggml = { type: info.type, bytes };
    if (info.type === GGML_TYPE.F16) tensor.f16 = () => halfWords(bytes());
    source.set(name, tensor);
  }
  return { config, source, file, tokenizerJson, tokenizerConfig };
}

/** The whole model dequantized to float32 (the training side; import checks use openGguf). */
export function readGgufModel(path: string, onProgress?: ProgressFn): GgufModel {
  const { config, source, file, tokenizerJson, tokenizerConfig } = openGguf(path);
  const weights: Weights = new Map();
  const bytesOf = new Map(file.tensors.map((t) => [hfTensorName(t.name), t.byteSize]));
  const total = file.tensors.reduce((a, t) => a + t.byteSize, 0);
  let done = 0;
  for (const [name, t] of source) {
    weights.set(name, { shape: t.shape, data: t.f32() });
    onProgress?.((done += bytesOf.get(name)!), total);
  }
  return { config, weights, tokenizerJson, tokenizerConfig };
}
