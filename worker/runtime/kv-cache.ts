// KV caches. Each sequence owns a SequenceKv: per layer, key and value arrays of shape
// [numKvHeads, capacity, headDim] whose first `length` positions are valid (the rest is room to grow,
// which the graph masks out). The runner feeds these arrays to ORT as the past (no copy) and appends
// the few new positions the graph returns.
// While the runner decodes the same set of sequences step after step, their caches live together in
// one right-padded batch tensor per layer (BatchKv); touching a member's keys/values (or changing the
// batch) copies each row back out first.

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
  get keys(): Float32Array[] { this.batch?.detachAll(); return this.ownKeys; }
  get values(): Float32Array[] { this.batch?.detachAll(); return this.ownValues; }

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
      copyRows(newKeys[i], (row * KV) * S + from, S, this.ownKeys[i], this.length, cap, KV, count, hd);
      copyRows(newValues[i], (row * KV) * S + from, S, this.ownValues[i], this.length, cap, KV, count, hd);
    }
    this.length += count;
  }

  /** Keep only the first `n` positions (roll back rejected tokens, reuse a prefix). */
  truncate(n: number): void {
    this.batch?.detachAll();
    this.length = Math.min(this.length, n);
  }

  /** An independent copy (prefix sharing between requests with the same prompt). */
  clone(): SequenceKv {
    const c = new SequenceKv(this.numLayers, this.numKvHeads, this.headDim);
    c.setArrays(this.keys.map((k) => k.slice()), this.values.map((v) => v.slice()), this.capacity);
    c.length = this.length;
    return c;
  }
}

/**
 * Copy `count` positions for each of `heads` heads: source head h starts at position
 * (srcHeadBase + h·srcStride) in units of hd, destination head h at (h·dstCap + dstPos).
 */
function copyRows(src: Float32Array, srcBase: number, srcStride: number, dst: Float32Array, dstPos: number, dstCap: number, heads: number, count: number, hd: number): void {
  for (let h = 0; h < heads; h++) {
    const s = (srcBase + h * srcStride) * hd;
    dst.set(src.subarray(s, s + count * hd), (h * dstCap + dstPos) * hd);
  }
}

/**
 * Several sequences' caches as right-padded [B, KV, P, hd] tensors (one per layer and kind): row b
 * holds sequence b's `length` valid positions at [0, length); the rest is masked.
 */
export class BatchKv {
  constructor(
    readonly seqs: SequenceKv[],
    public keys: Float32Array[],
    public values: Float32Array[],
    public P: number,
  ) {
    for (const s of seqs) s.batch = this;
  }

  /** Pack sequences (already detached) into a new batch with room for P positions per row. */
  static pack(seqs: SequenceKv[], P: number): BatchKv {
    const { numLayers, numKvHeads: KV, headDim: hd } = seqs[0];
    const B = seqs.length;
    // Row b starts at b·KV·P·hd: copy into a subarray view of it.
    const pack = (layer: number, kind: 'keys' | 'values') => {
      const out = new Float32Array(B * KV * P * hd);
      seqs.forEach((s, b) => copyRows(s[kind][layer], 0, s.capacity, out.subarray(b * KV * P * hd), 0, P, KV, s.length, hd));
      return out;
    };
    return new BatchKv(seqs, Array.from({ length: numLayers }, (_, i) => pack(i, 'keys')), Array.from({ length: numLayers }, (_, i) => pack(i, 'values')), P);
  }

  /** Grow every row to P positions (keeping valid ones). */
  grow(P: number): void {
    const { numKvHeads: KV, headDim: hd } = this.seqs[0];
    const B = this.seqs.length;
    const regrow = (src: Float32Array) => {
      const out = new Float32Array(B * KV * P * hd);
      this.seqs.forEach((s, b) => copyRows(src.subarray(b * KV * this.P * hd), 0, this.P, out.subarray(b * KV * P * hd), 0, P, KV, s.length, hd));
      return out;
    };
    this.keys = this.keys.map(regrow);
    this.values = this.values.map(regrow);
    this.P = P;
  }

  /** Append positions [from, from+count) of row b of [B, KV, S, hd] outputs to sequence b's row. */
  append(b: number, newKeys: Float32Array[], newValues: Float32Array[], S: number, from: number, count: number): void {
    const s = this.seqs[b];
    const { numKvHeads: KV, headDim: hd } = s;
    for (let i = 0; i < s.numLayers; i++) {
      copyRows(newKeys[i], b * KV * S + from, S, this.keys[i].subarray(b * KV * this.P * hd), s.length, this.P, KV, count, hd);
      copyRows(newValues[i], b * KV * S + from, S, this.values[i].subarray(b * KV * this.P * hd), s.length, this.P, KV, count, hd);
    }
    s.length += count;
  }

  /** Copy every row back into its sequence and dissolve the batch. */
  detachAll(): void {
    const { numLayers, numKvHeads: KV, headDim: hd } = this.seqs[0];
    this.seqs.forEach((s, b) => {
      s.batch = null;
      const cap = s.length + KV_HEADROOM;
      const copyOut = (src: Float32Array) => {
        const dst = new Float32Array(KV * cap * hd);
        copyRows(src.subarray(b * KV * this.P * hd), 0, this.P, dst, 0, cap, KV, s.length, hd);
        return dst;
      };
      s.setArrays(Array.from({ length: numLayers }, (_, i) => copyOut(this.keys[i])), Array.from({ length: numLayers }, (_, i) => copyOut(this.values[i])), cap);
    });
  }
}

/** Copy the first `valid` positions of a [heads, fromCap, hd] array into a new [heads, toCap, hd] array. */
export function resizePositions(src: Float32Array, heads: number, fromCap: number, hd: number, valid: number, toCap: number): Float32Array {
  const out = new Float32Array(heads * toCap * hd);
  copyRows(src, 0, fromCap, out, 0, toCap, heads, valid, hd);
  return out;
}
