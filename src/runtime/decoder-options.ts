// What a decoder graph is built for (GraphOptions) and the choices that follow from it: the attention kind a
// device gets, the cache's head size, the name of the cache's row dimension. Every decoder-*.ts reads these.
import type { ModelConfig } from './model-config.js';
import type { ExternalData } from './onnx-proto.js';

export type AttentionKind = 'gqa' | 'standard' | 'onnx23';
export type WeightType = 'stored' | 'f32' | 'q4';
/**
 * What one decoder body computes attention with: a kind, 'decode' (runner graphs, one new token per row)
 * or 'packed' (runner graphs, rows with different numbers of new tokens packed into one sequence).
 */
export type BodyForm = AttentionKind | 'decode' | 'packed';

export interface GraphOptions {
  attention: AttentionKind;
  /**
   * Exported graphs follow the Optimum interface exactly: full `present.{i}.key|value` outputs and no
   * `num_logits_to_keep` input. Hearth's own runner graph (default) instead outputs only the new
   * tokens' keys/values, `new_key_values.{i}.key|value` [B, KV, S, hd]: onnxruntime-node copies every
   * output into JS memory (even one given as a preallocated fetch), so returning the whole cache
   * would copy it once more per step and churn the garbage collector (measured: 1.4 MB per token on
   * the ~20M model at context 170, a major GC every ~40 tokens).
   */
  forExport?: boolean;
  /**
   * Add per-row LoRA inputs (see lora.ts): for each projection group (qkv, o, gate_up, down)
   * `lora.{group}.a` [num_layers, batch_size, in, rank] and `.b` [num_layers, batch_size, rank, out],
   * added to the base projection. Rank may be 0 (no adapter in the batch). One input per group, not per
   * layer: onnxruntime-node wraps every feed, and 64 of them (~20M) cost 0.4–0.7 ms per step even when
   * the If skips them; 8 cost ~0.05 ms.
   */
  lora?: boolean;
  /**
   * What the projections, LM head and embedding compute with:
   *   'stored' (default) as the file holds them: ggml block-quantized tensors (GGUF) as MatMulNBits /
   *           GatherBlockQuantized over the same blocks (see gguf-repack.ts), float tensors as float32;
   *   'f32'   everything dequantized to float32;
   *   'q4'    projections and LM head re-quantized to 4 bits in blocks of 128 (MatMulNBits, int8
   *           activations): 2-5× faster decode than f32 and 6× smaller. Matrices whose input size is not
   *           a multiple of 16 stay f32.
   */
  weightType?: WeightType;
  /** Preferred block length of the 4-bit weights (default Q4_BLOCK = 128; see q4BlockFor for input sizes it does not divide). */
  q4Block?: number;
  /**
   * MatMulNBits' accuracy_level for the stored blocks: 4 (default) rounds activations to int8 per block, as
   * llama.cpp's quantized dot products do, for int8 kernels; 0 computes in float32 (slower; exact tests).
   */
  nbitsAccuracy?: 0 | 4;
  /**
   * Serve float16 weights at 16 bits (MatMul in float16 between two Casts; the embedding gathered in float16)
   * instead of widening them to float32: for devices with fast 16-bit math (see fast-half.ts). Half the
   * memory and bytes per decode step; activations and the residual stream stay float32.
   */
  half?: boolean;
  /**
   * Device-resident KV cache (runner graphs on a GPU, GroupQueryAttention only): output GroupQueryAttention's
   * whole present, `present.{i}.key|value` [rows, KV, present_sequence_length, hp], which the runner keeps in GPU
   * memory and feeds back as the next step's past (resident-kv.ts), instead of the new positions for the host to
   * append. No in-place decode or packed forms: they exist to spare host copies that a device cache never makes.
   */
  residentKv?: boolean;
  /** Write large initializers to this side file (ONNX external data) instead of into the graph. */
  external?: ExternalData;
  /** Rows of the rotary tables = longest supported context. */
  maxPositions: number;
}

/**
 * Chosen by measurement (2-core Xeon, ORT 1.30, 2 threads): GroupQueryAttention when head_dim % 16 == 0
 * (on ~20M/~120M models it tied or beat opset-23 Attention, and the notes measured ~2× the standard
 * graph on ~120M); otherwise the opset-23 Attention graph,
 * 1.3–1.8× faster than the standard graph and zero-padded GQA on stories260K (head_dim 8).
 * On a GPU always GroupQueryAttention: ORT's WebGPU provider has no kernel for the opset-23 Attention op (it
 * ran on the CPU, with copies both ways every layer) nor for half of the standard graph's mask and shape ops,
 * while GroupQueryAttention and every projection/norm ran on WebGPU (ORT 1.30, SwiftShader adapter, 2026-11-26).
 */
export function defaultAttention(config: ModelConfig, device = 'cpu'): AttentionKind {
  if (device !== 'cpu') return 'gqa';
  return config.headDim % 16 === 0 ? 'gqa' : 'onnx23';
}

/** Head size of the KV cache tensors: GQA pads heads to a multiple of 16. */
export function cacheHeadDim(config: ModelConfig, attention: AttentionKind): number {
  return attention === 'gqa' ? Math.ceil(config.headDim / 16) * 16 : config.headDim;
}

/**
 * Symbolic name of the cache's batch dimension. Runner graphs name it apart from input_ids' batch_size:
 * packed runs feed input_ids as one row over a cache of several (ORT plans buffers by these names, and
 * one name for both made it reuse a [1, N, ·] buffer for [B, S, ·]).
 */
export function cacheRowsDim(opts: GraphOptions): string {
  return opts.forExport ? 'batch_size' : 'rows';
}
