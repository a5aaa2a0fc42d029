// Will a model fit on a device? Weights take parameters × bytes per parameter; on top come the
// KV cache and the runtime's own allocations (CUDA context, ONNX Runtime arenas, activations).

/** Without a model shape, the KV cache is budgeted as this share of the weights… */
export const KV_HEADROOM_FRACTION = 0.2;
/** …and at least this much (small models still need room for a useful context). */
export const MIN_KV_HEADROOM_MIB = 512;
/** Fixed runtime overhead per replica. */
export const RUNTIME_OVERHEAD_MIB = 512;

export interface MemoryNeedInput {
  paramCount: number;
  /** 4 for f32, 2 for f16/bf16, ~0.56 for Q4_K, … */
  bytesPerParam: number;
  /** KV cache budget when known (see kvCacheMiB); otherwise the default headroom applies. */
  kvCacheMiB?: number;
}

/** Estimated MiB one replica needs, rounded up. */
export function estimateMemoryNeedMiB(model: MemoryNeedInput): number {
  if (!(model.paramCount > 0) || !(model.bytesPerParam > 0)) {
    throw new Error(`estimateMemoryNeedMiB: paramCount and bytesPerParam must be positive (got ${model.paramCount}, ${model.bytesPerParam})`);
  }
  const weightsMiB = (model.paramCount * model.bytesPerParam) / 2 ** 20;
  const kvMiB = model.kvCacheMiB ?? Math.max(weightsMiB * KV_HEADROOM_FRACTION, MIN_KV_HEADROOM_MIB);
  return Math.ceil(weightsMiB + kvMiB + RUNTIME_OVERHEAD_MIB);
}

/** The memory-fit rule: offered only when the estimate fits the device's total memory. */
export function fitsInMemory(model: MemoryNeedInput, deviceMemoryMiB: number): boolean {
  return estimateMemoryNeedMiB(model) <= deviceMemoryMiB;
}

export interface KvCacheShape {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  /** Tokens held at once across all sequences (context length × concurrent sequences). */
  tokens: number;
  /** 4 for an f32 cache, 2 for f16. */
  bytesPerValue: number;
}

/** Exact KV cache size: keys and values for every layer, KV head and token. */
export function kvCacheMiB(shape: KvCacheShape): number {
  return (2 * shape.numLayers * shape.numKvHeads * shape.headDim * shape.tokens * shape.bytesPerValue) / 2 ** 20;
}
