// Which fetched artifacts to delete to fit the cache budget: least recently used first, never one in use.

export interface CachedArtifact {
  /** Artifact path under HEARTH_HOME. */
  rel: string;
  bytes: number;
  lastUsedMs: number;
}

/**
 * The artifacts to evict so the total fits `budgetBytes`, oldest use first, skipping `inUse` (loaded models, a
 * running job's checkpoints). May leave the total above the budget when what is in use alone exceeds it.
 */
export function chooseEvictions(entries: CachedArtifact[], budgetBytes: number, inUse: ReadonlySet<string>): string[] {
  let total = entries.reduce((a, e) => a + e.bytes, 0);
  const out: string[] = [];
  for (const e of [...entries].sort((a, b) => a.lastUsedMs - b.lastUsedMs)) {
    if (total <= budgetBytes) break;
    if (inUse.has(e.rel)) continue;
    out.push(e.rel);
    total -= e.bytes;
  }
  return out;
}
