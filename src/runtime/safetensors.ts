// safetensors (https://github.com/huggingface/safetensors) reading (F32 / F16 / BF16 → float32) and writing (F32):
// model folders from files, including sharded checkpoints (model.safetensors.index.json), and small files
// (adapters, optimizer moments) in memory. Format: u64 LE header length, JSON header (space-padded so the data
// stays 8-byte aligned), then the raw little-endian data.
import { closeSync, existsSync, openSync, readFileSync, readSync, writeSync, fstatSync } from 'node:fs';
import { join } from 'node:path';
import type { Tensor32, Weights } from './model-config.js';
import { decodeBF16, decodeF16, decodeF32 } from './half.js';

export interface SafetensorsEntry {
  name: string;
  dtype: string;
  shape: number[];
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
  file: string;
}

const DTYPE_BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

/** Parse a safetensors header; checks offsets against the file size. */
export function readSafetensorsHeader(file: string): SafetensorsEntry[] {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (size < 8 || readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new Error(`bad safetensors header: ${file} is too short`);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen > size - 8 || headerLen > 100_000_000) throw new Error(`bad safetensors header: ${file} declares a ${headerLen}-byte header`);
    const hb = Buffer.alloc(headerLen);
    readSync(fd, hb, 0, headerLen, 8);
    let header: Record<string, any>;
    try { header = JSON.parse(hb.toString('utf8')); } catch { throw new Error(`bad safetensors header: ${file} has an unreadable JSON header`); }
    const dataStart = 8 + headerLen;
    const out: SafetensorsEntry[] = [];
    for (const [name, v] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const [b, e] = v.data_offsets as [number, number];
      const entry = { name, dtype: v.dtype as string, shape: v.shape as number[], begin: dataStart + b, end: dataStart + e, file };
      if (entry.end > size) throw new Error(`bad safetensors file: tensor ${name} extends past the end of ${file} (truncated?)`);
      const bytes = DTYPE_BYTES[entry.dtype];
      if (bytes && entry.shape.reduce((a, d) => a * d, 1) * bytes !== e - b)
        throw new Error(`bad safetensors file: tensor ${name} has ${e - b} bytes for shape [${entry.shape}] ${entry.dtype}`);
      out.push(entry);
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/** All tensor entries of a HF folder: model.safetensors, or the shards listed in the index. */
export function listFolderTensors(dir: string): SafetensorsEntry[] {
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    const map = JSON.parse(readFileSync(index, 'utf8')).weight_map as Record<string, string>;
    const files = [...new Set(Object.values(map))];
    for (const f of files) if (!existsSync(join(dir, f))) throw new Error(`missing shard ${f} listed in model.safetensors.index.json`);
    return files.flatMap((f) => readSafetensorsHeader(join(dir, f)));
  }
  const single = join(dir, 'model.safetensors');
  if (!existsSync(single)) throw new Error(`no model.safetensors or model.safetensors.index.json in ${dir}`);
  return readSafetensorsHeader(single);
}

export function readTensor(entry: SafetensorsEntry, fd: number): Tensor32 {
  if (!DTYPE_BYTES[entry.dtype]) throw new Error(`unsupported safetensors dtype ${entry.dtype} for tensor ${entry.name} (supported: F32, F16, BF16)`);
  const bytes = Buffer.alloc(entry.end - entry.begin);
  readSync(fd, bytes, 0, bytes.length, entry.begin);
  const count = entry.shape.reduce((a, d) => a * d, 1);
  const u8 = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  const data = entry.dtype === 'F32' ? decodeF32(u8, count) : entry.dtype === 'F16' ? decodeF16(u8, count) : decodeBF16(u8, count);
  return { shape: entry.shape, data };
}

/** Load tensors (all, or those `want` accepts) as float32. */
export function readTensors(entries: SafetensorsEntry[], want: (name: string) => boolean = () => true, onTensor?: (bytes: number) => void): Weights {
  const weights: Weights = new Map();
  const fds = new Map<string, number>();
  try {
    for (const e of entries) {
      if (!want(e.name)) continue;
      if (!fds.has(e.file)) fds.set(e.file, openSync(e.file, 'r'));
      weights.set(e.name, readTensor(e, fds.get(e.file)!));
      onTensor?.(e.end - e.begin);
    }
  } finally {
    for (const fd of fds.values()) closeSync(fd);
  }
  return weights;
}

/**
 * The header of a float32 safetensors file holding `weights` (sorted by name), padded so tensor data starts
 * 8-byte aligned, as the 8-byte length prefix plus the JSON; and the names in data order.
 */
function f32Header(weights: Weights, metadata: Record<string, string>): { head: Buffer; names: string[]; dataBytes: number } {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', ...metadata } };
  let offset = 0;
  const names = [...weights.keys()].sort();
  for (const name of names) {
    const t = weights.get(name)!;
    if (t.shape.reduce((a, b) => a * b, 1) !== t.data.length) throw new Error(`tensor ${name}: shape [${t.shape}] does not match ${t.data.length} values`);
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8); // keep tensor data 8-byte aligned
  const head = Buffer.alloc(8 + Buffer.byteLength(json));
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)), 0);
  head.write(json, 8, 'utf8');
  return { head, names, dataBytes: offset };
}

/** Write float32 tensors as one safetensors file, streaming tensor by tensor. */
export function writeSafetensors(file: string, weights: Weights, metadata: Record<string, string> = {}, onTensor?: (bytes: number) => void): void {
  const { head, names } = f32Header(weights, metadata);
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, head);
    for (const name of names) {
      const d = weights.get(name)!.data;
      writeSync(fd, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      onTensor?.(d.byteLength);
    }
  } finally {
    closeSync(fd);
  }
}

/** Float32 tensors as the bytes of one safetensors file, in memory (adapters, optimizer moments). */
export function encodeSafetensors(weights: Weights, metadata: Record<string, string> = {}): Buffer {
  const { head, names, dataBytes } = f32Header(weights, metadata);
  const out = Buffer.alloc(head.length + dataBytes);
  head.copy(out, 0);
  let at = head.length;
  for (const name of names) {
    const d = weights.get(name)!.data;
    Buffer.from(d.buffer, d.byteOffset, d.byteLength).copy(out, at);
    at += d.byteLength;
  }
  return out;
}

/** The tensors (as float32) and metadata of a safetensors file held in memory. */
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
    if (!DTYPE_BYTES[dtype]) throw new Error(`unsupported safetensors dtype ${dtype} for tensor ${name} (supported: F32, F16, BF16)`);
    if (dataStart + end > bytes.length) throw new Error(`tensor ${name} runs past the end of the file`);
    const count = shape.reduce((a, d) => a * d, 1);
    if (count * DTYPE_BYTES[dtype] !== end - begin) throw new Error(`tensor ${name} has ${end - begin} bytes for shape [${shape}] ${dtype}`);
    // Copy into an aligned buffer (the data section need not be 4-byte aligned in memory).
    const u8 = new Uint8Array(bytes.buffer.slice(bytes.byteOffset + dataStart + begin, bytes.byteOffset + dataStart + end));
    const data = dtype === 'F32' ? new Float32Array(u8.buffer) : dtype === 'F16' ? decodeF16(u8, count) : decodeBF16(u8, count);
    tensors.set(name, { shape, data });
  }
  return { tensors, metadata };
}
