// llama.cpp as an independent reference (test and benchmark only): node-llama-cpp's prebuilt CPU binary,
// loaded offline (build: 'never', no downloads, no GPU), driven with token ids so tokenization plays no part.
//
//   await llamaCppGreedy(path, promptIds, n)   → the n tokens greedy decoding appends to promptIds
//   await llamaCppLogits(path, ids)            → logits after each position (row i predicts ids[i+1])
//   await llamaCppTokenize(path, text)         → llama.cpp's tokenization of text with the file's tokenizer
//   await withLlamaCppModel(path, async (m) => …)  → several calls on one loaded model
//
// The binary is loaded once per process. Each call loads the model (memory-mapped, as llama.cpp serves it)
// and frees it afterwards unless run inside withLlamaCppModel.
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from 'node-llama-cpp';

export interface LlamaCppOptions {
  /** CPU threads (default 2: this machine's cores). */
  threads?: number;
  /**
   * KV cache element type (default F16, llama.cpp's own default: keys and values are rounded to f16, which
   * moves logits by ~1e-3 of their scale). F32 with flashAttention: false (its CPU kernel works in f16 too)
   * makes llama.cpp's attention exact to float32 rounding.
   */
  kvCacheType?: 'F16' | 'F32';
  /** llama.cpp's flash-attention kernel (default: llama.cpp decides). */
  flashAttention?: boolean;
}

let llamaPromise: Promise<Llama> | null = null;

/** The llama.cpp binary shipped in node-llama-cpp's npm packages, CPU only, never built or downloaded. */
export function llamaCpp(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, logLevel: LlamaLogLevel.error });
  return llamaPromise;
}

export interface LlamaCppModel {
  readonly model: LlamaModel;
  readonly vocabSize: number;
  greedy(promptIds: number[], n: number): Promise<number[]>;
  logits(ids: number[]): Promise<Float32Array[]>;
  tokenize(text: string): number[];
}

/** Load `path`, run `fn` with it, free it. */
export async function withLlamaCppModel<T>(path: string, fn: (m: LlamaCppModel) => Promise<T>, opts: LlamaCppOptions = {}): Promise<T> {
  const llama = await llamaCpp();
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const threads = opts.threads ?? 2;
  const embd = model.fileInfo.tensorInfo?.find((t) => t.name === 'token_embd.weight');
  if (!embd) throw new Error(`${path}: no token_embd.weight tensor`);
  const vocabSize = Number(embd.dimensions[1]);
  const withSequence = async <R>(tokens: number, run: (seq: ReturnType<Awaited<ReturnType<LlamaModel['createContext']>>['getSequence']>) => Promise<R>) => {
    const size = Math.max(256, Math.ceil(tokens / 256) * 256);
    const kv = opts.kvCacheType ?? 'F16';
    const context = await model.createContext({ contextSize: size, batchSize: size, threads, sequences: 1, experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv, flashAttention: opts.flashAttention });
    try { return await run(context.getSequence()); } finally { await context.dispose(); }
  };
  const m: LlamaCppModel = {
    model,
    vocabSize,
    async greedy(promptIds, n) {
      if (n <= 0) return [];
      return withSequence(promptIds.length + n, async (seq) => {
        const out: number[] = [];
        for await (const token of seq.evaluate(promptIds as Token[], { temperature: 0 })) {
          out.push(token);
          if (out.length >= n) break;
        }
        return out;
      });
    },
    async logits(ids) {
      return withSequence(ids.length, async (seq) => {
        const results = await seq.controlledEvaluate(ids.map((id) => [id as Token, { generateNext: { logits: true } }]));
        return results.map((r, i) => {
          const map = r?.next.logits;
          if (!map || map.size !== vocabSize) throw new Error(`llama.cpp returned ${map?.size ?? 0} logits at position ${i}, expected ${vocabSize}`);
          const row = new Float32Array(vocabSize);
          for (const [token, value] of map) row[token] = value;
          return row;
        });
      });
    },
    tokenize(text) {
      return model.tokenize(text, true).map(Number);
    },
  };
  try {
    return await fn(m);
  } finally {
    await model.dispose();
  }
}

/** Greedy decoding: the `n` tokens llama.cpp appends to `promptIds` (it does not stop at end-of-sequence tokens). */
export function llamaCppGreedy(path: string, promptIds: number[], n: number, opts?: LlamaCppOptions): Promise<number[]> {
  return withLlamaCppModel(path, (m) => m.greedy(promptIds, n), opts);
}

/** Teacher-forced logits: row i is llama.cpp's logits for the token after ids[0..i] (one row per id). */
export function llamaCppLogits(path: string, ids: number[], opts?: LlamaCppOptions): Promise<Float32Array[]> {
  return withLlamaCppModel(path, (m) => m.logits(ids), opts);
}

/** llama.cpp's tokenization of `text` with the file's own tokenizer (special tokens parsed, BOS as the file says). */
export function llamaCppTokenize(path: string, text: string, opts?: LlamaCppOptions): Promise<number[]> {
  return withLlamaCppModel(path, async (m) => m.tokenize(text), opts);
}
