// llama.cpp as an independent reference (test and benchmark only): node-llama-cpp's prebuilt CPU binary,
// loaded offline (build: 'never', no downloads, no GPU), driven with token ids so tokenization plays no part.
//
//   await llamaCppGreedy(path, promptIds, n)   → the n tokens greedy decoding appends to promptIds
//   await llamaCppLogits(path, ids)            → logits after each position (row i predicts ids[i+1]), up to a
//                                                constant per row (compare differences, or center both)
//   await llamaCppTokenize(path, text)         → llama.cpp's tokenization of text with the file's tokenizer
//   await withLlamaCppModel(path, async (m) => …)  → several calls on one loaded model
//
// The binary is loaded once per process. Each call loads the model (memory-mapped, as llama.cpp serves it)
// and frees it afterwards unless run inside withLlamaCppModel.
import { getLlama, type Llama, type LlamaModel, type Token } from 'node-llama-cpp';

export interface LlamaCppOptions {
  /** CPU threads (default 2: this machine's cores). */
  threads?: number;
}

let llamaPromise: Promise<Llama> | null = null;

/** The llama.cpp binary shipped in node-llama-cpp's npm packages, CPU only, never built or downloaded. */
export function llamaCpp(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, logLevel: 'error' as never });
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
    const context = await model.createContext({ contextSize: size, batchSize: size, threads, sequences: 1 });
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
      // node-llama-cpp 3.21 (the release whose binaries for every platform the registry serves, so the
      // lockfile installs anywhere) exposes next-token probabilities, not logits: with temperature T and no
      // truncation, p = softmax(logits / T), so T·ln p = logits − (a constant per row). T = 100 keeps every
      // probability well above float32's smallest (logits recovered to ~0.003 on a 1024-token vocabulary).
      const T = 100;
      return withSequence(ids.length, async (seq) => {
        const options = { temperature: T, topK: vocabSize, topP: 1, minP: 0 };
        const results = await seq.controlledEvaluate(ids.map((id) => [id as Token, { generateNext: { probabilities: true, options } }]));
        return results.map((r, i) => {
          const map = r?.next.probabilities;
          if (!map || map.size !== vocabSize) throw new Error(`llama.cpp returned ${map?.size ?? 0} probabilities at position ${i}, expected ${vocabSize}`);
          const row = new Float32Array(vocabSize);
          for (const [token, p] of map) row[token] = T * Math.log(p);
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
