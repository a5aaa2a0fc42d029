// A minimal protobuf writer for ONNX ModelProto, with field numbers from onnx.proto.
// Weight buffers are referenced, never copied, until the single final concatenation — or, with an
// ExternalData side file, written there as they are made and referenced by offset (ONNX external data),
// so the graph itself stays small and no model size limit comes from protobuf's 2 GB.
// GraphBuilder gives the graph code a small vocabulary: node(), initializer(), input(), output().
import { closeSync, openSync, writeSync } from 'node:fs';

export const DataType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, BOOL: 9, FLOAT16: 10 } as const;
export type DataTypeId = (typeof DataType)[keyof typeof DataType];

/** One protobuf message under construction: a list of byte chunks. */
class Message {
  readonly parts: Uint8Array[] = [];
  length = 0;
  private push(b: Uint8Array): void { this.parts.push(b); this.length += b.length; }
  private tag(field: number, wire: number): void { this.push(varint(BigInt((field << 3) | wire))); }
  int(field: number, value: number | bigint): this { this.tag(field, 0); this.push(varint(BigInt(value))); return this; }
  float(field: number, value: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(4); new DataView(b.buffer).setFloat32(0, value, true); this.push(b); return this;
  }
  bytes(field: number, value: Uint8Array): this { this.tag(field, 2); this.push(varint(BigInt(value.length))); this.push(value); return this; }
  string(field: number, value: string): this { return this.bytes(field, new TextEncoder().encode(value)); }
  message(field: number, m: Message): this {
    this.tag(field, 2); this.push(varint(BigInt(m.length)));
    for (const p of m.parts) this.parts.push(p);
    this.length += m.length; return this;
  }
  toBytes(): Uint8Array { return Buffer.concat(this.parts, this.length); }
}

/** Base-128 varint; negative int64 values are encoded as 10-byte two's complement. */
function varint(v: bigint): Uint8Array {
  if (v < 0n) v += 1n << 64n;
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return Uint8Array.from(out);
}

/** An attribute value: integers and strings as is; floats wrapped with `float()`; lists of ints or floats. */
export type AttrValue = number | string | { float: number } | { ints: number[] } | { floats: number[] } | { graph: GraphBuilder; name: string };
export const float = (x: number) => ({ float: x });

const ATTR_TYPE = { FLOAT: 1, INT: 2, STRING: 3, GRAPH: 5, FLOATS: 6, INTS: 7 };

function attribute(name: string, v: AttrValue): Message {
  const a = new Message().string(1, name);
  if (typeof v === 'number') return a.int(3, v).int(20, ATTR_TYPE.INT);
  if (typeof v === 'string') return a.string(4, v).int(20, ATTR_TYPE.STRING);
  if ('float' in v) return a.float(2, v.float).int(20, ATTR_TYPE.FLOAT);
  if ('ints' in v) { for (const x of v.ints) a.int(8, x); return a.int(20, ATTR_TYPE.INTS); }
  if ('graph' in v) return a.message(6, v.graph.graphProto(v.name)).int(20, ATTR_TYPE.GRAPH);
  for (const x of v.floats) a.float(7, x);
  return a.int(20, ATTR_TYPE.FLOATS);
}

/** A tensor shape entry: a fixed size or a symbolic name (e.g. "batch_size"). */
export type Dim = number | string;

function valueInfo(name: string, elemType: DataTypeId, dims: Dim[]): Message {
  const shape = new Message();
  for (const d of dims) shape.message(1, typeof d === 'number' ? new Message().int(1, d) : new Message().string(2, d));
  const tensorType = new Message().int(1, elemType).message(2, shape);
  return new Message().string(1, name).message(2, new Message().message(1, tensorType));
}

/**
 * The side file of a graph's large initializers. Each tensor is appended at a page-aligned offset (ONNX
 * Runtime may memory-map it) and dropped from memory at once: building a graph never holds the model.
 */
export class ExternalData {
  private fd: number;
  private offset = 0;
  /** Tensors smaller than this stay inside the graph (constants, norms of small models). */
  static readonly MIN_BYTES = 4096;
  private static readonly ALIGN = 4096;
  constructor(readonly path: string, readonly location: string) {
    this.fd = openSync(path, 'w');
  }
  append(bytes: Uint8Array): { offset: number; length: number } {
    const at = Math.ceil(this.offset / ExternalData.ALIGN) * ExternalData.ALIGN;
    for (let done = 0; done < bytes.length; ) done += writeSync(this.fd, bytes, done, bytes.length - done, at + done);
    this.offset = at + bytes.length;
    return { offset: at, length: bytes.length };
  }
  get bytesWritten(): number { return this.offset; }
  close(): void { closeSync(this.fd); }
}

const typedBytes = (d: Float32Array | Uint16Array) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

export class GraphBuilder {
  private nodes: Message[] = [];
  private initializers: Message[] = [];
  private inputs: Message[] = [];
  private outputs: Message[] = [];
  private counter = 0;
  private readonly inputNames = new Set<string>();
  private readonly initializerNames = new Set<string>();
  /** Where each externally stored initializer's bytes lie (for aliases over the same bytes). */
  private readonly externalRanges = new Map<string, { offset: number; length: number }>();
  /** Set on the root graph to write large initializers to a side file. */
  external: ExternalData | null = null;
  /** Set on subgraphs (If branches): inputs, initializers and fresh names belong to the root graph. */
  private parent: GraphBuilder | null = null;
  readonly usesMicrosoftDomain: boolean[] = [false];
  private get root(): GraphBuilder { return this.parent ? this.parent.root : this; }

  /** A fresh value name with a readable prefix. */
  fresh(prefix: string): string { return this.parent ? this.parent.fresh(prefix) : `${prefix}_${this.counter++}`; }

  /** Declare a graph input (in a subgraph: on the root graph, once per name). */
  input(name: string, elemType: DataTypeId, dims: Dim[]): string {
    if (this.parent) return this.parent.input(name, elemType, dims);
    if (!this.inputNames.has(name)) { this.inputNames.add(name); this.inputs.push(valueInfo(name, elemType, dims)); }
    return name;
  }
  output(name: string, elemType: DataTypeId, dims: Dim[]): void { this.outputs.push(valueInfo(name, elemType, dims)); }

  /** Add a node; returns its output names (fresh names unless given). */
  node(op: string, inputs: string[], opts: { outputs?: string[] | number; attrs?: Record<string, AttrValue>; domain?: string; name?: string } = {}): string[] {
    const outs = Array.isArray(opts.outputs) ? opts.outputs : Array.from({ length: opts.outputs ?? 1 }, () => this.fresh(op));
    const n = new Message();
    for (const i of inputs) n.string(1, i);
    for (const o of outs) n.string(2, o);
    n.string(3, opts.name ?? this.fresh(`n_${op}`)).string(4, op);
    for (const [k, v] of Object.entries(opts.attrs ?? {})) n.message(5, attribute(k, v));
    if (opts.domain) { n.string(7, opts.domain); if (opts.domain === 'com.microsoft') this.root.usesMicrosoftDomain[0] = true; }
    this.nodes.push(n);
    return outs;
  }
  /** Single-output convenience. */
  op(op: string, inputs: string[], attrs?: Record<string, AttrValue>, domain?: string): string {
    return this.node(op, inputs, { attrs, domain })[0];
  }

  /**
   * A named constant, made once: asking again for the same name (another subgraph over the same weights)
   * returns it without calling `raw`, so data may be given lazily and its source freed after first use.
   */
  initializer(name: string, elemType: DataTypeId, dims: number[], raw: Uint8Array | (() => Uint8Array)): string {
    if (this.parent) return this.parent.initializer(name, elemType, dims, raw);
    if (this.initializerNames.has(name)) return name;
    this.initializerNames.add(name);
    const bytes = typeof raw === 'function' ? raw() : raw;
    if (this.external && bytes.length >= ExternalData.MIN_BYTES) {
      const range = this.external.append(bytes);
      this.externalRanges.set(name, range);
      this.initializers.push(this.externalTensor(name, elemType, dims, range));
    } else {
      const t = new Message();
      for (const d of dims) t.int(1, d);
      t.int(2, elemType).string(8, name).bytes(9, bytes);
      this.initializers.push(t);
    }
    return name;
  }

  /**
   * A second initializer over another one's bytes with other dims (e.g. an embedding table read by a
   * Gather and, tied, by the LM head's MatMul). With external data both name the same file range, so the
   * bytes are stored once; otherwise `raw` gives them again.
   */
  alias(name: string, of: string, elemType: DataTypeId, dims: number[], raw: () => Uint8Array): string {
    if (this.parent) return this.parent.alias(name, of, elemType, dims, raw);
    if (this.initializerNames.has(name)) return name;
    const range = this.externalRanges.get(of);
    if (!range) return this.initializer(name, elemType, dims, raw);
    this.initializerNames.add(name);
    this.initializers.push(this.externalTensor(name, elemType, dims, range));
    return name;
  }

  private externalTensor(name: string, elemType: DataTypeId, dims: number[], range: { offset: number; length: number }): Message {
    const t = new Message();
    for (const d of dims) t.int(1, d);
    t.int(2, elemType).string(8, name);
    const entry = (k: string, v: string) => new Message().string(1, k).string(2, v);
    t.message(13, entry('location', this.external!.location)).message(13, entry('offset', String(range.offset))).message(13, entry('length', String(range.length)));
    return t.int(14, 1); // data_location = EXTERNAL
  }
  floats(name: string, dims: number[], data: Float32Array | (() => Float32Array)): string {
    return this.initializer(name, DataType.FLOAT, dims, typeof data === 'function' ? () => typedBytes(data()) : typedBytes(data));
  }
  /** A float16 initializer from IEEE half bits. */
  halves(name: string, dims: number[], data: () => Uint16Array): string {
    return this.initializer(name, DataType.FLOAT16, dims, () => typedBytes(data()));
  }
  int64s(values: number[], dims: number[] = [values.length], name = this.fresh('const_i64')): string {
    const b = new BigInt64Array(values.map((v) => BigInt(v)));
    return this.initializer(name, DataType.INT64, dims, new Uint8Array(b.buffer));
  }
  scalarFloat(value: number, name = this.fresh('const_f')): string {
    return this.floats(name, [], new Float32Array([value]));
  }

  /**
   * A subgraph (an If branch): its own nodes and outputs; inputs and initializers go to the parent,
   * whose values the subgraph reads from the outer scope, so weights exist once. Names share one counter.
   */
  subgraph(): GraphBuilder {
    const sub = new GraphBuilder();
    sub.parent = this;
    return sub;
  }

  /** The GraphProto message (for a model, or as an If branch). */
  graphProto(graphName: string): Message {
    const g = new Message();
    for (const n of this.nodes) g.message(1, n);
    g.string(2, graphName);
    for (const t of this.initializers) g.message(5, t);
    for (const i of this.inputs) g.message(11, i);
    for (const o of this.outputs) g.message(12, o);
    return g;
  }

  /** Serialize to an ONNX ModelProto (IR 8, opset 17 + com.microsoft 1 when used). */
  toModelBytes(graphName: string, opset = 17): Uint8Array {
    const g = this.graphProto(graphName);
    const m = new Message().int(1, 8).string(2, 'hearth');
    m.message(8, new Message().string(1, '').int(2, opset));
    if (this.usesMicrosoftDomain[0]) m.message(8, new Message().string(1, 'com.microsoft').int(2, 1));
    m.message(7, g);
    // Protobuf messages are limited to 2 GB; with external data the graph holds no large tensors.
    if (m.length > 2 ** 31 - 1) throw new Error(`the ONNX graph would be ${(m.length / 2 ** 30).toFixed(1)} GB: build it with external data (a side file for the weights)`);
    return m.toBytes();
  }
}
