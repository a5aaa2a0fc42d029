// safetensors reading (F32 / F16 / BF16 → float32) and writing (F32), including sharded
// checkpoints (model.safetensors.index.json). Format: u64 LE header length, JSON header, data.
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

/** Write float32 tensors as one safetensors file, streaming tensor by tensor. */
export function writeSafetensors(file: string, weights: Weights, metadata: Record<string, string> = {}, onTensor?: (bytes: number) => void): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', ...metadata } };
  let offset = 0;
  const names = [...weights.keys()].sort();
  for (const name of names) {
    const t = weights.get(name)!;
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8); // keep tensor data 8-byte aligned
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, len);
    writeSync(fd, Buffer.from(json, 'utf8'));
    for (const name of names) {
      const d = weights.get(name)!.data;
      writeSync(fd, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      onTensor?.(d.byteLength);
    }
  } finally {
    closeSync(fd);
  }
}
