// Seeded random Llama-family models written as GGUF files in any supported quantization, the way
// llama.cpp's converter lays them out (see src/runtime/gguf-llama-layout.ts), for tests and benchmarks
// that must not download a model. Models of any size are generated row by row and streamed to the file
// (each row has its own seed), so an 8B-shaped file needs about one chunk of rows of memory.
//
//   writeGgufModel('m.gguf', { config: shapeConfig('1b'), type: 'Q4_0', seed: 1 })
//
// The weights are "decisive": besides random parts, each output-head row is a scaled copy of one token's
// embedding (token v's row copies the embedding of σ(v) for a fixed permutation σ; with tied embeddings the
// head is the embedding itself), so the last token's embedding, which the residual stream carries to the
// head, lifts one logit a few standard deviations above the rest. Greedy and argmax comparisons between two
// engines then compare clear winners, not near-ties — while attention and MLP layers still move every logit.
import type { ModelConfig, Weights } from '../runtime/model-config.js';
import { GGML_TYPE, GGML_TYPES, type GgmlTypeName } from '../runtime/gguf-dequant.js';
import { quantize } from '../runtime/gguf-quantize.js';
import { GgufWriter, type GgufMetaValue, type GgufTensorDecl } from '../runtime/gguf-writer.js';
import {
  ggufTensorName, hfRowOfPermutedRow, llamaModelMetadata, llamaTensorSpecs, qkPermutationHeads, type GgufArchitecture, type HfTensorSpec,
} from '../runtime/gguf-llama-layout.js';
import { TINY_CHAT_TEMPLATE, tinyTokenizer } from './tiny-model.js';

/** A single ggml type for every matrix, or llama.cpp's Q4_K_M mixture (mostly Q4_K, some Q6_K). */
export type GgufFileType = GgmlTypeName | 'Q4_K_M';

export const GGUF_FILE_TYPES: readonly GgufFileType[] = [...(Object.keys(GGML_TYPE) as GgmlTypeName[]), 'Q4_K_M'];

export interface GgufModelOptions {
  config: ModelConfig;
  type: GgufFileType;
  /** Seed of the synthetic weights (default 0); same config + type + seed → byte-identical file. */
  seed?: number;
  /** Write these HF-named weights instead of synthetic ones (every tensor of the config must be present). */
  weights?: Weights;
  /** Override the type of single tensors (by GGUF name, e.g. 'token_embd.weight'). */
  tensorTypes?: Record<string, GgmlTypeName>;
  /** How many standard deviations the structured logit stands above the others' expected maximum (default 3). */
  margin?: number;
  /** general.name (default "hearth-synthetic"). */
  name?: string;
  /** Called after each tensor with bytes written so far and the total. */
  onProgress?: (doneBytes: number, totalBytes: number) => void;
}

export interface GgufModelInfo {
  path: string;
  /** Bytes of the file. */
  bytes: number;
  /** Each tensor's GGUF name and ggml type. */
  tensors: { name: string; type: GgmlTypeName; dims: number[] }[];
}

/** llama.cpp's `general.file_type` numbers (llama_ftype) for the file types written here. */
const FILE_TYPE_ID: Record<GgufFileType, number> = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q8_0: 7, Q5_0: 8, Q5_1: 9, Q4_K: 14, Q4_K_M: 15, Q5_K: 16, Q6_K: 18, BF16: 32,
};

/** llama.cpp's fallback when a row length is not a multiple of a K-quant's 256-element super-block. */
const ROW_FALLBACK: Partial<Record<GgmlTypeName, GgmlTypeName>> = { Q4_K: 'Q5_0', Q5_K: 'Q5_1', Q6_K: 'Q8_0' };

/**
 * The type of one tensor: 1-D tensors (norms, biases) stay F32 as in llama.cpp's files; a single type
 * applies to every matrix (like llama-quantize --pure); Q4_K_M follows llama.cpp's recipe: Q6_K for the
 * output head and for attn_v / ffn_down in the first and last eighth of the layers and every third between.
 */
export function ggufTensorType(fileType: GgufFileType, ggufName: string, dims: number[], numLayers: number): GgmlTypeName {
  if (dims.length < 2) return 'F32';
  let t: GgmlTypeName;
  if (fileType !== 'Q4_K_M') t = fileType;
  else if (ggufName === 'output.weight') t = 'Q6_K';
  else {
    const m = /^blk\.(\d+)\.(attn_v|ffn_down)\.weight$/.exec(ggufName);
    const i = m ? Number(m[1]) : -1, n = numLayers;
    const moreBits = i >= 0 && (i < n / 8 || i >= (7 * n) / 8 || (i - Math.floor(n / 8)) % 3 === 2);
    t = moreBits ? 'Q6_K' : 'Q4_K';
  }
  while (dims[0] % GGML_TYPES[GGML_TYPE[t]].blockElems !== 0) t = ROW_FALLBACK[t] ?? 'F16';
  return t;
}

/** Write a GGUF model; returns what was written. */
export function writeGgufModel(path: string, opts: GgufModelOptions): GgufModelInfo {
  const { config } = opts;
  if (opts.weights) checkWeights(opts.weights, llamaTensorSpecs(config));
  const synth = opts.weights ? null : new SyntheticWeights(config, opts.seed ?? 0, opts.margin ?? 3);
  const decls = ggufTensorDecls(opts);
  const writer = new GgufWriter(path, { metadata: ggufMetadata(opts), tensors: decls });
  const total = decls.reduce((a, d) => a + (d.dims.reduce((x, y) => x * y, 1) / GGML_TYPES[d.type].blockElems) * GGML_TYPES[d.type].blockBytes, 0);
  let done = 0;
  try {
    for (const d of decls) {
      const cols = d.hf.shape[d.hf.shape.length - 1], rows = d.hf.shape.length > 1 ? d.hf.shape[0] : 1;
      const rowsPerChunk = Math.max(1, Math.floor((1 << 22) / cols));
      const fill = synth?.rows(d.hf.name);
      const source = opts.weights?.get(d.hf.name)?.data;
      const chunk = new Float32Array(Math.min(rows, rowsPerChunk) * cols);
      for (let r0 = 0; r0 < rows; r0 += rowsPerChunk) {
        const n = Math.min(rowsPerChunk, rows - r0);
        const bytes = ggufRowsBytes(config, d, r0, n, chunk, (hfRow, out) => {
          if (source) out.set(source.subarray(hfRow * cols, (hfRow + 1) * cols));
          else fill!(hfRow, out);
        });
        writer.append(bytes);
        done += bytes.length;
      }
      opts.onProgress?.(done, total);
    }
    writer.close();
  } catch (err) {
    writer.abort();
    throw err;
  }
  return { path, bytes: writer.bytesWritten, tensors: decls.map((d) => ({ name: d.name, type: d.typeName, dims: d.dims })) };
}

/** One tensor of a GGUF model being written: its GGUF declaration, its HF spec and its type's name. */
export type GgufTensorPlan = GgufTensorDecl & { hf: HfTensorSpec; typeName: GgmlTypeName };

/** The tensors writeGgufModel writes for these options, in file order. */
export function ggufTensorDecls(opts: Pick<GgufModelOptions, 'config' | 'type' | 'tensorTypes'>): GgufTensorPlan[] {
  return llamaTensorSpecs(opts.config).map((hf) => {
    const name = ggufTensorName(hf.name);
    const dims = [...hf.shape].reverse();
    const typeName = opts.tensorTypes?.[name] ?? ggufTensorType(opts.type, name, dims, opts.config.numLayers);
    return { name, dims, type: GGML_TYPE[typeName], hf, typeName };
  });
}

/** The GGUF metadata (model and tokenizer keys) writeGgufModel writes for these options. */
export function ggufMetadata(opts: GgufModelOptions): Record<string, GgufMetaValue> {
  const arch: GgufArchitecture = opts.config.architecture === 'mistral' ? 'llama' : opts.config.architecture;
  return { ...modelMetadata(opts, arch), ...tokenizerMetadata(opts.config) };
}

/**
 * The stored bytes of GGUF rows r0 … r0+n-1 of one tensor: `fill(hfRow, out)` gives each row's values in
 * HF order (q/k rows are permuted to llama.cpp's layout here), `scratch` holds at least n rows.
 */
export function ggufRowsBytes(config: ModelConfig, d: GgufTensorPlan, r0: number, n: number, scratch: Float32Array, fill: (hfRow: number, out: Float32Array) => void): Uint8Array {
  const arch: GgufArchitecture = config.architecture === 'mistral' ? 'llama' : config.architecture;
  const cols = d.hf.shape[d.hf.shape.length - 1], rows = d.hf.shape.length > 1 ? d.hf.shape[0] : 1;
  const permuteHeads = qkPermutationHeads(d.hf.name, config, arch);
  const values = scratch.subarray(0, n * cols);
  for (let r = 0; r < n; r++) {
    const hfRow = permuteHeads ? hfRowOfPermutedRow(r0 + r, rows / permuteHeads) : r0 + r;
    fill(hfRow, values.subarray(r * cols, (r + 1) * cols));
  }
  return quantize(d.type, values);
}

/**
 * The synthetic weights writeGgufModel writes for (config, seed), in HF names and layout, in memory — for
 * small models whose weights a test needs (e.g. to write them in another type, or to compare engines).
 */
export function syntheticWeights(config: ModelConfig, seed = 0, margin = 3): Weights {
  const synth = new SyntheticWeights(config, seed, margin);
  const weights: Weights = new Map();
  for (const spec of llamaTensorSpecs(config)) {
    const cols = spec.shape[spec.shape.length - 1], rows = spec.shape.length > 1 ? spec.shape[0] : 1;
    const data = new Float32Array(rows * cols);
    const fill = synth.rows(spec.name);
    for (let r = 0; r < rows; r++) fill(r, data.subarray(r * cols, (r + 1) * cols));
    weights.set(spec.name, { shape: spec.shape, data });
  }
  return weights;
}

function checkWeights(weights: Weights, specs: HfTensorSpec[]): void {
  for (const s of specs) {
    const w = weights.get(s.name);
    if (!w) throw new Error(`weights lack tensor ${s.name}`);
    if (w.shape.join('×') !== s.shape.join('×')) throw new Error(`tensor ${s.name} has shape ${w.shape.join('×')}, the config needs ${s.shape.join('×')}`);
  }
  const known = new Set(specs.map((s) => s.name));
  for (const name of weights.keys()) if (!known.has(name)) throw new Error(`tensor ${name} does not belong to this config`);
}

function modelMetadata(opts: GgufModelOptions, arch: GgufArchitecture): Record<string, GgufMetaValue> {
  return {
    ...llamaModelMetadata(opts.config, arch),
    'general.name': { type: 'string', value: opts.name ?? 'hearth-synthetic' },
    'general.file_type': { type: 'u32', value: FILE_TYPE_ID[opts.type] },
    'general.quantization_version': { type: 'u32', value: 2 },
  };
}

/**
 * The generated models' byte-level BPE tokenizer as GGUF `tokenizer.ggml.*` (llama.cpp's "gpt2" model),
 * padded to the config's vocabulary with unused `[PADn]` tokens as llama.cpp's converter pads.
 */
export function tokenizerMetadata(config: ModelConfig): Record<string, GgufMetaValue> {
  const json = tinyTokenizer().json as { model: { vocab: Record<string, number>; merges: [string, string][] }; added_tokens: { id: number; content: string }[] };
  const tokens: string[] = [];
  for (const [t, id] of Object.entries(json.model.vocab)) tokens[id] = t;
  if (tokens.length > config.vocabSize) throw new Error(`vocabulary of ${config.vocabSize} is smaller than the tokenizer's ${tokens.length} tokens`);
  const special = new Map(json.added_tokens.map((a) => [a.content, a.id]));
  const types: number[] = tokens.map((_, id) => ([...special.values()].includes(id) ? 3 : 1)); // 3 = control, 1 = normal
  for (let id = tokens.length; id < config.vocabSize; id++) { tokens.push(`[PAD${id}]`); types.push(5); } // 5 = unused
  const id = (t: string) => ({ type: 'u32', value: special.get(t)! }) as GgufMetaValue;
  return {
    'tokenizer.ggml.model': { type: 'string', value: 'gpt2' },
    'tokenizer.ggml.pre': { type: 'string', value: 'gpt-2' },
    'tokenizer.ggml.tokens': { type: 'array', item: 'string', value: tokens },
    'tokenizer.ggml.token_type': { type: 'array', item: 'i32', value: types },
    'tokenizer.ggml.merges': { type: 'array', item: 'string', value: json.model.merges.map(([a, b]) => `${a} ${b}`) },
    'tokenizer.ggml.bos_token_id': id('<s>'),
    'tokenizer.ggml.eos_token_id': id('</s>'),
    'tokenizer.ggml.eot_token_id': id('<|im_end|>'),
    'tokenizer.ggml.add_bos_token': { type: 'bool', value: true },
    'tokenizer.ggml.add_eos_token': { type: 'bool', value: false },
    'tokenizer.chat_template': { type: 'string', value: TINY_CHAT_TEMPLATE },
  };
}

/** 32-bit FNV-1a of a string: a stable per-tensor seed component. */
function hashName(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Synthetic weights, one row at a time, each row from its own seed (so rows can be made in any order).
 * Scales: input projections N(0, 1/fan_in) keep activations at unit scale; output projections are scaled
 * so all layers together add about `residual` × the embedding's size to the residual stream.
 */
export class SyntheticWeights {
  private readonly embedStd: number;
  private readonly outStd: number; // per-layer output projections, before 1/sqrt(fan_in)
  private readonly headSelf: number = 0; // γ: weight of the copied embedding in a head row
  private readonly headScale: number = 0; // β
  private readonly permA: number;
  private readonly permB: number;

  constructor(private readonly config: ModelConfig, private readonly seed: number, margin: number) {
    const { hiddenSize: D, vocabSize: V, numLayers: L } = config;
    const z = Math.sqrt(2 * Math.log(V)) + margin; // wanted (structured logit) / (std of the other logits)
    let residual: number;
    if (config.tieWordEmbeddings) {
      // logit_v = h·e_v: the current token's logit stands sqrt(D)·cos(h, e_cur) standard deviations out,
      // so the residual added by the layers sets the margin: cos = z/sqrt(D).
      const cos = Math.min(0.95, Math.max(0.3, z / Math.sqrt(D)));
      residual = Math.sqrt(1 / (cos * cos) - 1);
      this.embedStd = 2 / Math.sqrt(D); // other logits ~ N(0, 2²)
    } else {
      residual = 0.5;
      this.embedStd = 1;
      const cos = 1 / Math.sqrt(1 + residual * residual);
      const t = Math.min(0.95, z / (Math.sqrt(D) * cos));
      this.headSelf = t / Math.sqrt(1 - t * t);
      this.headScale = 2 / Math.sqrt(1 + this.headSelf * this.headSelf); // other logits ~ N(0, 2²)
    }
    // Each layer adds ≈ 1.17·outStd per element (attention ≈ outStd, SiLU-gated MLP ≈ 0.6·outStd).
    this.outStd = (residual * this.embedStd) / (1.17 * Math.sqrt(Math.max(1, L)));
    // σ(v) = (a·v + b) mod V with a coprime to V.
    const primes = [7919, 104729, 15485863, 32452843];
    this.permA = primes.find((p) => gcd(p % V, V) === 1 && p % V > 1) ?? 1;
    this.permB = (seed * 2654435761 + 12345) % V;
  }

  /** A function filling `out` with HF row `row` of tensor `name` (made once per tensor: rows are hot). */
  rows(name: string): (row: number, out: Float32Array) => void {
    const { hiddenSize: D, intermediateSize: F, numHeads: H, headDim: hd, vocabSize: V } = this.config;
    const leaf = name.replace(/^model\.layers\.\d+\./, '');
    const gauss = (scale: number, mean = 0) => (row: number, out: Float32Array) => fillGaussian(out, this.rowSeed(name, row), scale, mean);
    switch (leaf) {
      case 'model.embed_tokens.weight': return gauss(this.embedStd);
      case 'lm_head.weight': {
        // (β/sqrt(D))·(γ·e_σ(v)/embedStd + noise); the embedding row of σ(v) is embedStd × the unit
        // Gaussians of its seed, so regenerate those.
        const scale = this.headScale / Math.sqrt(D), noise = gauss(scale), unit = new Float32Array(D);
        return (row, out) => {
          noise(row, out);
          fillGaussian(unit, this.rowSeed('model.embed_tokens.weight', (this.permA * row + this.permB) % V), 1, 0);
          for (let i = 0; i < D; i++) out[i] += scale * this.headSelf * unit[i];
        };
      }
      case 'input_layernorm.weight': case 'post_attention_layernorm.weight': case 'model.norm.weight':
      case 'self_attn.q_norm.weight': case 'self_attn.k_norm.weight':
        return gauss(0.1, 1);
      case 'self_attn.q_proj.bias': case 'self_attn.k_proj.bias': case 'self_attn.v_proj.bias':
        return gauss(0.2);
      case 'self_attn.q_proj.weight': case 'self_attn.k_proj.weight': case 'self_attn.v_proj.weight':
      case 'mlp.gate_proj.weight': case 'mlp.up_proj.weight':
        return gauss(1 / Math.sqrt(D));
      case 'self_attn.o_proj.weight': return gauss(this.outStd / Math.sqrt(H * hd));
      case 'mlp.down_proj.weight': return gauss(this.outStd / Math.sqrt(F));
      default: throw new Error(`no synthetic weights for tensor ${name}`);
    }
  }

  private rowSeed(name: string, row: number): number {
    return (hashName(name) ^ Math.imul(row + 1, 0x9e3779b1) ^ Math.imul(this.seed + 1, 0x85ebca6b)) >>> 0;
  }
}

function gcd(a: number, b: number): number { return b ? gcd(b, a % b) : a; }

/**
 * Fill with approximately N(mean, scale²) values from a mulberry32 stream seeded by `seed`: each value is
 * the sum of the four bytes of one 32-bit draw (Irwin–Hall, 1021 levels, tails cut at ±3.5σ) — plenty for
 * random weights, and several times faster than Box–Muller, which matters for multi-GB models.
 */
function fillGaussian(out: Float32Array, seed: number, scale: number, mean: number): void {
  const k = scale / Math.sqrt((4 * (256 * 256 - 1)) / 12);
  let a = seed >>> 0;
  for (let i = 0; i < out.length; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    t = (t ^ (t >>> 14)) >>> 0;
    out[i] = mean + k * ((t & 255) + ((t >>> 8) & 255) + ((t >>> 16) & 255) + (t >>> 24) - 510);
  }
}
