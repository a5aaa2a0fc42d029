// Minimal safetensors (https://github.com/huggingface/safetensors) for F32 tensors:
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the
// raw little-endian data. The header is space-padded to a multiple of 8 bytes.
import type { Weights } from './model-config.js';

export function encodeSafetensors(tensors: Weights, metadata: Record<string, string> = {}): Buffer {
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', ...metadata } };
  let offset = 0;
  for (const name of names) {
    const t = tensors.get(name)!;
    const size = t.shape.reduce((a, b) => a * b, 1);
    if (size !== t.data.length) throw new Error(`tensor ${name}: shape [${t.shape}] does not match ${t.data.length} values`);
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let at = 8 + headerBytes.length;
  for (const name of names) {
    const t = tensors.get(name)!;
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).copy(out, at);
    at += t.data.byteLength;
  }
  return out;
}

export function decodeSafetensors(bytes: Buffer): { tensors: Weights; metadata: Record<string, string> } {
  if (bytes.length < 8) throw new Error('safetensors file is truncated');
  const headerLength = Number(bytes.readBigUInt64LE(0));
  if (8 + headerLength > bytes.length) throw new Error('safetensors header is longer than the file');
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<string, unknown>;
  const dataStart = 8 + headerLength;
  const tensors: Weights = new Map();
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = entry as Record<string, string>;
      continue;
    }
    const { dtype, shape, data_offsets: [begin, end] } = entry as { dtype: string; shape: number[]; data_offsets: [number, number] };
    if (dtype !== 'F32') throw new Error(`tensor ${name} has dtype ${dtype}; only F32 is supported here`);
    if (dataStart + end > bytes.length) throw new Error(`tensor ${name} runs past the end of the file`);
    // Copy into an aligned buffer (the data section need not be 4-byte aligned in memory).
    const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + dataStart + begin, bytes.byteOffset + dataStart + end));
    tensors.set(name, { shape, data });
  }
  return { tensors, metadata };
}
