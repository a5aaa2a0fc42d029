// The API's view of worker liveness: the heartbeat timeout, the longer load timeout for a worker that announced a
// model load (its event loop is blocked while it loads, so it cannot beat), and the expected time of an announced
// long training step.
import { describe, expect, it } from 'vitest';
import { allowedSilenceMs, blockedBy, WorkerRegistry } from '../../src/queue/worker-directory.js';
import type { WorkerInfo } from '../../src/queue/port.js';

const worker = (id: string, loading?: string[]): WorkerInfo => ({
  id, kind: 'inference', device: 'cpu', host: 'h', pid: 1, load: 0, lastSeenMs: 0, tasks: [`${id}-req`],
  ...(loading ? { loading: loading.map((model) => ({ model, sinceMs: 0 })) } : {}),
});

describe('WorkerRegistry', () => {
  it('gives a worker the heartbeat timeout, and one that announced a load the load timeout', () => {
    const r = new WorkerRegistry(1000, 60_000);
    const t0 = Date.now();
    r.update(worker('idle'));
    r.update(worker('loading', ['a/b']));
    expect(r.isLive('idle', t0 + 1000)).toBe(true);
    expect(r.isLive('idle', t0 + 1001 + 50)).toBe(false);
    expect(r.isLive('loading', t0 + 1001 + 50)).toBe(true);
    expect(r.live('inference', t0 + 30_000).map((w) => w.id)).toEqual(['loading']);
    expect(r.runnerOf('loading-req', t0 + 30_000)?.id).toBe('loading');
    expect(r.takeExpired(t0 + 30_000).map((w) => w.id)).toEqual(['idle']);
    expect(r.takeExpired(t0 + 60_001 + 50).map((w) => w.id)).toEqual(['loading']);
    expect(r.get('loading')).toBeUndefined();
  });

  it('a heartbeat after the load ends brings back the heartbeat timeout', () => {
    const r = new WorkerRegistry(1000, 60_000);
    r.update(worker('w', ['a/b']));
    r.update(worker('w'));
    expect(r.isLive('w', Date.now() + 1100)).toBe(false);
  });

  it('never gives a loading worker less than the heartbeat timeout', () => {
    const r = new WorkerRegistry(5000, 1000);
    r.update(worker('w', ['a/b']));
    expect(r.isLive('w', Date.now() + 4000)).toBe(true);
  });

  it('gives an announced training step its expected time (at least the heartbeat timeout), not the load timeout', () => {
    const step = (expectedMs: number) => ({ loading: [{ model: 'a/b', sinceMs: 0, step: 2, expectedMs }] });
    expect(allowedSilenceMs(step(400_000), 15_000, 600_000)).toBe(400_000);
    expect(allowedSilenceMs(step(900_000), 15_000, 600_000)).toBe(900_000); // a step longer than the load timeout
    expect(allowedSilenceMs(step(2_000), 15_000, 600_000)).toBe(15_000);
    expect(allowedSilenceMs({ loading: [...step(2_000).loading, { model: 'c/d', sinceMs: 0 }] }, 15_000, 600_000)).toBe(600_000);
    expect(allowedSilenceMs({}, 15_000, 600_000)).toBe(15_000);
    const r = new WorkerRegistry(1000, 60_000);
    r.update({ ...worker('w'), ...step(5000) });
    expect(r.isLive('w', Date.now() + 4900)).toBe(true);
    expect(r.isLive('w', Date.now() + 5100)).toBe(false);
  });

  it('gives a worker with a pulse thread the heartbeat timeout whatever it announced (worker/pulse.ts)', () => {
    const loading = [{ model: 'a/b', sinceMs: 0 }, { model: 'a/b', sinceMs: 0, step: 2, expectedMs: 900_000 }];
    expect(allowedSilenceMs({ loading }, 15_000, 600_000)).toBe(900_000);
    expect(allowedSilenceMs({ loading, pulse: true }, 15_000, 600_000)).toBe(15_000);
    const r = new WorkerRegistry(1000, 60_000);
    r.update({ ...worker('w', ['a/b']), pulse: true });
    expect(r.isLive('w', Date.now() + 900)).toBe(true);
    expect(r.isLive('w', Date.now() + 1100)).toBe(false);
  });

  it('says what blocked a worker: models being loaded, a training step', () => {
    expect(blockedBy(worker('w'))).toBeNull();
    expect(blockedBy(undefined)).toBeNull();
    expect(blockedBy(worker('w', ['a/b']))).toBe('loading model a/b');
    expect(blockedBy(worker('w', ['a/b', 'c/d']))).toBe('loading models a/b, c/d');
    expect(blockedBy({ ...worker('w'), loading: [{ model: 'a/b', sinceMs: 0, step: 3, expectedMs: 1000 }] })).toBe('running training step 3 of model a/b');
  });
});
