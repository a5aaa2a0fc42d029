// The streaming GGUF writer: every metadata value type round-trips through the reader, tensors land at
// aligned offsets when streamed in arbitrary chunks, and misuse fails loudly instead of writing a bad file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GgufWriter, type GgufMetaValue } from '../../src/runtime/gguf-writer.js';
import { readGgufHeader } from '../../src/runtime/gguf-reader.js';
import { readRange } from '../../src/runtime/weight-source.js';
import { dequantize, GGML_TYPE } from '../../src/runtime/gguf-dequant.js';
import { quantize } from '../../src/runtime/gguf-quantize.js';
import { hfRowOfPermutedRow, permuteQK } from '../../src/runtime/gguf-llama-layout.js';
import { unpermuteQK } from '../../src/runtime/gguf-model.js';

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-writer-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('GGUF writer', () => {
  it('writes metadata of every GGUF value type, arrays included, as the reader reads them', () => {
    const metadata: Record<string, GgufMetaValue> = {
      u8: { type: 'u8', value: 250 }, i8: { type: 'i8', value: -100 }, u16: { type: 'u16', value: 65000 }, i16: { type: 'i16', value: -30000 },
      u32: { type: 'u32', value: 4_000_000_000 }, i32: { type: 'i32', value: -2_000_000_000 }, f32: { type: 'f32', value: 0.5 },
      u64: { type: 'u64', value: 2n ** 60n }, i64: { type: 'i64', value: -5 }, f64: { type: 'f64', value: Math.PI },
      bool: { type: 'bool', value: true }, string: { type: 'string', value: 'ünïcødé ✓' },
      strings: { type: 'array', item: 'string', value: ['a', '', 'Ġthe'] },
      floats: { type: 'array', item: 'f32', value: [1.5, -2] },
      ints: { type: 'array', item: 'i32', value: [-1, 7] },
      empty: { type: 'array', item: 'u8', value: [] },
    };
    const p = join(dir, 'meta.gguf');
    const w = new GgufWriter(p, { metadata, tensors: [] });
    w.close();
    const md = readGgufHeader(p).metadata;
    expect(md.get('u8')).toBe(250);
    expect(md.get('i8')).toBe(-100);
    expect(md.get('u16')).toBe(65000);
    expect(md.get('i16')).toBe(-30000);
    expect(md.get('u32')).toBe(4_000_000_000);
    expect(md.get('i32')).toBe(-2_000_000_000);
    expect(md.get('f32')).toBe(0.5);
    expect(md.get('u64')).toBe(2n ** 60n);
    expect(md.get('i64')).toBe(-5);
    expect(md.get('f64')).toBe(Math.PI);
    expect(md.get('bool')).toBe(true);
    expect(md.get('string')).toBe('ünïcødé ✓');
    expect(md.get('strings')).toEqual(['a', '', 'Ġthe']);
    expect(md.get('floats')).toEqual([1.5, -2]);
    expect(md.get('ints')).toEqual([-1, 7]);
    expect(md.get('empty')).toEqual([]);
  });

  it('streams tensors of several types in odd-sized chunks to aligned offsets', () => {
    const p = join(dir, 'tensors.gguf');
    const a = Float32Array.from({ length: 3 * 5 }, (_, i) => i - 7);
    const b = Float32Array.from({ length: 256 * 2 }, (_, i) => Math.sin(i));
    const qa = quantize(GGML_TYPE.F32, a), qb = quantize(GGML_TYPE.Q4_K, b);
    const w = new GgufWriter(p, {
      metadata: { 'general.name': { type: 'string', value: 't' } }, alignment: 64,
      tensors: [{ name: 'a', dims: [5, 3], type: GGML_TYPE.F32 }, { name: 'b', dims: [256, 2], type: GGML_TYPE.Q4_K }],
    });
    for (let i = 0; i < qa.length; i += 7) w.append(qa.subarray(i, i + 7));
    expect(w.nextTensor?.name).toBe('b');
    w.append(qb.subarray(0, 100));
    w.append(qb.subarray(100));
    expect(w.nextTensor).toBeNull();
    w.close();
    const f = readGgufHeader(p);
    expect(f.metadata.get('general.alignment')).toBe(64);
    expect(f.tensors.map((t) => [t.name, t.dims, t.type, t.fileOffset % 64])).toEqual([['a', [5, 3], 0, 0], ['b', [256, 2], 12, 0]]);
    expect(statSync(p).size).toBe(f.tensors[1].fileOffset + Math.ceil(qb.length / 64) * 64); // each tensor padded, the last too (as ggml writes)
    const t0 = f.tensors[0];
    expect(Array.from(dequantize(t0.type, readRange(p, t0.fileOffset, t0.byteSize), 15))).toEqual(Array.from(a));
    expect(Buffer.from(readFileSync(p).subarray(f.tensors[1].fileOffset, f.tensors[1].fileOffset + qb.length)).equals(Buffer.from(qb))).toBe(true);
  });

  it('refuses out-of-order, oversized and missing tensor data', () => {
    const tensors = [{ name: 'x', dims: [4], type: GGML_TYPE.F32 }, { name: 'y', dims: [4], type: GGML_TYPE.F32 }];
    const w = new GgufWriter(join(dir, 'bad.gguf'), { metadata: {}, tensors });
    expect(() => w.writeTensor('y', new Uint8Array(16))).toThrow(/tensor y written out of order \(expected x\)/);
    expect(() => w.writeTensor('x', new Uint8Array(12))).toThrow(/has 12 bytes.*need 16/);
    expect(() => w.append(new Uint8Array(20))).toThrow(/20 bytes for tensor x .* 16 left/);
    w.writeTensor('x', new Uint8Array(16));
    expect(() => w.close()).toThrow(/closed before tensor y was written/);
    expect(() => new GgufWriter(join(dir, 'dup.gguf'), { metadata: {}, tensors: [tensors[0], tensors[0]] })).toThrow(/declared twice/);
    expect(() => new GgufWriter(join(dir, 'q2.gguf'), { metadata: {}, tensors: [{ name: 'z', dims: [256], type: 10 }] })).toThrow(/unsupported GGUF tensor type Q2_K/);
  });

  it('permutes q/k rows as llama.cpp does, and gguf-model.ts undoes it', () => {
    const data = Float32Array.from({ length: 16 * 3 }, (_, i) => i);
    const permuted = permuteQK(data, 16, 3, 2);
    expect(Array.from(unpermuteQK(permuted, 16, 3, 2))).toEqual(Array.from(data));
    // Within a head of 8 rows: GGUF rows 0,1,2,3 hold HF rows 0,4,1,5 (pairs of the two rotary halves).
    expect([0, 1, 2, 3, 8, 9].map((r) => hfRowOfPermutedRow(r, 8))).toEqual([0, 4, 1, 5, 8, 12]);
    expect(Array.from(permuted.subarray(3, 6))).toEqual(Array.from(data.subarray(12, 15)));
  });
});
