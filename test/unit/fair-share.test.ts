// The fair-share policies: the worker's batch between entities (src/domain/fair-share.ts), the API's per-entity
// in-flight and queue limits (src/queue/entity-admission.ts), and the scheduler that applies the first.
import { describe, expect, it } from 'vitest';
import { fairAdmissionOrder, fairShareVictims } from '../../src/domain/fair-share.js';
import { EntityAdmission } from '../../src/queue/entity-admission.js';
import { BlockManager } from '../../worker/inference/block-manager.js';
import { createRng } from '../../worker/inference/rng.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { Scheduler } from '../../worker/inference/scheduler.js';
import { Sequence } from '../../worker/inference/sequence.js';

interface Item {
  id: string;
  entity: string;
}
const item = (id: string): Item => ({ id, entity: id[0] });
const items = (...ids: string[]) => ids.map(item);
const entityOf = (i: Item) => i.entity;
const ids = (list: Iterable<Item>) => [...list].map((i) => i.id);

describe('fairAdmissionOrder', () => {
  it('keeps arrival order when one entity waits', () => {
    expect(ids(fairAdmissionOrder(items('b1', 'b2', 'b3'), [], entityOf))).toEqual(['b1', 'b2', 'b3']);
  });

  it('alternates between entities, oldest first within each, however many one of them queued first', () => {
    const waiting = items('b1', 'b2', 'b3', 'b4', 'a1', 'a2', 'c1');
    expect(ids(fairAdmissionOrder(waiting, [], entityOf))).toEqual(['b1', 'a1', 'c1', 'b2', 'a2', 'b3', 'b4']);
  });

  it('starts with the entity running the fewest', () => {
    const running = items('bx', 'by', 'bz', 'ax');
    expect(ids(fairAdmissionOrder(items('b1', 'b2', 'a1', 'a2', 'a3'), running, entityOf))).toEqual(['a1', 'a2', 'b1', 'a3', 'b2']);
  });
});

describe('fairShareVictims', () => {
  const bobRuns = items('b1', 'b2', 'b3', 'b4');

  it('preempts the newest item of the entity above its share for an entity below its share', () => {
    expect(ids(fairShareVictims(items('a1'), bobRuns, 4, entityOf))).toEqual(['b4']);
    // Two entities waiting with nothing running: each gets a slot, from the newest of bob's.
    expect(ids(fairShareVictims(items('a1', 'a2', 'c1'), bobRuns, 4, entityOf))).toEqual(['b4', 'b3']);
  });

  it('preempts nothing while a slot is free, nor for the entity already holding its share', () => {
    expect(fairShareVictims(items('a1'), items('b1', 'b2', 'b3'), 4, entityOf)).toEqual([]);
    expect(fairShareVictims(items('b5'), bobRuns, 4, entityOf)).toEqual([]);
    expect(fairShareVictims(items('a3'), items('b1', 'b2', 'a1', 'a2'), 4, entityOf)).toEqual([]);
  });

  it('gives an entity its share and no more: it stops when the richest holds no more than its share', () => {
    // share = 4 / 2 = 2: alice gets two of bob's slots for her three waiting items.
    expect(ids(fairShareVictims(items('a1', 'a2', 'a3'), bobRuns, 4, entityOf))).toEqual(['b4', 'b3']);
  });

  it('never takes a protected item, and makes room only for an item ready to start', () => {
    expect(ids(fairShareVictims(items('a1'), bobRuns, 4, entityOf, { protect: (i) => i.id === 'b4' }))).toEqual(['b3']);
    expect(ids(fairShareVictims(items('a1', 'a2'), bobRuns, 4, entityOf, { ready: (i) => i.id !== 'a1' }))).toEqual(['b4']);
    expect(fairShareVictims(items('a1'), bobRuns, 4, entityOf, { ready: () => false })).toEqual([]);
  });
});

describe('EntityAdmission', () => {
  it('runs up to the in-flight limit, queues up to the queue limit, then refuses that entity only', () => {
    const a = new EntityAdmission<string>({ inFlight: 2, queued: 1 });
    expect(a.offer('bob', 'b1').kind).toBe('run');
    expect(a.offer('bob', 'b2').kind).toBe('run');
    expect(a.offer('bob', 'b3').kind).toBe('queued');
    const refused = a.offer('bob', 'b4');
    expect(refused).toMatchObject({ kind: 'full' });
    expect((refused as { reason: string }).reason).toMatch(/2 requests in flight and 1 queued/);
    // Bob's backlog is his own: alice runs at once.
    expect(a.offer('alice', 'a1').kind).toBe('run');
    expect(a.running('bob')).toBe(2);
    expect(a.waiting('bob')).toBe(1);
  });

  it('hands a finished slot to the same entity\'s next waiting item, in order, and frees it when none waits', () => {
    const a = new EntityAdmission<string>({ inFlight: 1, queued: 5 });
    a.offer('bob', 'b1');
    a.offer('bob', 'b2');
    a.offer('bob', 'b3');
    expect(a.finished('bob')).toBe('b2');
    expect(a.withdraw('bob', 'b3')).toBe(true);
    expect(a.withdraw('bob', 'b3')).toBe(false);
    expect(a.finished('bob')).toBeNull();
    expect(a.running('bob')).toBe(0);
    expect(a.offer('bob', 'b4').kind).toBe('run');
  });
});

describe('scheduler fair shares (worker/inference/scheduler.ts)', () => {
  let nextId = 1;
  function seq(entity: string): Sequence {
    const s = new Sequence(nextId++, [2, 3, 4], defaultSamplingParams(), createRng(0));
    s.entity = entity;
    return s;
  }
  const step = (s: Scheduler) => {
    const out = s.schedule();
    for (const it of out.items) {
      it.seq.numComputed += it.numTokens;
      if (it.samples) it.seq.append({ id: 5, logprob: 0, topLogprobs: [] });
    }
    return out;
  };

  it('admits a late entity at the next step although another filled the batch and queued more before it', () => {
    const s = new Scheduler({ maxNumSeqs: 4, maxBatchedTokens: 64, mixedAdapterBatches: true }, new BlockManager(100, 4));
    const bob = Array.from({ length: 10 }, () => seq('bob'));
    bob.forEach((q) => s.add(q));
    step(s);
    step(s);
    const alice = seq('alice');
    s.add(alice);
    const out = step(s);
    expect(out.items.map((i) => i.seq)).toContain(alice);
    expect(out.preempted).toEqual([bob[3]]); // bob's newest running sequence made room
    expect(s.numRunning).toBe(4);
    // Bob's sequence waits at the front of his own line and runs again when a slot frees.
    s.remove(alice);
    expect(step(s).items.map((i) => i.seq)).toContain(bob[3]);
  });

  it('admits waiting sequences round-robin by entity when slots free up', () => {
    const s = new Scheduler({ maxNumSeqs: 2, maxBatchedTokens: 64, mixedAdapterBatches: true }, new BlockManager(100, 4));
    const b = [seq('bob'), seq('bob'), seq('bob')];
    const c = seq('carol');
    [...b, c].forEach((q) => s.add(q));
    // Carol arrived last, yet gets the second slot: bob already runs one.
    expect(step(s).items.map((i) => i.seq)).toEqual([b[0], c]);
  });
});
