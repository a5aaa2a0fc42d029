// KV-cache budget accounting. The runner stores keys/values per sequence; the engine must never
// ask it to hold more than fits in memory. We count in fixed-size blocks of tokens (as paged
// attention does) so that fragmentation is bounded and the numbers match vLLM's knobs
// (block size, number of blocks). A sequence holds ceil(cachedTokens / blockSize) blocks.

export class BlockManager {
  private readonly held = new Map<number, number>();
  private used = 0;

  constructor(
    readonly numBlocks: number,
    readonly blockSize: number,
  ) {
    if (!(numBlocks > 0 && blockSize > 0)) throw new Error('numBlocks and blockSize must be positive');
  }

  get numFree(): number {
    return this.numBlocks - this.used;
  }

  get capacityTokens(): number {
    return this.numBlocks * this.blockSize;
  }

  blocksHeld(seqId: number): number {
    return this.held.get(seqId) ?? 0;
  }

  /** Extra blocks a sequence needs to hold `tokens` cached tokens. */
  extraBlocksFor(seqId: number, tokens: number): number {
    return Math.max(0, Math.ceil(tokens / this.blockSize) - this.blocksHeld(seqId));
  }

  canReserve(seqId: number, tokens: number): boolean {
    return this.extraBlocksFor(seqId, tokens) <= this.numFree;
  }

  /** Grows the sequence's allocation to cover `tokens` cached tokens. */
  reserve(seqId: number, tokens: number): void {
    const extra = this.extraBlocksFor(seqId, tokens);
    if (extra > this.numFree) throw new Error(`KV cache full: need ${extra} blocks, ${this.numFree} free`);
    if (extra === 0) return;
    this.held.set(seqId, this.blocksHeld(seqId) + extra);
    this.used += extra;
  }

  free(seqId: number): void {
    this.used -= this.blocksHeld(seqId);
    this.held.delete(seqId);
  }
}

/**
 * How many blocks fit in a memory budget: per cached token the runner keeps keys and values for
 * every layer: 2 × layers × kvHeads × headDim × bytesPerValue.
 */
export function blocksForMemory(opts: {
  bytes: number;
  blockSize: number;
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  bytesPerValue?: number;
}): number {
  const perToken = 2 * opts.numLayers * opts.numKvHeads * opts.headDim * (opts.bytesPerValue ?? 4);
  return Math.floor(opts.bytes / (perToken * opts.blockSize));
}
