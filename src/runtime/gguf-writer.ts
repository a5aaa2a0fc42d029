// Streaming GGUF v3 writer (spec: ggml/docs/gguf.md): header, metadata key/values of every GGUF value
// type, tensor table, then each tensor's data at an aligned offset. Tensors are declared up front (so the
// table's offsets are known) and their bytes are then appended in declaration order, in chunks of any
// size, straight to the file: a multi-GB model is written without holding it in memory.
//
//   const w = new GgufWriter(path, { metadata, tensors: [{ name, dims, type }, …] });
//   w.append(bytesOfFirstTensor); …   // chunks; a tensor is padded when its last byte arrives
//   w.close();                        // checks every declared byte was written
import { closeSync, openSync, writeSync } from 'node:fs';
import { ggmlTypeName, tensorByteSize } from './gguf-dequant.js';

export type GgufScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64' | 'f32' | 'f64' | 'bool' | 'string';

/** A typed metadata value. Arrays hold scalars of one type (nested arrays are not written). */
export type GgufMetaValue =
  | { type: Exclude<GgufScalarType, 'bool' | 'string'>; value: number | bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; item: GgufScalarType; value: readonly (number | bigint | boolean | string)[] };

export interface GgufTensorDecl {
  name: string;
  /** ggml order: dims[0] is the row length (the reverse of a Hugging Face / row-major shape). */
  dims: number[];
  /** ggml type id (GGML_TYPE in gguf-dequant.ts). */
  type: number;
  /** Data size, for a type gguf-dequant.ts does not size (computed from dims and type otherwise). */
  byteSize?: number;
}

export interface GgufWriterOptions {
  metadata: Record<string, GgufMetaValue>;
  tensors: GgufTensorDecl[];
  /** Data alignment; written as general.alignment when not the default 32. */
  alignment?: number;
  /** For tests of the reader's error paths only. */
  magic?: string;
  version?: number;
}

const VALUE_TYPE_ID: Record<GgufScalarType | 'array', number> = {
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
};

/** Little-endian byte builder for the header (metadata of a real tokenizer is a few MB at most). */
class HeaderBytes {
  private parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void { this.parts.push(b); this.length += b.length; }
  private num(size: number, write: (b: Buffer) => void): void { const b = Buffer.alloc(size); write(b); this.push(b); }
  u32(v: number): void { this.num(4, (b) => b.writeUInt32LE(v)); }
  u64(v: number | bigint): void { this.num(8, (b) => b.writeBigUInt64LE(BigInt(v))); }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  scalar(type: GgufScalarType, v: number | bigint | boolean | string, key: string): void {
    const n = () => { if (typeof v !== 'number' && typeof v !== 'bigint') throw new Error(`GGUF metadata ${key}: ${type} value expected, got ${typeof v}`); return v; };
    switch (type) {
      case 'u8': return this.num(1, (b) => b.writeUInt8(Number(n())));
      case 'i8': return this.num(1, (b) => b.writeInt8(Number(n())));
      case 'u16': return this.num(2, (b) => b.writeUInt16LE(Number(n())));
      case 'i16': return this.num(2, (b) => b.writeInt16LE(Number(n())));
      case 'u32': return this.num(4, (b) => b.writeUInt32LE(Number(n())));
      case 'i32': return this.num(4, (b) => b.writeInt32LE(Number(n())));
      case 'u64': return this.num(8, (b) => b.writeBigUInt64LE(BigInt(n())));
      case 'i64': return this.num(8, (b) => b.writeBigInt64LE(BigInt(n())));
      case 'f32': return this.num(4, (b) => b.writeFloatLE(Number(n())));
      case 'f64': return this.num(8, (b) => b.writeDoubleLE(Number(n())));
      case 'bool': return this.push(Buffer.from([v ? 1 : 0]));
      case 'string': return this.str(String(v));
    }
  }
  concat(): Buffer { return Buffer.concat(this.parts); }
}

export class GgufWriter {
  private fd: number;
  private position = 0;
  private current = 0; // index of the tensor being written
  private writtenOfCurrent = 0;
  private readonly sizes: number[];
  private readonly alignment: number;
  private closed = false;

  constructor(readonly path: string, private readonly opts: GgufWriterOptions) {
    this.alignment = opts.alignment ?? 32;
    const seen = new Set<string>();
    this.sizes = opts.tensors.map((t) => {
      if (seen.has(t.name)) throw new Error(`GGUF writer: tensor ${t.name} declared twice`);
      seen.add(t.name);
      return t.byteSize ?? tensorByteSize(t.type, t.dims.reduce((a, b) => a * b, 1), t.name);
    });
    const header = this.header();
    this.fd = openSync(path, 'w');
    try {
      this.write(header);
      this.pad();
      this.skipEmptyTensors();
    } catch (err) {
      closeSync(this.fd);
      throw err;
    }
  }

  private header(): Buffer {
    const h = new HeaderBytes();
    h.push(Buffer.from(this.opts.magic ?? 'GGUF', 'ascii'));
    h.u32(this.opts.version ?? 3);
    const metadata = { ...this.opts.metadata };
    if (this.alignment !== 32) metadata['general.alignment'] = { type: 'u32', value: this.alignment };
    h.u64(this.opts.tensors.length);
    h.u64(Object.keys(metadata).length);
    for (const [key, mv] of Object.entries(metadata)) {
      h.str(key);
      h.u32(VALUE_TYPE_ID[mv.type]);
      if (mv.type === 'array') {
        h.u32(VALUE_TYPE_ID[mv.item]);
        h.u64(mv.value.length);
        for (const v of mv.value) h.scalar(mv.item, v, key);
      } else {
        h.scalar(mv.type, mv.value, key);
      }
    }
    let offset = 0;
    this.opts.tensors.forEach((t, i) => {
      h.str(t.name);
      h.u32(t.dims.length);
      for (const d of t.dims) h.u64(d);
      h.u32(t.type);
      h.u64(offset);
      offset += this.padded(this.sizes[i]);
    });
    return h.concat();
  }

  private padded(n: number): number { return Math.ceil(n / this.alignment) * this.alignment; }

  private write(b: Uint8Array): void {
    let done = 0;
    while (done < b.length) done += writeSync(this.fd, b, done, b.length - done, this.position + done);
    this.position += b.length;
  }

  private pad(): void {
    const n = this.padded(this.position) - this.position;
    if (n) this.write(new Uint8Array(n));
  }

  private skipEmptyTensors(): void {
    while (this.current < this.sizes.length && this.sizes[this.current] === 0) this.current++;
  }

  /** Bytes written to the file so far. */
  get bytesWritten(): number { return this.position; }

  /** The tensor whose bytes `append` expects next (null once all are written). */
  get nextTensor(): GgufTensorDecl | null { return this.opts.tensors[this.current] ?? null; }

  /** Append bytes of the current tensor (any chunk size; a chunk may not run past the tensor's end). */
  append(bytes: Uint8Array): void {
    if (this.closed) throw new Error('GGUF writer: append after close');
    const t = this.opts.tensors[this.current];
    if (!t) throw new Error('GGUF writer: more tensor data than the declared tensors hold');
    const left = this.sizes[this.current] - this.writtenOfCurrent;
    if (bytes.length > left) throw new Error(`GGUF writer: ${bytes.length} bytes for tensor ${t.name} (${ggmlTypeName(t.type)}) which has ${left} left`);
    this.write(bytes);
    this.writtenOfCurrent += bytes.length;
    if (this.writtenOfCurrent === this.sizes[this.current]) {
      this.pad();
      this.current++;
      this.writtenOfCurrent = 0;
      this.skipEmptyTensors();
    }
  }

  /** Write one whole tensor, checking it is the next declared one. */
  writeTensor(name: string, bytes: Uint8Array): void {
    const t = this.nextTensor;
    if (t?.name !== name || this.writtenOfCurrent) throw new Error(`GGUF writer: tensor ${name} written out of order (expected ${t?.name ?? 'none'})`);
    if (bytes.length !== this.sizes[this.current]) throw new Error(`GGUF writer: tensor ${name} has ${bytes.length} bytes, its ${ggmlTypeName(t.type)} dims ${t.dims.join('×')} need ${this.sizes[this.current]}`);
    this.append(bytes);
  }

  /** Close the file; throws (after closing) when declared tensors were not fully written. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
    const t = this.opts.tensors[this.current];
    if (t) throw new Error(`GGUF writer: ${this.path} closed before tensor ${t.name} was written`);
  }

  /** Close without the completeness check (after an error elsewhere). */
  abort(): void {
    if (!this.closed) { this.closed = true; closeSync(this.fd); }
  }
}
