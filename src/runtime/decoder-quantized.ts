// Matrices kept in the file's own ggml blocks: which runs of a stacked projection have a MatMulNBits form,
// their blocks repacked once (gguf-repack.ts), the MatMulNBits node with per-block offsets, and the stable
// names their initializers share with the embedding (decoder-embedding.ts).
import { DataType, type GraphBuilder } from './onnx-proto.js';
import type { SourceTensor } from './weight-source.js';
import { nbitsLayout, repackGgml, type NBitsWeights } from './gguf-repack.js';
import { transpose } from './decoder-weights.js';
import { nbitsProduct } from './nbits-product.js';

/** Consecutive source tensors of one ggml type with a MatMulNBits form (type null: float32), or null if none has one. */
export function ggmlRuns(tensors: SourceTensor[], half: boolean): { type: number | null; tensors: SourceTensor[] }[] | null {
  const typeOf = (t: SourceTensor) => (t.ggml && nbitsLayout(t.ggml.type) ? t.ggml.type : null);
  if (tensors.every((t) => typeOf(t) === null && !(half && t.f16))) return null;
  const runs: { type: number | null; tensors: SourceTensor[] }[] = [];
  for (const t of tensors) {
    const type = typeOf(t);
    const last = runs[runs.length - 1];
    if (last && last.type === type) last.tensors.push(t); else runs.push({ type, tensors: [t] });
  }
  return runs;
}

/** Repack tensors of one ggml type, stacked along N, once (MatMul and embedding initializers share it). */
const repackCache = new WeakMap<SourceTensor[], NBitsWeights>();
export function repackStacked(tensors: SourceTensor[], K: number): NBitsWeights {
  const hit = repackCache.get(tensors);
  if (hit) return hit;
  const parts = tensors.map((t) => repackGgml(t.ggml!.type, t.ggml!.bytes(), t.shape[0], K));
  const cat = <T extends Uint8Array | Float32Array>(xs: T[]): T => {
    if (xs.length === 1) return xs[0];
    const out = new (xs[0].constructor as new (n: number) => T)(xs.reduce((a, x) => a + x.length, 0));
    let o = 0;
    for (const x of xs) { out.set(x, o); o += x.length; }
    return out;
  };
  const r: NBitsWeights = { ...parts[0], packed: cat(parts.map((p) => p.packed)), scales: cat(parts.map((p) => p.scales)), offsets: parts[0].offsets ? cat(parts.map((p) => p.offsets!)) : null };
  repackCache.set(tensors, r);
  return r;
}

/**
 * input [B, S, K] · Wᵀ on the file's own blocks (nbits-product.ts). Initializers are named after the stacked
 * source tensors; offsets are stored transposed ([K/block, N]) for a MatMul over any batch shape.
 */
export function nbitsMatMul(g: GraphBuilder, input: string, tensors: SourceTensor[], K: number, accuracyLevel: number): string {
  const N = tensors.reduce((a, t) => a + t.shape[0], 0);
  const { bits, block, hasOffsets } = nbitsLayout(tensors[0].ggml!.type)!;
  const name = `nbits.${tensors.map(tensorKey).join('+')}`;
  const repacked = () => repackStacked(tensors, K);
  const packed = g.initializer(name, DataType.UINT8, [N, K / block, (block * bits) / 8], () => repacked().packed);
  const scales = g.floats(name + '.scales', [N * (K / block)], () => repacked().scales);
  const offsets = hasOffsets ? { name: g.floats(name + '.offsets_t', [K / block, N], () => transpose(repacked().offsets!, N, K / block)), layout: 'kn' as const } : null;
  return nbitsProduct(g, input, 3, { N, K, bits, block, packed, scales, offsets }, accuracyLevel);
}

/** A stable name for a source tensor within one graph build (object identity → counter). */
const tensorKeys = new WeakMap<SourceTensor, string>();
let tensorKeyCounter = 0;
export function tensorKey(t: SourceTensor): string {
  let k = tensorKeys.get(t);
  if (!k) { k = `t${tensorKeyCounter++}`; tensorKeys.set(t, k); }
  return k;
}
