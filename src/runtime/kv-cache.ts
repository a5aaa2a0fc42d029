// KV caches. Each sequence owns a SequenceKv: per layer, key and value arrays of shape
// [numKvHeads, capacity, headDim] whose first `length` positions are valid (the rest is room to grow,
// which the graph masks out). The runner feeds these arrays to ORT as the past (no copy) and appends
// the few new positions the graph returns.
// While the runner decodes a set of sequences step after step, their caches live together as rows of
// one right-padded batch tensor per layer (BatchKv). When the set changes, only the sequences that join
// or leave move (a joining cache is copied into a row, a leaving one out of its row): with continuous
// batching some request finishes every few steps, and repacking every row each time copied the whole
// batch's cache twice (measured on ~20M at 8 streams: runner time outside ORT 0.65 → 0.55 ms per step).

/**
 * Spare positions allocated when a cache grows. Small on purpose: every graph form pays per step for
 * the whole capacity (explicit-mask graphs attend over the masked slots; GroupQueryAttention copies the
 * full past buffer: measured 3.9 → 11 ms/token on the ~20M model when capacity went 128 → 6144).
 */
export const KV_HEADROOM = 32;

export class SequenceKv {
  private ownKeys: Float32Array[];
  private ownValues: Float32Array[];
  /** Valid positions. */
  length = 0;
  /** Allocated positions per head in the key/value arrays. */
  capacity = 0;
  /** Set while this cache lives in a row of a batch tensor. */
  batch: BatchKv | null = null;

  constructor(readonly numLayers: number, readonly numKvHeads: number, readonly headDim: number) {
    this.ownKeys = Array.from({ length: numLayers }, () => new Float32Array(0));
    this.ownValues = Array.from({ length: numLayers }, () => new Float32Array(0));
  }

  /** keys[i]: layer i as numKvHeads × capacity × headDim (copied out of a batch first if needed). */
  get keys(): Float32Array[] { this.batch?.detach(this); return this.ownKeys; }
  get values(): Float32Array[] { this.batch?.detach(this); return this.ownValues; }

  /** Replace the arrays (capacity = positions per head they hold). */
  setArrays(keys: Float32Array[], values: Float32Array[], capacity: number): void {
    this.ownKeys = keys;
    this.ownValues = values;
    this.capacity = capacity;
  }

  /** Bytes held (for memory accounting in the engine). */
  get byteSize(): number {
    return 2 * this.numLayers * this.numKvHeads * this.capacity * this.headDim * 4;
  }

  /** Make room for `n` positions (plus headroom), keeping the valid ones. */
  reserve(n: number): void {
    const keys = this.keys, values = this.values; // detach first
    if (n <= this.capacity) return;
    const cap = n + KV_HEADROOM;
    const grow = (a: Float32Array) => resizePositions(a, this.numKvHeads, this.capacity, this.headDim, this.length, cap);
    this.setArrays(keys.map(grow), values.map(grow), cap);
  }

  /**
   * Append `count` positions for every layer from [.., KV, S, hd] tensors (row `row` of a batch),
   * taking positions [from, from + count) of that row.
   */
  append(newKeys: Float32Array[], newValues: Float32Array[], row: number, S: number, from: number, count: number): void {
    this.reserve(this.length + count);
    const { numKvHeads: KV, headDim: hd, capacity: cap } = this;
    for (let i = 0; i < this.numLayers; i++) {
      copyRows(newKeys[i], (row * KV * S + from) * hd, S * hd, this.ownKeys[i], this.length * hd, cap * hd, KV, count, hd);
      copyRows(newValues[i], (row * KV * S + from) * hd, S * hd, this.ownValues[i], this.length * hd, cap * hd, KV, count, hd);
    }
    this.length += count;
  }

  /** Keep only the first `n` positions (roll back rejected tokens, reuse a prefix). */
  truncate(n: number): void {
    this.batch?.detach(this);
    this.length = Math.min(this.length, n);
  }

  /** The sequence is gone: leave any batch without copying the row out, and drop the arrays. */
  dispose(): void {
    this.batch?.remove(this);
    this.setArrays(this.ownKeys.map(() => new Float32Array(0)), this.ownValues.map(() => new Float32Array(0)), 0);
    this.length = 0;
  }

  /**
   * A new cache holding a copy of the first n positions (prefix sharing between requests with the same
   * prompt). A cache that lives in a batch row is read there: the donor keeps decoding in its batch.
   */
  copyPrefix(n: number): SequenceKv {
    if (n > this.length) throw new Error(`copyPrefix: ${n} positions asked, ${this.length} cached`);
    const c = new SequenceKv(this.numLayers, this.numKvHeads, this.headDim);
    const cap = n + KV_HEADROOM;
    const row = this.batch ? this.batch.rowView(this) : { keys: this.ownKeys, values: this.ownValues, capacity: this.capacity };
    const copy = (src: Float32Array) => resizePositions(src, this.numKvHeads, row.capacity, this.headDim, n, cap);
    c.setArrays(row.keys.map(copy), row.values.map(copy), cap);
    c.length = n;
    return c;
  }
}

/**
 * Copy `count` positions for each of `heads` heads: source head h starts at float offset src0 + h·srcStride,
 * destination head h at dst0 + h·dstStride (strides in floats). Offsets, not views: a decode step calls this
 * for every layer, kind and row, and a view per head was half the engine's garbage (stories260K, 8 streams,
 * engine alone: 14 → 7 KB per token; callgrind: 2.6% fewer instructions per token, ORT included). Short
 * runs (a decode step's one position) copy in a loop, long ones with `set` (a memcpy).
 */
function copyRows(src: Float32Array, src0: number, srcStride: number, dst: Float32Array, dst0: number, dstStride: number, heads: number, count: number, hd: number): void {
  const n = count * hd;
  for (let h = 0; h < heads; h++) {
    const s = src0 + h * srcStride, d = dst0 + h * dstStride;
    if (n <= SHORT_COPY) for (let k = 0; k < n; k++) dst[d + k] = src[s + k];
    else dst.set(src.subarray(s, s + n), d);
  }
}

/** Floats up to which copyRows copies in a loop rather than through a view and `set`. */
const SHORT_COPY = 64;

/**
 * Several sequences' caches as right-padded [rows, KV, P, hd] tensors (one per layer and kind): row b
 * holds sequence rows[b]'s `length` valid positions at [0, length); the rest is masked. Rows in use are
 * always 0..rows.length−1 (a leaving row is filled with the last one), so the first B rows are the feed.
 */
export class BatchKv {
  /** rows[b] = the sequence whose cache is row b. */
  readonly rows: SequenceKv[] = [];
  keys: Float32Array[] = [];
  values: Float32Array[] = [];
  /** Rows the arrays have room for. */
  private rowCapacity = 0;

  private constructor(
    private readonly numLayers: number,
    private readonly numKvHeads: number,
    private readonly headDim: number,
    /** Positions per row. */
    public P: number,
  ) {}

  /** Pack sequences (detached ones) into a new batch with room for P positions per row. */
  static pack(seqs: SequenceKv[], P: number): BatchKv {
    const batch = new BatchKv(seqs[0].numLayers, seqs[0].numKvHeads, seqs[0].headDim, P);
    batch.allocate(seqs.length, P);
    for (const s of seqs) batch.add(s);
    return batch;
  }

  private get rowSize(): number {
    return this.numKvHeads * this.P * this.headDim;
  }

  /** New arrays for `rows` rows of P positions, keeping the valid positions of the rows in use. */
  private allocate(rows: number, P: number): void {
    const { numKvHeads: KV, headDim: hd } = this;
    const move = (src: Float32Array | undefined) => {
      const out = new Float32Array(rows * KV * P * hd);
      if (src) this.rows.forEach((s, b) => copyRows(src, b * KV * this.P * hd, this.P * hd, out, b * KV * P * hd, P * hd, KV, s.length, hd));
      return out;
    };
    this.keys = Array.from({ length: this.numLayers }, (_, i) => move(this.keys[i]));
    this.values = Array.from({ length: this.numLayers }, (_, i) => move(this.values[i]));
    this.rowCapacity = rows;
    this.P = P;
  }

  /** Change every row to P positions (at least the longest row's length), keeping valid positions. */
  resize(P: number): void {
    if (P !== this.P) this.allocate(this.rowCapacity, P);
  }

  /** Copy a detached sequence's cache into a new last row (the arrays double when full). */
  add(seq: SequenceKv): void {
    if (seq.batch) throw new Error('add: the sequence is in a batch already');
    if (seq.length > this.P) throw new Error(`add: ${seq.length} positions do not fit rows of ${this.P}`);
    if (this.rows.length === this.rowCapacity) this.allocate(Math.max(1, this.rowCapacity * 2), this.P);
    const b = this.rows.length;
    const { numKvHeads: KV, headDim: hd, rowSize } = this;
    for (let i = 0; i < this.numLayers; i++) {
      copyRows(seq.keys[i], 0, seq.capacity * hd, this.keys[i], b * rowSize, this.P * hd, KV, seq.length, hd);
      copyRows(seq.values[i], 0, seq.capacity * hd, this.values[i], b * rowSize, this.P * hd, KV, seq.length, hd);
    }
    // The row is now the cache: the sequence's own arrays would only hold stale memory.
    seq.setArrays(seq.keys.map(() => new Float32Array(0)), seq.values.map(() => new Float32Array(0)), 0);
    this.rows.push(seq);
    seq.batch = this;
  }

  /** Copy a member's row back into its own arrays and take it out of the batch. */
  detach(seq: SequenceKv): void {
    const b = this.rowOf(seq);
    const { numKvHeads: KV, headDim: hd, rowSize } = this;
    const cap = seq.length + KV_HEADROOM;
    const copyOut = (src: Float32Array) => {
      const dst = new Float32Array(KV * cap * hd);
      copyRows(src, b * rowSize, this.P * hd, dst, 0, cap * hd, KV, seq.length, hd);
      return dst;
    };
    seq.setArrays(this.keys.map(copyOut), this.values.map(copyOut), cap);
    this.remove(seq);
  }

  /** Take a member out without copying its row (its cache is dropped or already copied): the last row fills the gap. */
  remove(seq: SequenceKv): void {
    const b = this.rowOf(seq);
    const last = this.rows.length - 1;
    if (b !== last) {
      const moved = this.rows[last];
      const { numKvHeads: KV, headDim: hd, rowSize } = this;
      for (const arrays of [this.keys, this.values])
        for (const a of arrays) copyRows(a, last * rowSize, this.P * hd, a, b * rowSize, this.P * hd, KV, moved.length, hd);
      this.rows[b] = moved;
    }
    this.rows.pop();
    seq.batch = null;
  }

  /** A member's row as [KV, P, hd] views per layer (valid while the batch is unchanged). */
  rowView(seq: SequenceKv): { keys: Float32Array[]; values: Float32Array[]; capacity: number } {
    const b = this.rowOf(seq), size = this.rowSize;
    const view = (a: Float32Array) => a.subarray(b * size, (b + 1) * size);
    return { keys: this.keys.map(view), values: this.values.map(view), capacity: this.P };
  }

  private rowOf(seq: SequenceKv): number {
    const b = this.rows.indexOf(seq);
    if (b < 0) throw new Error('the sequence is not in this batch');
    return b;
  }

  /** Append positions [from, from+count) of row b of [B, KV, S, hd] outputs to row b's sequence. */
  append(b: number, newKeys: Float32Array[], newValues: Float32Array[], S: number, from: number, count: number): void {
    const s = this.rows[b];
    const { numKvHeads: KV, headDim: hd, rowSize } = this;
    for (let i = 0; i < this.numLayers; i++) {
      copyRows(newKeys[i], (b * KV * S + from) * hd, S * hd, this.keys[i], b * rowSize + s.length * hd, this.P * hd, KV, count, hd);
      copyRows(newValues[i], (b * KV * S + from) * hd, S * hd, this.values[i], b * rowSize + s.length * hd, this.P * hd, KV, count, hd);
    }
    s.length += count;
  }
}

/** Copy the first `valid` positions of a [heads, fromCap, hd] array into a new [heads, toCap, hd] array. */
export function resizePositions(src: Float32Array, heads: number, fromCap: number, hd: number, valid: number, toCap: number): Float32Array {
  const out = new Float32Array(heads * toCap * hd);
  copyRows(src, 0, fromCap * hd, out, 0, toCap * hd, heads, valid, hd);
  return out;
}
