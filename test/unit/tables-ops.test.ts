import { describe, expect, it } from 'vitest';
import { applyUpdatesToList, INDEX_OUT_OF_RANGE, type ResolvedUpdate } from '../../src/tables/table-ops.js';

const append = (rowDigest: string): ResolvedUpdate => ({ kind: 'append', rowDigest });
const pop = (index: number): ResolvedUpdate => ({ kind: 'pop', index });
const insert = (index: number, rowDigest: string): ResolvedUpdate => ({ kind: 'insert', index, rowDigest });

describe('applyUpdatesToList', () => {
  it('applies updates in order, each seeing the previous result', () => {
    const result = applyUpdatesToList(['a', 'b'], [append('c'), pop(0), insert(1, 'd')]);
    expect(result).toEqual({ ok: true, rowDigests: ['b', 'd', 'c'], updatedRowDigests: ['c', 'a', 'd'] });
  });

  it('insert at length appends; pop at last index is valid', () => {
    expect(applyUpdatesToList(['a'], [insert(1, 'b'), pop(1)])).toEqual({
      ok: true,
      rowDigests: ['a'],
      updatedRowDigests: ['b', 'b'],
    });
  });

  it("refuses with the hosted service's message", () => {
    expect(INDEX_OUT_OF_RANGE).toBe('Index out of range');
  });

  it('no updates returns the base unchanged', () => {
    expect(applyUpdatesToList(['a'], [])).toEqual({ ok: true, rowDigests: ['a'], updatedRowDigests: [] });
  });

  it('keeps duplicates', () => {
    expect(applyUpdatesToList([], [append('a'), append('a'), insert(0, 'a')])).toEqual({
      ok: true,
      rowDigests: ['a', 'a', 'a'],
      updatedRowDigests: ['a', 'a', 'a'],
    });
  });

  const invalid: [string, string[], ResolvedUpdate[]][] = [
    ['pop on empty', [], [pop(0)]],
    ['pop at length', ['a'], [pop(1)]],
    ['negative pop', ['a'], [pop(-1)]],
    ['insert past length', ['a'], [insert(2, 'b')]],
    ['negative insert', ['a'], [insert(-1, 'b')]],
    ['fractional index', ['a', 'b'], [pop(0.5)]],
    ['index valid only before an earlier pop', ['a'], [pop(0), pop(0)]],
  ];
  for (const [name, base, updates] of invalid) {
    it(`rejects ${name} and leaves the base untouched`, () => {
      const before = [...base];
      expect(applyUpdatesToList(base, updates)).toEqual({ ok: false, reason: INDEX_OUT_OF_RANGE });
      expect(base).toEqual(before);
    });
  }
});
