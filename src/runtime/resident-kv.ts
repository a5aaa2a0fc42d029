// The KV cache kept where the session computes (GPU memory on webgpu:0): the runner graph built with
// `residentKv` outputs GroupQueryAttention's whole present per layer, the session leaves those outputs on the
// device (preferredOutputLocation 'gpu-buffer', ORT's IO binding), and the next step feeds them back as the past.
// No step copies the cache through the host; only logits come back.
//
// ORT tensors are immutable here (every run allocates fresh outputs), so a cache is a reference: a block of
// per-layer tensors [rows, KV, P, hp] and a row in it. Sequences decoding together share one block (the last
// step's present); a prefix copy is a second reference to the donor's row with a shorter length (free); rolling
// back is a shorter length (the mask hides the rest). When the set of rows changes, KvOps builds the new batch
// on the device with two tiny helper sessions (gather rows + pad positions, concatenate), one run each for all
// layers. A block's device buffers are released as soon as no sequence refers to it.
//
// The same code runs on the CPU provider with CPU tensors (the tests use that to check the logic against the
// host cache; webgpu:0 is checked on a real adapter in runtime-webgpu.test.ts).
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from './onnx-proto.js';

/** Per-layer key and value tensors [rows, KV, P, hp] that some sequences' caches are rows of. */
export class KvBlock {
  /** Sequences referring to this block; its tensors are released when it drops to 0. */
  private refs = 0;
  private released = false;
  constructor(
    /** keys then values: tensors[2i] = layer i's keys, tensors[2i + 1] its values. */
    readonly tensors: ort.Tensor[],
  ) {}

  get rows(): number { return this.tensors[0].dims[0]; }
  get positions(): number { return this.tensors[0].dims[2]; }

  retain(): void { this.refs++; }

  /** One reference fewer; the last one releases the device buffers. */
  release(): void {
    if (--this.refs <= 0) this.dispose();
  }

  /** Release the buffers now if no sequence refers to the block (a batch assembled for one run). */
  disposeIfUnused(): void {
    if (this.refs <= 0) this.dispose();
  }

  private dispose(): void {
    if (this.released) return;
    this.released = true;
    for (const t of this.tensors) if (t.location === 'gpu-buffer') t.dispose();
  }
}

/** One sequence's cache: a row of a block (or nothing yet) and how many positions of it are valid. */
export class ResidentSequenceKv {
  length = 0;
  block: KvBlock | null = null;
  row = 0;

  /** Point at row `row` of `block` (taking a reference; dropping the old one). */
  moveTo(block: KvBlock, row: number): void {
    block.retain();
    this.block?.release();
    this.block = block;
    this.row = row;
  }

  /** Keep only the first `n` positions (the rest are masked from now on). */
  truncate(n: number): void {
    this.length = Math.min(this.length, n);
  }

  dispose(): void {
    this.block?.release();
    this.block = null;
    this.length = 0;
  }

  /** A cache starting with this one's first n positions: another reference to the same row. */
  copyPrefix(n: number): ResidentSequenceKv {
    if (n > this.length) throw new Error(`copyPrefix: ${n} positions asked, ${this.length} cached`);
    const c = new ResidentSequenceKv();
    if (this.block) c.moveTo(this.block, this.row);
    c.length = n;
    return c;
  }
}

/**
 * Device-side batch assembly: `take` gathers rows of a block and pads their positions to P (zeros), `concat`
 * stacks two blocks' rows. Both are ONNX graphs over all layers at once, run on the runner's device.
 */
export class KvOps {
  private constructor(
    private readonly take: ort.InferenceSession,
    private readonly concat: ort.InferenceSession,
    private readonly zeros: KvBlock,
    private readonly tensorsPerBlock: number,
  ) {}

  static async create(numLayers: number, numKvHeads: number, headDim: number, providers: ort.InferenceSession.ExecutionProviderConfig[], onDevice: boolean): Promise<KvOps> {
    const n = 2 * numLayers;
    const options = (outputs: string[]): ort.InferenceSession.SessionOptions => ({
      executionProviders: providers, intraOpNumThreads: 1, logSeverityLevel: 3, graphOptimizationLevel: 'all',
      ...(onDevice ? { preferredOutputLocation: Object.fromEntries(outputs.map((o) => [o, 'gpu-buffer' as const])) } : {}),
    });
    const outs = Array.from({ length: n }, (_, j) => `o.${j}`);
    const take = await ort.InferenceSession.create(takeGraph(n, numKvHeads, headDim), options(outs));
    const concat = await ort.InferenceSession.create(concatGraph(n, numKvHeads, headDim), options(outs));
    // The past of a sequence with nothing cached yet: one zero position, padded like any row.
    const zero = new ort.Tensor('float32', new Float32Array(numKvHeads * headDim), [1, numKvHeads, 1, headDim]);
    const zeros = new KvBlock(Array.from({ length: n }, () => zero));
    zeros.retain(); // never released
    return new KvOps(take, concat, zeros, n);
  }

  /**
   * The past for one run over `seqs`, row b = seqs[b]: the block they already form (the steady decode step:
   * no device work at all), or a new one gathered from their rows, with at least `minPositions` positions.
   */
  async assemble(seqs: ResidentSequenceKv[], minPositions: number): Promise<KvBlock> {
    const first = seqs[0].block;
    if (first && first.rows === seqs.length && first.positions >= minPositions && seqs.every((s, b) => s.block === first && s.row === b)) return first;
    const P = Math.max(minPositions, ...seqs.map((s) => s.block?.positions ?? 1));
    // Consecutive sequences of one block are gathered together; the parts are stacked in order.
    let out: KvBlock | null = null;
    for (let start = 0; start < seqs.length;) {
      const source = seqs[start].block ?? this.zeros;
      let end = start + 1;
      while (end < seqs.length && (seqs[end].block ?? this.zeros) === source) end++;
      const rows = seqs.slice(start, end).map((s) => (s.block ? s.row : 0));
      const part = await this.runTake(source, rows, P);
      if (!out) out = part;
      else {
        const joined = await this.runConcat(out, part);
        out.disposeIfUnused();
        part.disposeIfUnused();
        out = joined;
      }
      start = end;
    }
    return out!;
  }

  private async runTake(source: KvBlock, rows: number[], P: number): Promise<KvBlock> {
    const feeds: Record<string, ort.Tensor> = {
      rows: new ort.Tensor('int64', BigInt64Array.from(rows, BigInt), [rows.length]),
      positions: new ort.Tensor('int64', BigInt64Array.of(BigInt(P)), [1]),
    };
    source.tensors.forEach((t, j) => (feeds[`t.${j}`] = t));
    return this.collect(await this.take.run(feeds));
  }

  private async runConcat(a: KvBlock, b: KvBlock): Promise<KvBlock> {
    const feeds: Record<string, ort.Tensor> = {};
    a.tensors.forEach((t, j) => (feeds[`a.${j}`] = t));
    b.tensors.forEach((t, j) => (feeds[`b.${j}`] = t));
    return this.collect(await this.concat.run(feeds));
  }

  private collect(out: ort.InferenceSession.ReturnType): KvBlock {
    return new KvBlock(Array.from({ length: this.tensorsPerBlock }, (_, j) => out[`o.${j}`]));
  }

  async release(): Promise<void> {
    await this.take.release();
    await this.concat.release();
  }
}

/** o.j = rows `rows` of t.j, positions zero-padded at the end to `positions` (≥ t.j's). */
function takeGraph(n: number, KV: number, hd: number): Uint8Array {
  const g = new GraphBuilder();
  const rows = g.input('rows', DataType.INT64, ['n']);
  const positions = g.input('positions', DataType.INT64, [1]);
  const before = g.int64s([0, 0, 0, 0, 0, 0]), after = g.int64s([0]);
  for (let j = 0; j < n; j++) {
    const t = g.input(`t.${j}`, DataType.FLOAT, ['r', KV, 'p', hd]);
    const padEnd = g.op('Sub', [positions, g.op('Shape', [t], { start: 2, end: 3 })]);
    const pads = g.op('Concat', [before, padEnd, after], { axis: 0 });
    g.node('Pad', [g.op('Gather', [t, rows], { axis: 0 }), pads], { outputs: [`o.${j}`] });
    g.output(`o.${j}`, DataType.FLOAT, ['n', KV, 'positions', hd]);
  }
  return g.toModelBytes('kv_take');
}

/** o.j = a.j and b.j stacked along rows (same positions). */
function concatGraph(n: number, KV: number, hd: number): Uint8Array {
  const g = new GraphBuilder();
  for (let j = 0; j < n; j++) {
    const a = g.input(`a.${j}`, DataType.FLOAT, ['ra', KV, 'p', hd]);
    const b = g.input(`b.${j}`, DataType.FLOAT, ['rb', KV, 'p', hd]);
    g.node('Concat', [a, b], { outputs: [`o.${j}`], attrs: { axis: 0 } });
    g.output(`o.${j}`, DataType.FLOAT, ['r', KV, 'p', hd]);
  }
  return g.toModelBytes('kv_concat');
}
