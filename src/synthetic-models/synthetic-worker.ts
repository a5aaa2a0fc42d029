// Worker thread of synthetic-files.ts: turns chunks of rows of the synthetic weights into file bytes
// (GGUF blocks of the tensor's type, or safetensors values in F32/F16/BF16).
import { parentPort, workerData } from 'node:worker_threads';
import type { ModelConfig } from '../runtime/model-config.js';
import type { GgmlTypeName } from '../runtime/gguf-dequant.js';
import { f32ToF16 } from '../runtime/half.js';
import { llamaTensorSpecs } from '../runtime/gguf-llama-layout.js';
import { ggufRowsBytes, ggufTensorDecls, SyntheticWeights, type GgufFileType } from './tiny-gguf.js';

export type WorkerSetup =
  | { kind: 'gguf'; config: ModelConfig; type: GgufFileType; seed: number; margin: number; tensorTypes?: Record<string, GgmlTypeName> }
  | { kind: 'safetensors'; config: ModelConfig; dtype: 'F32' | 'F16' | 'BF16'; seed: number; margin: number };

/** Rows r0 … r0+n-1 of the tensor at this index (in the file's order). */
export interface ChunkJob {
  tensor: number;
  r0: number;
  n: number;
}

/** float32 → bfloat16 bits, rounding to nearest even (NaN stays NaN). */
function toBf16(values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const u = bits[i];
    out[i] = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 0x40 : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
  }
  return new Uint8Array(out.buffer);
}

function toF16(values: Float32Array): Uint8Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32ToF16(values[i]);
  return new Uint8Array(out.buffer);
}

function chunkMaker(setup: WorkerSetup): (job: ChunkJob) => Uint8Array {
  const synth = new SyntheticWeights(setup.config, setup.seed, setup.margin);
  const fillers = new Map<string, (row: number, out: Float32Array) => void>();
  const filler = (name: string) => {
    let f = fillers.get(name);
    if (!f) fillers.set(name, (f = synth.rows(name)));
    return f;
  };
  let scratch = new Float32Array(0);
  const scratchFor = (n: number) => (scratch.length >= n ? scratch : (scratch = new Float32Array(n)));
  if (setup.kind === 'gguf') {
    const decls = ggufTensorDecls(setup);
    return ({ tensor, r0, n }) => {
      const d = decls[tensor];
      const cols = d.hf.shape[d.hf.shape.length - 1];
      return ggufRowsBytes(setup.config, d, r0, n, scratchFor(n * cols), filler(d.hf.name));
    };
  }
  const specs = llamaTensorSpecs(setup.config);
  return ({ tensor, r0, n }) => {
    const s = specs[tensor];
    const cols = s.shape[s.shape.length - 1];
    const values = new Float32Array(n * cols);
    const fill = filler(s.name);
    for (let r = 0; r < n; r++) fill(r0 + r, values.subarray(r * cols, (r + 1) * cols));
    return setup.dtype === 'F32' ? new Uint8Array(values.buffer) : setup.dtype === 'BF16' ? toBf16(values) : toF16(values);
  };
}

if (parentPort) {
  const make = chunkMaker(workerData as WorkerSetup);
  const port = parentPort;
  port.on('message', (job: ChunkJob) => {
    let bytes = make(job);
    if (bytes.byteOffset !== 0 || bytes.byteLength !== bytes.buffer.byteLength) bytes = bytes.slice();
    port.postMessage(bytes, [bytes.buffer as ArrayBuffer]);
  });
}
