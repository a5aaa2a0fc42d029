// The generators' synthetic models (tiny-gguf.ts's SyntheticWeights) written to disk by a pool of worker
// threads, for models too large for one core: a GGUF file in any type (what writeGgufModel writes, byte for
// byte) and a Hugging Face folder with the same weights as safetensors in F32, F16 or BF16 (what PyTorch peers
// load). Rows are made in chunks on the workers and written in order by the main thread, so memory stays at
// a few chunks per thread and no float32 copy of the model exists.
//
//   await writeGgufParallel('8b.gguf', { config: shapeConfig('8b'), type: 'Q4_K', seed: 1 }, { threads: 16 })
//   await writeSyntheticHfFolder('8b-hf', shapeConfig('8b'), { seed: 1, dtype: 'BF16', threads: 16 })
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ModelConfig } from '../runtime/model-config.js';
import { llamaTensorSpecs } from '../runtime/gguf-llama-layout.js';
import { GgufWriter } from '../runtime/gguf-writer.js';
import { ggufMetadata, ggufTensorDecls, type GgufModelInfo, type GgufModelOptions } from './tiny-gguf.js';
import { writeTinyModelFiles } from './tiny-model.js';
import type { ChunkJob, WorkerSetup } from './synthetic-worker.js';

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';
export const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };

/** Values per work chunk: 4M floats (16 MB of scratch per worker), enough to amortize a message. */
const CHUNK_VALUES = 1 << 22;

/**
 * A worker running the module beside this one: .mjs in the esbuild bundle (scripts/gpu-bundle.ts builds it
 * as its own entry next to the bundle that imports this module); under tsx (development, tests) the .ts,
 * through tsx's loader registered in the worker first (workers do not inherit it).
 */
function startWorker(setup: WorkerSetup): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./synthetic-worker.mjs', import.meta.url), { workerData: setup });
  // import.meta.resolve where there is one; vitest's transform has none, so through tsx's package folder.
  const tsxApi = typeof import.meta.resolve === 'function' ? import.meta.resolve('tsx/esm/api')
    : pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;
  const module = new URL('./synthetic-worker.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(tsxApi)}).then((api) => { api.register(); return import(${JSON.stringify(module)}); });`, { eval: true, workerData: setup });
}

/** A pool of workers that turns row chunks into bytes; results come back in submission order. */
class ChunkPool {
  private readonly workers: Worker[];
  private readonly idle: Worker[];
  private readonly waiting: { job: ChunkJob; resolve: (b: Uint8Array) => void; reject: (e: Error) => void }[] = [];

  constructor(setup: WorkerSetup, threads: number) {
    this.workers = Array.from({ length: threads }, () => startWorker(setup));
    this.idle = [...this.workers];
  }

  run(job: ChunkJob): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.idle.length && this.waiting.length) {
      const worker = this.idle.pop()!;
      const { job, resolve, reject } = this.waiting.shift()!;
      const onMessage = (bytes: Uint8Array) => { done(); resolve(bytes); };
      const onError = (err: Error) => { done(); reject(err); };
      const done = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        this.idle.push(worker);
        this.dispatch();
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.postMessage(job);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

/** Every chunk of every tensor, in file order, with `window` chunks in flight; `write` gets the bytes in order. */
async function inOrder(pool: ChunkPool, jobs: ChunkJob[], window: number, write: (bytes: Uint8Array, job: ChunkJob) => void): Promise<void> {
  const pending: Promise<Uint8Array>[] = [];
  let next = 0;
  for (let i = 0; i < jobs.length; i++) {
    while (next < jobs.length && next < i + window) pending[next] = pool.run(jobs[next++]);
    write(await pending[i], jobs[i]);
    delete pending[i];
  }
}

function chunksOf(tensor: number, shape: number[]): ChunkJob[] {
  const cols = shape[shape.length - 1], rows = shape.length > 1 ? shape[0] : 1;
  const per = Math.max(1, Math.floor(CHUNK_VALUES / cols));
  const jobs: ChunkJob[] = [];
  for (let r0 = 0; r0 < rows; r0 += per) jobs.push({ tensor, r0, n: Math.min(per, rows - r0) });
  return jobs;
}

/** writeGgufModel's synthetic file (same bytes), made on `threads` worker threads. */
export async function writeGgufParallel(path: string, opts: Omit<GgufModelOptions, 'weights' | 'onProgress'>, pool: { threads?: number } = {}): Promise<GgufModelInfo> {
  const threads = pool.threads ?? availableParallelism();
  const decls = ggufTensorDecls(opts);
  const writer = new GgufWriter(path, { metadata: ggufMetadata(opts), tensors: decls });
  const workers = new ChunkPool({ kind: 'gguf', config: opts.config, type: opts.type, seed: opts.seed ?? 0, margin: opts.margin ?? 3, tensorTypes: opts.tensorTypes }, threads);
  try {
    await inOrder(workers, decls.flatMap((d, i) => chunksOf(i, d.hf.shape)), 2 * threads, (bytes) => writer.append(bytes));
    writer.close();
  } catch (err) {
    writer.abort();
    throw err;
  } finally {
    await workers.close();
  }
  return { path, bytes: writer.bytesWritten, tensors: decls.map((d) => ({ name: d.name, type: d.typeName, dims: d.dims })) };
}

/**
 * A Hugging Face folder (config.json, the tiny tokenizer, model.safetensors) holding the synthetic weights
 * that writeGgufModel quantizes for the same config and seed, here unquantized in `dtype`.
 */
export async function writeSyntheticHfFolder(dir: string, config: ModelConfig, opts: { seed?: number; margin?: number; dtype?: SafetensorsDtype; threads?: number } = {}): Promise<{ dir: string; bytes: number }> {
  const dtype = opts.dtype ?? 'F32';
  const threads = opts.threads ?? availableParallelism();
  writeTinyModelFiles(dir, { ...config });
  mkdirSync(dir, { recursive: true });
  const specs = llamaTensorSpecs(config);
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', generator: 'hearth synthetic-files', seed: String(opts.seed ?? 0) } };
  let offset = 0;
  for (const s of specs) {
    const bytes = s.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    header[s.name] = { dtype, shape: s.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8, 'utf8');
  const fd = openSync(join(dir, 'model.safetensors'), 'w');
  let position = 0;
  const write = (b: Uint8Array) => {
    let done = 0;
    while (done < b.length) done += writeSync(fd, b, done, b.length - done, position + done);
    position += b.length;
  };
  const workers = new ChunkPool({ kind: 'safetensors', config, dtype, seed: opts.seed ?? 0, margin: opts.margin ?? 3 }, threads);
  try {
    write(head);
    await inOrder(workers, specs.flatMap((s, i) => chunksOf(i, s.shape)), 2 * threads, write);
  } finally {
    closeSync(fd);
    await workers.close();
  }
  return { dir, bytes: position };
}
