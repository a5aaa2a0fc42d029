// GGUF v2/v3 container reader: header, metadata key/values and tensor descriptors, then
// where each tensor's data lies (read on demand by gguf-model.ts). Spec: ggml/docs/gguf.md.
// Reads through a file descriptor so multi-GB files are never loaded whole.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ggmlTypeName, tensorByteSize } from './gguf-dequant.js';

export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** ggml order: dims[0] is the fastest-varying (row length). HF shape is the reverse. */
  dims: number[];
  type: number;
  /** Absolute offset of the tensor data in the file. */
  fileOffset: number;
  byteSize: number;
}

export interface GgufFile {
  path: string;
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
}

const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian

/** A forward-only little-endian reader over a file descriptor with a growing buffer. */
class FileCursor {
  private buf = Buffer.alloc(0);
  private bufStart = 0; // file offset of buf[0]
  pos = 0; // absolute file offset
  constructor(private fd: number, private fileSize: number) {}

  private ensure(n: number): void {
    const have = this.bufStart + this.buf.length - this.pos;
    if (have >= n) return;
    if (this.pos + n > this.fileSize) throw new Error(`bad GGUF header: unexpected end of file at byte ${this.pos}`);
    const want = Math.max(n, 1 << 20);
    const chunk = Buffer.alloc(Math.min(want, this.fileSize - this.pos));
    readSync(this.fd, chunk, 0, chunk.length, this.pos);
    this.buf = chunk;
    this.bufStart = this.pos;
  }
  private take(n: number): Buffer {
    this.ensure(n);
    const off = this.pos - this.bufStart;
    this.pos += n;
    return this.buf.subarray(off, off + n);
  }
  u8() { return this.take(1).readUInt8(0); }
  i8() { return this.take(1).readInt8(0); }
  u16() { return this.take(2).readUInt16LE(0); }
  i16() { return this.take(2).readInt16LE(0); }
  u32() { return this.take(4).readUInt32LE(0); }
  i32() { return this.take(4).readInt32LE(0); }
  f32() { return this.take(4).readFloatLE(0); }
  f64() { return this.take(8).readDoubleLE(0); }
  u64(): number | bigint { const v = this.take(8).readBigUInt64LE(0); return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v; }
  i64(): number | bigint { const v = this.take(8).readBigInt64LE(0); return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v; }
  count(what: string): number {
    const v = this.u64();
    if (typeof v !== 'number' || v > 1e9) throw new Error(`bad GGUF header: implausible ${what} ${v}`);
    return v;
  }
  str(): string {
    const n = this.count('string length');
    return this.take(n).toString('utf8');
  }
}

function readValue(c: FileCursor, type: number): GgufValue {
  switch (type) {
    case 0: return c.u8();
    case 1: return c.i8();
    case 2: return c.u16();
    case 3: return c.i16();
    case 4: return c.u32();
    case 5: return c.i32();
    case 6: return c.f32();
    case 7: return c.u8() !== 0;
    case 8: return c.str();
    case 9: {
      const itemType = c.u32();
      const n = c.count('array length');
      const out: GgufValue[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = readValue(c, itemType);
      return out;
    }
    case 10: return c.u64();
    case 11: return c.i64();
    case 12: return c.f64();
    default: throw new Error(`bad GGUF header: unknown metadata value type ${type}`);
  }
}

/** Parse the header, metadata and tensor table. Throws a clear error for a non-GGUF or damaged file. */
export function readGgufHeader(path: string): GgufFile {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const c = new FileCursor(fd, size);
    if (size < 24 || c.u32() !== GGUF_MAGIC) throw new Error(`bad GGUF header: ${path} does not start with the GGUF magic`);
    const version = c.u32();
    if (version !== 2 && version !== 3) throw new Error(`bad GGUF header: unsupported GGUF version ${version} (supported: 2, 3)`);
    const tensorCount = c.count('tensor count');
    const kvCount = c.count('metadata count');
    const metadata = new Map<string, GgufValue>();
    for (let i = 0; i < kvCount; i++) {
      const key = c.str();
      metadata.set(key, readValue(c, c.u32()));
    }
    const raw: { name: string; dims: number[]; type: number; offset: number }[] = [];
    for (let i = 0; i < tensorCount; i++) {
      const name = c.str();
      const nDims = c.u32();
      if (nDims > 4) throw new Error(`bad GGUF header: tensor ${name} has ${nDims} dims`);
      const dims: number[] = [];
      for (let d = 0; d < nDims; d++) dims.push(c.count('dimension'));
      const type = c.u32();
      // Offsets are checked against the file's size below: multi-GB files have offsets past any count limit.
      const offset = c.u64();
      if (typeof offset !== 'number') throw new Error(`bad GGUF header: implausible tensor offset ${offset}`);
      raw.push({ name, dims, type, offset });
    }
    const alignment = Number(metadata.get('general.alignment') ?? 32);
    const dataStart = Math.ceil(c.pos / alignment) * alignment;
    const tensors = raw.map((t) => {
      const elements = t.dims.reduce((a, b) => a * b, 1);
      const byteSize = tensorByteSize(t.type, elements, t.name);
      const fileOffset = dataStart + t.offset;
      if (fileOffset + byteSize > size) throw new Error(`bad GGUF file: tensor ${t.name} extends past the end of the file (truncated download?)`);
      return { name: t.name, dims: t.dims, type: t.type, fileOffset, byteSize };
    });
    return { path, version, metadata, tensors };
  } finally {
    closeSync(fd);
  }
}

export { ggmlTypeName };
