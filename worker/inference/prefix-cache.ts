// Prefix reuse for repeated prompts (the same system prompt and tools in every rollout of an RL
// group, or a multi-turn chat that grows). When a sequence finishes, its KV cache is kept under
// its id instead of being dropped; a later sequence whose tokens start the same way gets a copy of
// that prefix from the runner and only prefills the rest.
//
// The runner keeps one contiguous cache per sequence (src/runtime/kv-cache.ts), so reuse is a
// copy: it saves prefill compute, not memory. Kept entries stay charged to the KV budget and are
// evicted (least recently used first) whenever running sequences need the room, before anyone is
// preempted. Lookup is a plain scan: there are few entries and prompts are short next to a step.
//
// Entries are partitioned by scope (the tenant the prompt was served for): a lookup only matches entries of
// its own scope. Shared across tenants, a hit made a request measurably faster, so one tenant could learn
// whether, and how much of, its prompt matched one another tenant sent recently (issue #44: 4.5 ms vs 119 ms).
// Eviction stays one LRU over all scopes: evicting only slows the owner, it tells nobody anything.

export interface PrefixMatch {
  donorId: number;
  length: number;
}

interface Entry {
  tokens: readonly number[];
  scope: string | null;
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
  insert(donorId: number, tokens: readonly number[], scope: string | null = null): number[] {
    this.entries.set(donorId, { tokens, scope, lastUsed: ++this.clock });
    const evicted: number[] = [];
    while (this.entries.size > this.maxEntries) evicted.push(this.evictOldest()!);
    return evicted;
  }

  /**
   * The longest cached prefix of `tokens` among `scope`'s entries, leaving at least one token to compute (the model must
   * run on something to produce logits).
   */
  match(tokens: readonly number[], scope: string | null = null): PrefixMatch | null {
    let best: PrefixMatch | null = null;
    for (const [donorId, e] of this.entries) {
      if (e.scope !== scope) continue;
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
