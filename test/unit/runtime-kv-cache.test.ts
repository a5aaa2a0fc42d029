// The runner's KV caches against a plain reference: whatever sequence of appends, batch joins and leaves,
// resizes, truncations and prefix copies happens, every sequence's valid positions hold exactly the
// keys/values appended for it. Covers both copy paths of kv-cache.ts (short runs copied in a loop, long ones
// with `set`) and the row moves of BatchKv.remove.
import { describe, expect, it } from 'vitest';
import { BatchKv, SequenceKv } from '../../src/runtime/kv-cache.js';

const LAYERS = 2, KV = 3;

/** A deterministic value for (sequence, position, layer, kind, head, dim), so any misplaced copy shows. */
const value = (seq: number, pos: number, layer: number, kind: number, head: number, d: number) => seq * 1e6 + pos * 1e3 + layer * 100 + kind * 50 + head * 10 + d / 100;

/** What the graph returns for one run: per layer, [B, KV, S, hd] new keys and values. */
function newKv(hd: number, rows: { seq: number; start: number; count: number }[], S: number) {
  const make = (kind: number) =>
    Array.from({ length: LAYERS }, (_, layer) => {
      const a = new Float32Array(rows.length * KV * S * hd);
      rows.forEach((r, b) => {
        // Right-aligned in S, as the runner feeds them.
        for (let j = 0; j < r.count; j++)
          for (let h = 0; h < KV; h++)
            for (let d = 0; d < hd; d++) a[((b * KV + h) * S + S - r.count + j) * hd + d] = value(r.seq, r.start + j, layer, kind, h, d);
      });
      return a;
    });
  return { keys: make(0), values: make(1) };
}

/** The sequence's valid positions as the runner would feed them, read without disturbing any batch. */
function contents(kv: SequenceKv, batch: BatchKv | null) {
  const view = kv.batch ? kv.batch.rowView(kv) : { keys: kv.keys, values: kv.values, capacity: kv.capacity };
  expect(kv.batch).toBe(batch);
  return { view, length: kv.length };
}

function expectHolds(kv: SequenceKv, seq: number, length: number, hd: number, batch: BatchKv | null = null, from = seq) {
  const { view, length: n } = contents(kv, batch);
  expect(n).toBe(length);
  for (let layer = 0; layer < LAYERS; layer++)
    for (const [kind, arrays] of [view.keys, view.values].entries())
      for (let h = 0; h < KV; h++)
        for (let p = 0; p < length; p++)
          for (let d = 0; d < hd; d += 5) {
            const got = arrays[layer][(h * view.capacity + p) * hd + d];
            if (got !== Math.fround(value(from, p, layer, kind, h, d))) throw new Error(`seq ${seq}: layer ${layer} kind ${kind} head ${h} position ${p} dim ${d} holds ${got}`);
          }
}

describe.each([16, 64])('KV caches with head size %i', (hd) => {
  it('a sequence appends single positions and chunks, grows, truncates and copies a prefix', () => {
    const kv = new SequenceKv(LAYERS, KV, hd);
    let length = 0;
    for (const count of [5, 1, 1, 40, 1, 3]) {
      const S = count + 2; // padding in front of the row's tokens
      const out = newKv(hd, [{ seq: 1, start: length, count }], S);
      kv.append(out.keys, out.values, 0, S, S - count, count);
      length += count;
      expectHolds(kv, 1, length, hd);
    }
    kv.truncate(20);
    expectHolds(kv, 1, 20, hd);
    const copy = kv.copyPrefix(12);
    expectHolds(copy, 1, 12, hd, null, 1);
    expect(() => kv.copyPrefix(21)).toThrow(/21 positions asked, 20 cached/);
  });

  it('a batch keeps every row right through joins, appends, leaves (the last row moving in), resizes and detaches', () => {
    const lengths = new Map<number, number>();
    const seqs = new Map<number, SequenceKv>();
    const start = (id: number, n: number) => {
      const kv = new SequenceKv(LAYERS, KV, hd);
      const out = newKv(hd, [{ seq: id, start: 0, count: n }], n);
      kv.append(out.keys, out.values, 0, n, 0, n);
      seqs.set(id, kv);
      lengths.set(id, n);
      return kv;
    };
    const batch = BatchKv.pack([start(1, 7), start(2, 30), start(3, 1)], 40);
    const step = (counts: Map<number, number>) => {
      const S = Math.max(1, ...counts.values());
      const rows = batch.rows.map((kv) => [...seqs].find(([, s]) => s === kv)![0]);
      const out = newKv(hd, rows.map((id) => ({ seq: id, start: lengths.get(id)!, count: counts.get(id) ?? 1 })), S);
      const need = Math.max(...rows.map((id) => lengths.get(id)! + (counts.get(id) ?? 1)));
      if (need > batch.P) batch.resize(need + 8);
      rows.forEach((id, b) => {
        const c = counts.get(id) ?? 1;
        batch.append(b, out.keys, out.values, S, S - c, c);
        lengths.set(id, lengths.get(id)! + c);
      });
      for (const [id, kv] of seqs) if (kv.batch) expectHolds(kv, id, lengths.get(id)!, hd, batch);
    };
    step(new Map());
    batch.add(start(4, 12)); // joins as row 3 (the arrays double)
    step(new Map([[4, 9]])); // a chunk next to single positions
    batch.remove(seqs.get(1)!); // row 0 leaves without a copy: the last row moves into it
    seqs.delete(1);
    lengths.delete(1);
    step(new Map());
    batch.resize(80);
    step(new Map([[2, 20]]));
    const prefix = seqs.get(2)!.copyPrefix(25); // read from its row: the donor stays in the batch
    expectHolds(prefix, 2, 25, hd, null);
    expect(seqs.get(2)!.batch).toBe(batch);
    const leaving = seqs.get(3)!;
    batch.detach(leaving); // copied out into its own arrays
    expectHolds(leaving, 3, lengths.get(3)!, hd, null);
    step(new Map());
    const out = newKv(hd, [{ seq: 3, start: lengths.get(3)!, count: 2 }], 2);
    leaving.append(out.keys, out.values, 0, 2, 0, 2); // and keeps growing alone
    expectHolds(leaving, 3, lengths.get(3)! + 2, hd, null);
    leaving.dispose();
    expect(leaving.length).toBe(0);
  });
});
