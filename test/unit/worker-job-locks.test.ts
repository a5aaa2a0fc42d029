// The pure parts of lock-following-loads: ModelLoads' announcements and the lock manager's durations
// (worker/job-locks.ts); the real thing against Redis is test/hardening/faults-job-lock.test.ts.
import { describe, expect, it, vi } from 'vitest';
import type { LockManagerWorkerContext } from 'bullmq';
import { LoadAwareLockManager } from '../../worker/job-locks.js';
import { ModelLoads } from '../../worker/model-loads.js';

function fakeWorker() {
  const extended: { ids: string[]; duration: number }[] = [];
  const worker = {
    name: 'inference',
    async extendJobLocks(ids: string[], _tokens: string[], duration: number) {
      extended.push({ ids, duration });
      return [];
    },
    emit: () => true,
    trace: (_kind: unknown, _op: string, _dest: string, cb: () => unknown) => cb(),
  } as unknown as LockManagerWorkerContext;
  return { worker, extended };
}

/** A lock manager following `loads` (load lock 600 s, normal 30 s), renewed on each announcement, holding job `a`. */
function lockedJob() {
  const loads = new ModelLoads();
  const { worker, extended } = fakeWorker();
  const locks = new LoadAwareLockManager(worker, { lockRenewTime: 15_000, lockDuration: 30_000, workerId: 'w' }, () => loads.blockingMs(600_000));
  loads.onChange(() => locks.renewAll());
  locks.trackJob('a', 'token-a', Date.now());
  return { loads, locks, extended };
}

describe('LoadAwareLockManager', () => {
  it('renews for the load lock while a load is under way and for the normal lock otherwise', async () => {
    const { loads, locks, extended } = lockedJob();
    expect(extended).toEqual([]); // no load: BullMQ's own timer renews it

    const end = await loads.begin('m');
    expect(extended).toEqual([{ ids: ['a'], duration: 600_000 }]); // renewed before begin() resolved
    locks.trackJob('b', 'token-b', Date.now()); // taken while the load is under way
    await Promise.resolve();
    expect(extended.at(-1)).toEqual({ ids: ['b'], duration: 600_000 });

    end();
    await vi.waitFor(() => expect(extended.at(-1)).toEqual({ ids: ['a', 'b'], duration: 30_000 }));
    end(); // a second call announces nothing
    await Promise.resolve();
    expect(extended).toHaveLength(3);
  });

  it('holds the locks for an announced training step\'s expected time, and for the load lock while a load is also under way', async () => {
    const { loads, extended } = lockedJob();
    const endStep = await loads.begin('m', { step: 2, expectedMs: 240_000 });
    expect(extended.at(-1)).toEqual({ ids: ['a'], duration: 240_000 });
    const endLoad = await loads.begin('n');
    expect(extended.at(-1)).toEqual({ ids: ['a'], duration: 600_000 });
    endLoad();
    await vi.waitFor(() => expect(extended.at(-1)).toEqual({ ids: ['a'], duration: 240_000 }));
    endStep();
    await vi.waitFor(() => expect(extended.at(-1)).toEqual({ ids: ['a'], duration: 30_000 }));
  });

  it('never shortens below the normal lock', async () => {
    const { worker, extended } = fakeWorker();
    const locks = new LoadAwareLockManager(worker, { lockRenewTime: 15_000, lockDuration: 30_000, workerId: 'w' }, () => 5_000);
    locks.trackJob('a', 't', Date.now());
    await Promise.resolve();
    expect(extended).toEqual([{ ids: ['a'], duration: 30_000 }]);
  });
});

describe('ModelLoads', () => {
  it('lists a load from begin to end, and during() ends it when the load throws', async () => {
    const loads = new ModelLoads();
    const seen: string[][] = [];
    loads.onChange(() => void seen.push(loads.current().map((l) => l.model)));
    await expect(loads.during('m', async () => {
      expect(loads.current().map((l) => l.model)).toEqual(['m']);
      throw new Error('no such file');
    })).rejects.toThrow('no such file');
    expect(loads.current()).toEqual([]);
    expect(seen).toEqual([['m'], []]);
  });

  it('starts the load after at most 5 s when an announcement cannot leave (Redis down)', async () => {
    vi.useFakeTimers();
    try {
      const loads = new ModelLoads();
      loads.onChange(() => new Promise<void>(() => {})); // never answers
      let begun = false;
      const begin = loads.begin('m').then(() => (begun = true));
      await vi.advanceTimersByTimeAsync(4_900);
      expect(begun).toBe(false);
      await vi.advanceTimersByTimeAsync(200);
      await begin;
      expect(begun).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});
