import { describe, expect, it } from 'vitest';
import { BlockManager } from '../../worker/inference/block-manager.js';
import { createRng } from '../../worker/inference/rng.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { Scheduler, type SchedulerConfig } from '../../worker/inference/scheduler.js';
import { Sequence } from '../../worker/inference/sequence.js';

let nextId = 1;
function seq(promptLen: number, adapter: string | null = null, first = 2): Sequence {
  return new Sequence(nextId++, Array.from({ length: promptLen }, (_, i) => i + first), defaultSamplingParams(), createRng(0), adapter);
}

/** What the engine does after a step: mark tokens computed, append a token where one was sampled. */
function complete(s: Scheduler, out: ReturnType<Scheduler['schedule']>) {
  for (const it of out.items) {
    it.seq.numComputed += it.numTokens;
    if (it.samples) it.seq.append({ id: 5, logprob: 0, topLogprobs: [] });
  }
  return out.items.map((it) => [it.seq.id, it.numTokens, it.samples] as const);
}

function make(config: Partial<SchedulerConfig> = {}, blocks = new BlockManager(100, 4)) {
  return { s: new Scheduler({ maxNumSeqs: 4, maxBatchedTokens: 64, mixedAdapterBatches: true, ...config }, blocks), blocks };
}

describe('scheduler', () => {
  it('lets sequences join and leave between steps', () => {
    const { s } = make();
    const a = seq(3), b = seq(5);
    s.add(a);
    expect(complete(s, s.schedule())).toEqual([[a.id, 3, true]]);
    s.add(b);
    expect(complete(s, s.schedule())).toEqual([[a.id, 1, true], [b.id, 5, true]]);
    s.remove(a);
    expect(complete(s, s.schedule())).toEqual([[b.id, 1, true]]);
    expect(s.numRunning).toBe(1);
  });

  it('respects max_num_seqs', () => {
    const { s } = make({ maxNumSeqs: 2 });
    const seqs = [seq(2), seq(2), seq(2)];
    seqs.forEach((q) => s.add(q));
    expect(s.schedule().items.map((i) => i.seq.id)).toEqual([seqs[0].id, seqs[1].id]);
    expect(s.numWaiting).toBe(1);
  });

  it('chunks a long prefill so decoding streams keep running every step', () => {
    const { s } = make({ maxBatchedTokens: 8 });
    const a = seq(2);
    s.add(a);
    complete(s, s.schedule());
    const long = seq(20);
    s.add(long);
    const steps = [];
    for (let i = 0; i < 4; i++) steps.push(complete(s, s.schedule()));
    expect(steps).toEqual([
      [[a.id, 1, true], [long.id, 7, false]],
      [[a.id, 1, true], [long.id, 7, false]],
      [[a.id, 1, true], [long.id, 6, true]],
      [[a.id, 1, true], [long.id, 1, true]],
    ]);
  });

  it('mixed steps: while streams decode, prompt tokens per step are capped at prefillChunkTokens; alone, a prompt takes the whole budget', () => {
    const { s } = make({ maxBatchedTokens: 64, prefillChunkTokens: 5 });
    const first = seq(20);
    s.add(first);
    expect(complete(s, s.schedule())).toEqual([[first.id, 20, true]]); // nobody decodes: no cap
    const a = seq(8), b = seq(4);
    s.add(a);
    s.add(b);
    const steps = [];
    for (let i = 0; i < 3; i++) steps.push(complete(s, s.schedule()));
    expect(steps).toEqual([
      [[first.id, 1, true], [a.id, 5, false]],
      [[first.id, 1, true], [a.id, 3, true], [b.id, 2, false]],
      [[first.id, 1, true], [a.id, 1, true], [b.id, 2, true]],
    ]);
  });

  it('mixed steps: a cap passed for one step (the engine\'s measured budget) replaces the configured one for that step only', () => {
    const { s } = make({ maxBatchedTokens: 64, prefillChunkTokens: 5 });
    const first = seq(4);
    s.add(first);
    complete(s, s.schedule());
    const a = seq(30);
    s.add(a);
    expect(complete(s, s.schedule(12))).toEqual([[first.id, 1, true], [a.id, 12, false]]);
    expect(complete(s, s.schedule())).toEqual([[first.id, 1, true], [a.id, 5, false]]);
    expect(complete(s, s.schedule(64))).toEqual([[first.id, 1, true], [a.id, 13, true]]);
    for (const bad of [-1, 2.5]) expect(() => s.schedule(bad)).toThrow(/prefillChunkTokens/);
  });

  it('mixed steps: a cap of 0 makes a step that decodes decode only (nothing prefilled or admitted); with nobody decoding it does not apply', () => {
    const { s } = make({ maxBatchedTokens: 64, prefillChunkTokens: 5 });
    const first = seq(4);
    s.add(first);
    expect(complete(s, s.schedule(0))).toEqual([[first.id, 4, true]]); // nobody decodes yet: the prompt runs
    const a = seq(30), b = seq(3);
    s.add(a);
    s.add(b);
    expect(complete(s, s.schedule(0))).toEqual([[first.id, 1, true]]);
    expect(s.numWaiting).toBe(2);
    expect(complete(s, s.schedule())).toEqual([[first.id, 1, true], [a.id, 5, false]]);
    expect(complete(s, s.schedule(0))).toEqual([[first.id, 1, true]]); // a, running but mid-prompt, waits too
  });

  it('preempts the newest sequence instead of running out of KV cache, then recomputes it', () => {
    // 4 blocks of 4 tokens = 16 tokens of cache.
    const { s, blocks } = make({}, new BlockManager(4, 4));
    const a = seq(7), b = seq(7);
    s.add(a);
    s.add(b);
    complete(s, s.schedule()); // a: 7 tokens → 2 blocks, b: 2 blocks
    expect(blocks.numFree).toBe(0);
    complete(s, s.schedule()); // both decode into their 8th slot: fits
    const out = s.schedule(); // a needs a 3rd block → b is preempted
    expect(out.preempted).toEqual([b]);
    expect(out.items.map((i) => i.seq.id)).toEqual([a.id]);
    expect(b.numComputed).toBe(0);
    expect(b.status).toBe('waiting');
    complete(s, out);
    s.remove(a);
    const again = s.schedule();
    // b comes back with its prompt and its generated tokens recomputed in one go.
    expect(again.items).toEqual([{ seq: b, numTokens: 9, samples: true }]);
  });

  it('frees the slot and the KV budget of a cancelled sequence at once', () => {
    const { s, blocks } = make({ maxNumSeqs: 1 });
    const a = seq(8), b = seq(3);
    s.add(a);
    s.add(b);
    complete(s, s.schedule());
    expect(blocks.numFree).toBe(98);
    s.remove(a);
    expect(blocks.numFree).toBe(100);
    expect(s.schedule().items.map((i) => i.seq.id)).toEqual([b.id]);
  });

  it('batches only same-adapter sequences when the runner needs that, taking turns', () => {
    const { s } = make({ mixedAdapterBatches: false });
    const a = seq(2, 'x'), b = seq(2, 'y'), c = seq(2, 'x');
    [a, b, c].forEach((q) => s.add(q));
    const seen: string[][] = [];
    for (let i = 0; i < 4; i++) {
      const out = s.schedule();
      seen.push([...new Set(out.items.map((it) => String(it.seq.adapter)))]);
      complete(s, out);
    }
    expect(seen.every((g) => g.length === 1)).toBe(true);
    expect(seen.flat()).toContain('y');
    expect(seen.flat()).toContain('x');
  });

  describe('groups (the same prompt n times) prefill once', () => {
    /** A scheduler with group sharing whose copies are recorded as [to, from, length]. */
    function grouped(config: Partial<SchedulerConfig> = {}) {
      const copies: [number, number, number][] = [];
      const s = new Scheduler({ maxNumSeqs: 8, maxBatchedTokens: 64, mixedAdapterBatches: true, groupPrefixMin: 4, ...config }, new BlockManager(100, 4), {
        applyPrefix: (q, m) => {
          copies.push([q.id, m.donorId, m.length]);
          q.numComputed = m.length;
        },
      });
      return { s, copies };
    }
    /** n sequences with the same 10-token prompt. */
    const group = (n: number, adapter: string | null = null) => Array.from({ length: n }, () => seq(10, adapter));

    it('the first of a group prefills; the others wait, then copy its cache and compute one token each', () => {
      const { s, copies } = grouped();
      const g = group(4);
      g.forEach((q) => s.add(q));
      expect(complete(s, s.schedule())).toEqual([[g[0].id, 10, true]]);
      expect(s.numWaiting).toBe(3);
      expect(complete(s, s.schedule())).toEqual([[g[0].id, 1, true], ...g.slice(1).map((q) => [q.id, 1, true])]);
      expect(copies).toEqual(g.slice(1).map((q) => [q.id, g[0].id, 9]));
    });

    it('waits through a chunked prefill without holding back unrelated requests', () => {
      const { s, copies } = grouped({ maxBatchedTokens: 4 });
      const [lead, follower] = group(2);
      const other = seq(3, null, 50);
      [lead, follower, other].forEach((q) => s.add(q));
      const steps = [];
      for (let i = 0; i < 4; i++) steps.push(complete(s, s.schedule()));
      expect(steps).toEqual([
        [[lead.id, 4, false]],
        [[lead.id, 4, false]], // other: no budget left after the chunk
        [[lead.id, 2, true], [other.id, 2, false]],
        [[lead.id, 1, true], [other.id, 1, true], [follower.id, 1, true]],
      ]);
      expect(copies).toEqual([[follower.id, lead.id, 9]]);
    });

    it('copies only the shared part of a prompt that differs later; shares nothing across adapters or below the minimum', () => {
      const { s, copies } = grouped();
      const lead = seq(10);
      const partial = new Sequence(nextId++, [2, 3, 4, 5, 6, 7, 99, 98], defaultSamplingParams(), createRng(0));
      const short = new Sequence(nextId++, [2, 3, 4, 97, 96], defaultSamplingParams(), createRng(0));
      const [otherAdapter] = group(1, 'x');
      [lead, partial, short, otherAdapter].forEach((q) => s.add(q));
      // `partial` waits for its 6 shared tokens; `short` (3 shared < 4) and the other adapter start at once.
      expect(complete(s, s.schedule())).toEqual([[lead.id, 10, true], [short.id, 5, true], [otherAdapter.id, 10, true]]);
      expect(complete(s, s.schedule())).toEqual([[lead.id, 1, true], [short.id, 1, true], [otherAdapter.id, 1, true], [partial.id, 2, true]]);
      expect(copies).toEqual([[partial.id, lead.id, 6]]);
    });

    it('is off with groupPrefixMin 0: every copy of the prompt is prefilled', () => {
      const { s, copies } = grouped({ groupPrefixMin: 0 });
      const g = group(3);
      g.forEach((q) => s.add(q));
      expect(complete(s, s.schedule())).toEqual(g.map((q) => [q.id, 10, true]));
      expect(copies).toEqual([]);
    });
  });
});
