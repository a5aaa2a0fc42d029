// Hugging Face model folders: config.json → ModelConfig, safetensors → Weights, and the reverse
// (writing config.json for models Hearth creates or converts from GGUF).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Architecture, ModelConfig, RopeScaling, Weights } from './model-config.js';
import { listFolderTensors, readTensor, readTensors } from './safetensors.js';
import { openGguf, readGgufModel } from './gguf-model.js';
import { halfWords, readRange, type WeightSource } from './weight-source.js';
import { closeSync, openSync } from 'node:fs';

const ARCHITECTURES: Record<string, Architecture> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'mistral',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};
const HF_CLASS: Record<Architecture, string> = { llama: 'LlamaForCausalLM', mistral: 'MistralForCausalLM', qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM' };
const MODEL_TYPE: Record<Architecture, string> = { llama: 'llama', mistral: 'mistral', qwen2: 'qwen2', qwen3: 'qwen3' };

/** A JSON file's contents; the error names the file. */
export function readJson(path: string): Record<string, any> {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}

function ids(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}

function ropeScaling(raw: any): RopeScaling | null {
  if (!raw) return null;
  const type = raw.rope_type ?? raw.type;
  if (type === 'default') return null;
  if (type !== 'llama3') throw new Error(`unsupported rope_scaling type "${type}" (supported: llama3)`);
  return {
    type: 'llama3',
    factor: raw.factor,
    lowFreqFactor: raw.low_freq_factor,
    highFreqFactor: raw.high_freq_factor,
    originalMaxPositionEmbeddings: raw.original_max_position_embeddings,
  };
}

/** config.json (+ generation_config.json for extra EOS ids) → ModelConfig. `tensorNames` decides tying when config omits it. */
export function parseHfConfig(cfg: Record<string, any>, generation: Record<string, any> | null, tensorNames: Set<string>): ModelConfig {
  const archName = (cfg.architectures ?? [])[0] ?? cfg.model_type;
  const architecture = ARCHITECTURES[archName];
  if (!architecture) throw new Error(`unsupported architecture "${archName}" (supported: ${Object.keys(ARCHITECTURES).join(', ')})`);
  const need = (k: string) => { if (typeof cfg[k] !== 'number') throw new Error(`config.json is missing ${k}`); return cfg[k] as number; };
  const hidden = need('hidden_size');
  const heads = need('num_attention_heads');
  const eos = [...new Set([...ids(cfg.eos_token_id), ...ids(generation?.eos_token_id)])];
  const bos = ids(cfg.bos_token_id ?? generation?.bos_token_id)[0] ?? null;
  return {
    architecture,
    vocabSize: need('vocab_size'),
    hiddenSize: hidden,
    intermediateSize: need('intermediate_size'),
    numLayers: need('num_hidden_layers'),
    numHeads: heads,
    numKvHeads: cfg.num_key_value_heads ?? heads,
    headDim: cfg.head_dim ?? hidden / heads,
    maxPositionEmbeddings: cfg.max_position_embeddings ?? 2048,
    rmsNormEps: cfg.rms_norm_eps ?? 1e-6,
    ropeTheta: cfg.rope_theta ?? 10000,
    ropeScaling: ropeScaling(cfg.rope_scaling),
    tieWordEmbeddings: cfg.tie_word_embeddings ?? !tensorNames.has('lm_head.weight'),
    attentionBias: architecture === 'qwen2' ? true : Boolean(cfg.attention_bias),
    qkNorm: architecture === 'qwen3',
    bosTokenId: bos,
    eosTokenIds: eos,
    padTokenId: ids(cfg.pad_token_id)[0] ?? null,
    slidingWindow: cfg.use_sliding_window === false || typeof cfg.sliding_window !== 'number' ? null : cfg.sliding_window,
  };
}

/** ModelConfig → a standard HF config.json (so exported folders load in other tools). */
export function toHfConfig(c: ModelConfig): Record<string, unknown> {
  return {
    architectures: [HF_CLASS[c.architecture]],
    model_type: MODEL_TYPE[c.architecture],
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    max_position_embeddings: c.maxPositionEmbeddings,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling: c.ropeScaling && {
      rope_type: 'llama3', factor: c.ropeScaling.factor, low_freq_factor: c.ropeScaling.lowFreqFactor,
      high_freq_factor: c.ropeScaling.highFreqFactor, original_max_position_embeddings: c.ropeScaling.originalMaxPositionEmbeddings,
    },
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    hidden_act: 'silu',
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    pad_token_id: c.padTokenId,
    ...(c.slidingWindow ? { sliding_window: c.slidingWindow } : {}),
    torch_dtype: 'float32',
  };
}

export function readHfConfig(dir: string): ModelConfig {
  const cfgPath = join(dir, 'config.json');
  if (!existsSync(cfgPath)) throw new Error(`no config.json in ${dir}`);
  const gen = existsSync(join(dir, 'generation_config.json')) ? readJson(join(dir, 'generation_config.json')) : null;
  const names = new Set(listFolderTensors(dir).map((e) => e.name));
  return parseHfConfig(readJson(cfgPath), gen, names);
}

/** Names that carry no weights we use (older Llama checkpoints store rotary inv_freq buffers). */
const IGNORED = /rotary_emb\.inv_freq$/;

/** A model folder whose weights are one GGUF file (as `hearth models import` stores GGUF models). */
export const GGUF_WEIGHTS_FILE = 'model.gguf';

/**
 * Read a HF folder or a Hearth store entry into ModelConfig + float32 Weights (GGUF blocks dequantized).
 * This is the entry point for the training side (TF.js twin), which trains against exactly the values
 * the server serves.
 */
export function readModelWeights(dir: string, onBytes?: (bytes: number) => void): { config: ModelConfig; weights: Weights } {
  if (existsSync(join(dir, GGUF_WEIGHTS_FILE))) {
    let last = 0;
    const { config, weights } = readGgufModel(join(dir, GGUF_WEIGHTS_FILE), (done) => { onBytes?.(done - last); last = done; });
    return { config, weights };
  }
  const config = readHfConfig(dir);
  const weights = readTensors(listFolderTensors(dir), (n) => !IGNORED.test(n), onBytes);
  return { config, weights };
}

/**
 * A model folder's config and its weights as a source read tensor by tensor (the serving side: nothing
 * is held whole), with the files they come from.
 */
export function openModelWeights(dir: string): { config: ModelConfig; source: WeightSource; files: string[] } {
  const gguf = join(dir, GGUF_WEIGHTS_FILE);
  if (existsSync(gguf)) {
    const { config, source } = openGguf(gguf);
    return { config, source, files: [gguf] };
  }
  const config = readHfConfig(dir);
  const entries = listFolderTensors(dir).filter((e) => !IGNORED.test(e.name));
  const source: WeightSource = new Map(entries.map((e) => [e.name, {
    shape: e.shape,
    f32: () => {
      const fd = openSync(e.file, 'r');
      try { return readTensor(e, fd).data; } finally { closeSync(fd); }
    },
    ...(e.dtype === 'F16' ? { f16: () => halfWords(readRange(e.file, e.begin, e.end - e.begin)) } : {}),
  }]));
  return { config, source, files: [...new Set(entries.map((e) => e.file))] };
}
