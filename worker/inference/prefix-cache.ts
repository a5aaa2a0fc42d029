// Prefix reuse for repeated prompts (the same system prompt and tools in every rollout of an RL
// group, or a multi-turn chat that grows). When a sequence finishes, its KV cache is kept under
// its id instead of being dropped; a later sequence whose tokens start the same way gets a copy of
// that prefix from the runner and only prefills the rest.
//
// The runner keeps one contiguous cache per sequence (src/runtime/kv-cache.ts), so reuse is a
// copy: it saves prefill compute, not memory. Kept entries stay charged to the KV budget and are
// evicted (least recently used first) whenever running sequences need the room, before anyone is
// preempted. Lookup is a plain scan: there are few entries and prompts are short next to a step.

export interface PrefixMatch {
  donorId: number;
  length: number;
}

interface Entry {
  tokens: readonly number[];
  lastUsed: number;
}

export class PrefixCache {
  private readonly entries = new Map<number, Entry>();
  private clock = 0;

  constructor(
    /** Shortest prefix worth copying. */
    readonly minLength: number,
    readonly maxEntries: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Keeps `tokens` (whose KV the runner holds under `donorId`). Returns ids evicted to stay within maxEntries. */
  insert(donorId: number, tokens: readonly number[]): number[] {
    this.entries.set(donorId, { tokens, lastUsed: ++this.clock });
    const evicted: number[] = [];
    while (this.entries.size > this.maxEntries) evicted.push(this.evictOldest()!);
    return evicted;
  }

  /**
   * The longest cached prefix of `tokens`, leaving at least one token to compute (the model must
   * run on something to produce logits).
   */
  match(tokens: readonly number[]): PrefixMatch | null {
    let best: PrefixMatch | null = null;
    for (const [donorId, e] of this.entries) {
      const limit = Math.min(e.tokens.length, tokens.length - 1);
      let n = 0;
      while (n < limit && e.tokens[n] === tokens[n]) n++;
      if (n >= this.minLength && (!best || n > best.length)) best = { donorId, length: n };
    }
    return best;
  }

  touch(donorId: number): void {
    const e = this.entries.get(donorId);
    if (e) e.lastUsed = ++this.clock;
  }

  /** Removes the least recently used entry (never `protect`); returns its id or null. */
  evictOldest(protect?: number): number | null {
    let oldest: number | null = null;
    for (const [id, e] of this.entries) if (id !== protect && (oldest === null || e.lastUsed < this.entries.get(oldest)!.lastUsed)) oldest = id;
    if (oldest !== null) this.entries.delete(oldest);
    return oldest;
  }
}
