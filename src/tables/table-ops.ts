// /table/update semantics, independent of storage.
//
// Updates apply strictly in order, each seeing the result of the previous one:
//   append        → push the row digest at the end
//   pop{index}    → valid iff 0 <= index < length; removes that position
//   insert{index} → valid iff 0 <= index <= length; inserts before index (index == length appends)
// updated_row_digests gets one entry per update: the new row's digest, or the popped row's digest.
// Any invalid index fails the whole request with "Index out of range" (HTTP 400).

export type ResolvedUpdate =
  | { kind: 'append'; rowDigest: string }
  | { kind: 'pop'; index: number }
  | { kind: 'insert'; index: number; rowDigest: string };

/** The mutable ordered list of row digests an update is applied to (an array, or the chunked store list). */
export interface DigestSequence {
  readonly length: number;
  insert(index: number, digest: string): void;
  remove(index: number): string;
}

export const INDEX_OUT_OF_RANGE = 'Index out of range';

export type UpdateOutcome =
  | { ok: true; updatedRowDigests: string[] }
  | { ok: false; reason: typeof INDEX_OUT_OF_RANGE };

/**
 * Apply updates to `sequence` in place. On failure the sequence is left half-updated:
 * callers must discard it (the store never persists a failed request).
 */
export function applyUpdates(sequence: DigestSequence, updates: readonly ResolvedUpdate[]): UpdateOutcome {
  const updatedRowDigests: string[] = [];
  for (const update of updates) {
    switch (update.kind) {
      case 'append':
        sequence.insert(sequence.length, update.rowDigest);
        updatedRowDigests.push(update.rowDigest);
        break;
      case 'pop':
        if (!isIndexIn(update.index, sequence.length - 1)) return { ok: false, reason: INDEX_OUT_OF_RANGE };
        updatedRowDigests.push(sequence.remove(update.index));
        break;
      case 'insert':
        if (!isIndexIn(update.index, sequence.length)) return { ok: false, reason: INDEX_OUT_OF_RANGE };
        sequence.insert(update.index, update.rowDigest);
        updatedRowDigests.push(update.rowDigest);
        break;
    }
  }
  return { ok: true, updatedRowDigests };
}

/** 0 <= index <= max, integers only (Python never wraps negative indexes here). */
function isIndexIn(index: number, max: number): boolean {
  return Number.isInteger(index) && index >= 0 && index <= max;
}

/** Pure form over a plain list: the base is not modified. */
export function applyUpdatesToList(
  base: readonly string[],
  updates: readonly ResolvedUpdate[],
): { ok: true; rowDigests: string[]; updatedRowDigests: string[] } | { ok: false; reason: typeof INDEX_OUT_OF_RANGE } {
  const rowDigests = [...base];
  const outcome = applyUpdates(new ArrayDigestSequence(rowDigests), updates);
  return outcome.ok ? { ok: true, rowDigests, updatedRowDigests: outcome.updatedRowDigests } : outcome;
}

export class ArrayDigestSequence implements DigestSequence {
  constructor(private readonly items: string[]) {}

  get length(): number {
    return this.items.length;
  }

  insert(index: number, digest: string): void {
    this.items.splice(index, 0, digest);
  }

  remove(index: number): string {
    return this.items.splice(index, 1)[0];
  }
}
