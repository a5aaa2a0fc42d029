// The gateway's bookkeeping with a recording adapter: ids, cancellation by the route's callback, back-pressure.
import { describe, expect, it } from 'vitest';
import { InferenceGateway } from '../../src/queue/inference-gateway.js';
import type { QueueAdapter } from '../../src/queue/port.js';
import type { InferenceTask } from '../../src/protocol/messages.js';

function recordingAdapter() {
  const started: InferenceTask[] = [];
  const cancelled: string[] = [];
  const adapter = {
    startInference: async (task: InferenceTask) => void started.push(task),
    cancelInference: async (id: string) => void cancelled.push(id),
  } as unknown as QueueAdapter;
  return { adapter, started, cancelled };
}

const call = (extra: object = {}) => ({ op: 'completion' as const, body: { model: 'm' }, model: { baseModel: 'm', baseModelDir: '/m', adapterDir: null, name: 'm' }, stream: true, queueKey: 'm', ...extra });

describe('InferenceGateway', () => {
  it('refuses at once with 503 and a retry-after while the queue is unreachable, and queues nothing', async () => {
    const { adapter, started } = recordingAdapter();
    let reachable = false;
    (adapter as { reachable?: () => boolean }).reachable = () => reachable;
    const gateway = new InferenceGateway(adapter, 10, 60_000);
    await expect(gateway.submit(call())).rejects.toMatchObject({ kind: 'unavailable', retryAfterSec: 2 });
    expect(started).toEqual([]);
    expect(gateway.inFlight()).toBe(0);
    reachable = true;
    void gateway.submit(call());
    expect(started).toHaveLength(1);
  });

  it('gives each request its own id, one prefix per gateway', async () => {
    const { adapter, started } = recordingAdapter();
    const a = new InferenceGateway(adapter, 10, 60_000), b = new InferenceGateway(adapter, 10, 60_000);
    void a.submit(call()), void a.submit(call()), void b.submit(call());
    const ids = started.map((t) => t.requestId);
    expect(new Set(ids).size).toBe(3);
    const prefix = (id: string) => id.slice(0, id.lastIndexOf('-'));
    expect(prefix(ids[0])).toBe(prefix(ids[1]));
    expect(prefix(ids[0])).not.toBe(prefix(ids[2]));
  });

  it('cancels through the callback it hands the caller: the worker is told, the call fails, a late cancel does nothing', async () => {
    const { adapter, started, cancelled } = recordingAdapter();
    const gateway = new InferenceGateway(adapter, 10, 60_000);
    let cancel: (() => void) | null = null;
    const done = gateway.submit(call({ cancelWith: (fn: () => void) => (cancel = fn) }));
    expect(cancel).not.toBeNull();
    cancel!();
    await expect(done).rejects.toMatchObject({ kind: 'client_closed' });
    expect(cancelled).toEqual([started[0].requestId]);
    expect(gateway.inFlight()).toBe(0);

    let cancelLater: (() => void) | null = null;
    const finished = gateway.submit(call({ cancelWith: (fn: () => void) => (cancelLater = fn) }));
    gateway.event(started[1].requestId, { type: 'result', data: { ok: true } });
    await expect(finished).resolves.toEqual({ ok: true });
    cancelLater!();
    expect(cancelled).toHaveLength(1); // nothing pending: nothing to cancel
  });

  it('refuses past its per-key depth, and frees the depth when calls settle', async () => {
    const { adapter, started } = recordingAdapter();
    const gateway = new InferenceGateway(adapter, 1, 60_000);
    const first = gateway.submit(call());
    await expect(gateway.submit(call())).rejects.toMatchObject({ kind: 'over_capacity' });
    gateway.event(started[0].requestId, { type: 'result', data: 'r' });
    await first;
    void gateway.submit(call());
    expect(started).toHaveLength(2);
  });

  it('holds an entity\'s requests past its in-flight limit, refuses past its queue limit, and never refuses or holds another entity for it', async () => {
    const { adapter, started, cancelled } = recordingAdapter();
    const gateway = new InferenceGateway(adapter, 100, 60_000, undefined, { inFlight: 2, queued: 1 });
    const bob = [gateway.submit(call({ entity: 'bob' })), gateway.submit(call({ entity: 'bob' })), gateway.submit(call({ entity: 'bob' }))];
    expect(started.map((t) => t.entity)).toEqual(['bob', 'bob']); // the third waits for one of bob's slots
    await expect(gateway.submit(call({ entity: 'bob' }))).rejects.toMatchObject({ kind: 'over_capacity', message: expect.stringMatching(/your entity/) });
    void gateway.submit(call({ entity: 'alice' }));
    expect(started.map((t) => t.entity)).toEqual(['bob', 'bob', 'alice']);
    // One of bob's ends: his held request goes out in its slot.
    gateway.event(started[0].requestId, { type: 'result', data: 'r' });
    await bob[0];
    expect(started.map((t) => t.entity)).toEqual(['bob', 'bob', 'alice', 'bob']);
    // A held request that times out leaves the line without a cancel sent to any worker; those that run stay.
    for (const t of started) gateway.started(t.requestId, 'w1');
    const held = gateway.submit(call({ entity: 'bob' }));
    gateway.reap(() => true, Date.now() + 120_000);
    await expect(held).rejects.toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/behind your entity's own requests/) });
    expect(cancelled).toEqual([]);
    expect(gateway.inFlight()).toBe(3);
    // Its place in the line is free again.
    void gateway.submit(call({ entity: 'bob' }));
    await expect(gateway.submit(call({ entity: 'bob' }))).rejects.toMatchObject({ kind: 'over_capacity' });
    void bob;
  });
});
