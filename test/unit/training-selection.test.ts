// Which queued training job runs next (src/domain/training-selection.ts): per model in order, fair between entities.
import { describe, expect, it } from 'vitest';
import { parseEntityPriorities, trainingPickOrder, type QueuedJob, type TrainingFairness } from '../../src/domain/training-selection.js';

const job = (id: string, modelId: string, entity: string): QueuedJob => ({ id, modelId, entity });
const open: TrainingFairness = { maxActivePerEntity: 0, priorities: new Map() };
const ids = (jobs: QueuedJob[]) => jobs.map((j) => j.id);

describe('trainingPickOrder', () => {
  it('gives an entity with no job running the next trainer before a second job of the entity that has one', () => {
    // Probe 8: bob queued two jobs (two models) before alice's one; bob's first runs.
    const queued = [job('b2', 'bm2', 'bob'), job('a1', 'am', 'alice')];
    expect(ids(trainingPickOrder(queued, [{ modelId: 'bm1', entity: 'bob' }], new Map([['bob', 1]]), open))[0]).toBe('a1');
  });

  it('takes turns on a single trainer: the entity served longest ago goes first, then the oldest job', () => {
    const queued = [job('b2', 'bm2', 'bob'), job('b3', 'bm3', 'bob'), job('a1', 'am', 'alice'), job('c1', 'cm', 'carol')];
    // Bob's first job just ended (nothing active): bob was served last, so alice and carol (never served) go first.
    expect(ids(trainingPickOrder(queued, [], new Map([['bob', 1]]), open))).toEqual(['a1', 'c1', 'b2', 'b3']);
  });

  it('runs the jobs of one model one at a time, in order, and none while the model has one active', () => {
    const queued = [job('m1', 'm', 'bob'), job('m2', 'm', 'bob'), job('x1', 'x', 'bob')];
    expect(ids(trainingPickOrder(queued, [], new Map(), open))).toEqual(['m1', 'x1']);
    expect(ids(trainingPickOrder(queued, [{ modelId: 'm', entity: 'bob' }], new Map(), open))).toEqual(['x1']);
  });

  it('holds an entity at its active cap', () => {
    const capped = { ...open, maxActivePerEntity: 1 };
    const queued = [job('b2', 'bm2', 'bob'), job('b3', 'bm3', 'bob'), job('a1', 'am', 'alice')];
    expect(ids(trainingPickOrder(queued, [{ modelId: 'bm1', entity: 'bob' }], new Map(), capped))).toEqual(['a1']);
    expect(ids(trainingPickOrder(queued, [], new Map(), capped))).toEqual(['b2', 'a1']);
  });

  it('puts a higher priority first, whatever the turns and ages', () => {
    const prio = { ...open, priorities: new Map([['bob', 5]]) };
    const queued = [job('a1', 'am', 'alice'), job('b1', 'bm', 'bob'), job('b2', 'bm2', 'bob')];
    expect(ids(trainingPickOrder(queued, [], new Map([['bob', 9]]), prio))).toEqual(['b1', 'b2', 'a1']);
  });
});

describe('parseEntityPriorities', () => {
  it('reads entity=number pairs and refuses anything else', () => {
    expect([...parseEntityPriorities(' alice=10, batch=-5 ')]).toEqual([['alice', 10], ['batch', -5]]);
    expect(parseEntityPriorities(undefined).size).toBe(0);
    expect(() => parseEntityPriorities('alice')).toThrow(/entity=number/);
    expect(() => parseEntityPriorities('alice=high')).toThrow(/entity=number/);
  });
});
