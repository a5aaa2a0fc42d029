// Jobs are read without their payloads (an RL payload can be tens of MB): only touching `payload` reads and
// parses it (src/store/sqlite/jobs-repo.ts), so lookups on every report and poll, and the scheduler's choice of
// jobs, survive a payload that would not parse, or would not fit in memory.
import { describe, expect, it } from 'vitest';
import { Store } from '../../src/store/sqlite/store.js';

describe('JobsRepo payloads', () => {
  it('reads records without parsing payloads; the payload is parsed once, when first touched', () => {
    const store = Store.open(':memory:');
    const now = new Date().toISOString();
    store.models.insert({ id: 'm1', entity: 'bob', project: 'p', name: 'n', baseModel: 'b', runId: null, createdAt: now });
    const job = (id: string) => ({ id, entity: 'bob', modelId: 'm1', kind: 'rl' as const, status: 'queued' as const, payload: { trajectory_groups: [], experimental_config: { learning_rate: 0.5 } }, dedupKey: null, errorMessage: null, createdAt: now, startedAt: null, finishedAt: null });
    store.jobs.insert(job('good'));
    store.jobs.insert(job('broken'));
    store.db.prepare('UPDATE training_jobs SET payload = ? WHERE id = ?').run('{"trajectory_groups": [', 'broken');

    const broken = store.jobs.getById('broken')!;
    expect(broken.status).toBe('queued');
    expect(store.jobs.withStatus(['queued']).map((j) => j.id)).toEqual(['good', 'broken']);
    expect(store.jobs.get('bob', 'broken')?.modelId).toBe('m1');
    expect(() => broken.payload).toThrow(SyntaxError);
    expect(store.jobs.payloadText('broken')).toBe('{"trajectory_groups": [');

    const good = store.jobs.getById('good')!;
    expect(good.payload).toEqual({ trajectory_groups: [], experimental_config: { learning_rate: 0.5 } });
    expect(good.payload).toBe(good.payload); // parsed once
    expect({ ...good }.payload).toEqual({ trajectory_groups: [], experimental_config: { learning_rate: 0.5 } }); // spreads and serialises like a plain record
    store.close();
  });
});
