// What the graph builder reads a model's weights from: each tensor by Hugging Face name, read when the
// graph needs it (never the whole model at once) either as float32 or, where the file holds it
// quantized, as the ggml blocks themselves, so quantized weights reach the graph without an f32 copy.
import { closeSync, openSync, readSync } from 'node:fs';
import type { Weights } from './model-config.js';

export interface SourceTensor {
  /** HF shape ([out, in] for a Linear). */
  shape: number[];
  /** The values as float32 (dequantized or widened on demand). */
  f32(): Float32Array;
  /** The IEEE half bits, when the file holds this tensor as float16 (served at 16 bits where that is fast). */
  f16?(): Uint16Array;
  /** The ggml encoding, when the file holds this tensor in a block-quantized type. */
  ggml?: { type: number; bytes(): Uint8Array };
}

export type WeightSource = Map<string, SourceTensor>;

/** In-memory float32 weights as a source (tests, generated models, the training side's tensors). */
export function weightsSource(weights: Weights): WeightSource {
  return new Map([...weights].map(([name, t]) => [name, { shape: t.shape, f32: () => t.data }]));
}

/** Bytes as 16-bit words (copied when the bytes do not start on an even offset). */
export function halfWords(b: Uint8Array): Uint16Array {
  const aligned = b.byteOffset % 2 === 0 ? b : b.slice();
  return new Uint16Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 2);
}

/** Read `length` bytes at `offset` of a file (opened for the one read: sources may live long). */
export function readRange(file: string, offset: number, length: number): Uint8Array {
  const out = Buffer.allocUnsafe(length);
  const fd = openSync(file, 'r');
  try {
    for (let done = 0; done < length; ) {
      const n = readSync(fd, out, done, length - done, offset + done);
      if (n === 0) throw new Error(`${file} ended before byte ${offset + length}`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return new Uint8Array(out.buffer, out.byteOffset, length);
}
