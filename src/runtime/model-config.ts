// The one description of a decoder-only model that every part of Hearth shares:
// the importers (GGUF, Hugging Face folders) produce it, the ONNX graph builder (inference)
// and the TF.js model twin (training) consume it. Weight names are always Hugging Face names
// (`model.layers.0.self_attn.q_proj.weight`, …) in Hugging Face layout ([out, in] for Linear).

export type Architecture = 'llama' | 'mistral' | 'qwen2' | 'qwen3';

export interface RopeScaling {
  /** Llama-3 style frequency scaling (`rope_type: "llama3"`). */
  type: 'llama3';
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositionEmbeddings: number;
}

export interface ModelConfig {
  architecture: Architecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  maxPositionEmbeddings: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling | null;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2). */
  attentionBias: boolean;
  /** Per-head RMSNorm on q and k before rotary (Qwen3). */
  qkNorm: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  /**
   * Sliding-window attention span (Mistral v0.1), if the model uses one. Hearth attends over the full
   * context, which is identical up to this many positions, so the runtime caps the context here.
   */
  slidingWindow?: number | null;
}

/** A dense float tensor in row-major order. Quantized GGUF tensors are dequantized to this. */
export interface Tensor32 {
  shape: number[];
  data: Float32Array;
}

/** Weights keyed by Hugging Face tensor name. */
export type Weights = Map<string, Tensor32>;
