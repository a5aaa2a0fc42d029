// Will a model fit in the GPU's free memory? Checked before a load on a GPU device, so a model too large is
// refused at once with the numbers instead of failing somewhere inside session creation or mid-request.
// Estimate: the weights as the graph will hold them, plus the KV cache budget (HEARTH_KV_CACHE_MB: on a GPU
// the cache lives there), plus the runtime's own allocations; against free memory as detection saw it.
import type { ModelConfig } from './model-config.js';
import type { WeightType } from './llama-graph.js';
import { parameterCount } from './model-size.js';
import { RUNTIME_OVERHEAD_MIB } from '../domain/memory-fit.js';

export interface DeviceMemory {
  /** The GPU's name ("NVIDIA H100 80GB HBM3"). */
  name: string;
  totalMiB: number;
  /** Total less what was in use when detected. */
  freeMiB: number;
}

export interface ModelMemoryInput {
  config: ModelConfig;
  weightType: WeightType;
  /** Bytes of the model's weight files. */
  fileBytes: number;
  /** The files hold GGUF blocks (served as stored: the file's bytes). */
  gguf: boolean;
  /** float16 weights are served at 16 bits on this device (so float files are held as stored). */
  half: boolean;
  kvCacheBytes: number;
}

export interface MemoryNeed {
  weightsMiB: number;
  kvCacheMiB: number;
  runtimeMiB: number;
  totalMiB: number;
}

/** 4-bit blocks of 128 with a float scale (and zero point) per block: ~4.5 bits per weight. */
const Q4_BYTES_PER_PARAM = 4.5 / 8;
/**
 * GGUF blocks as the graph holds them (gguf-repack.ts: 4-bit codes, a float32 scale per 32, offsets for K-quants)
 * take 0.63–0.75 B/weight where a Q4_K file takes 0.56: up to 1.35× the file (docs/architecture.md, model weights).
 */
export const GGUF_GRAPH_BYTES_PER_FILE_BYTE = 1.35;

export function modelMemoryNeed(m: ModelMemoryInput): MemoryNeed {
  const params = parameterCount(m.config);
  let weights: number;
  if (m.weightType === 'f32') weights = params * 4;
  else if (m.weightType === 'q4') {
    // The embedding table stays float32 (a Gather); projections and the LM head go to 4 bits.
    const embedding = m.config.vocabSize * m.config.hiddenSize;
    weights = embedding * 4 + (params - embedding) * Q4_BYTES_PER_PARAM;
  } else if (m.gguf) weights = m.fileBytes * GGUF_GRAPH_BYTES_PER_FILE_BYTE;
  else weights = m.half ? m.fileBytes : params * 4;
  const weightsMiB = Math.ceil(weights / 2 ** 20);
  const kvCacheMiB = Math.ceil(m.kvCacheBytes / 2 ** 20);
  return { weightsMiB, kvCacheMiB, runtimeMiB: RUNTIME_OVERHEAD_MIB, totalMiB: weightsMiB + kvCacheMiB + RUNTIME_OVERHEAD_MIB };
}

export class ModelTooLargeError extends Error {}

/** Throws ModelTooLargeError, with the numbers, when `need` exceeds the device's free memory. */
export function checkFitsDevice(model: string, device: string, need: MemoryNeed, memory: DeviceMemory, weightType: WeightType): void {
  if (need.totalMiB <= memory.freeMiB) return;
  throw new ModelTooLargeError(
    `${model} does not fit on ${device} (${memory.name}): it needs ~${need.totalMiB} MiB (weights ${need.weightsMiB} MiB as ${weightType}, ` +
      `KV cache ${need.kvCacheMiB} MiB from HEARTH_KV_CACHE_MB, runtime ${need.runtimeMiB} MiB) and the GPU has ${memory.freeMiB} MiB free of ${memory.totalMiB} MiB; ` +
      `use HEARTH_WEIGHTS=q4, a smaller HEARTH_KV_CACHE_MB, or a larger GPU`,
  );
}
