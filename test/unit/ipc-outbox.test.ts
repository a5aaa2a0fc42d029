// The worker's IPC outbox (worker/transport-ipc.ts): one channel write per tick, except a request's first delta.
import { describe, expect, it } from 'vitest';
import { Outbox } from '../../worker/transport-ipc.js';
import type { WorkerMessage } from '../../src/protocol/messages.js';

const delta = (requestId: string, text: string): WorkerMessage => ({ type: 'inference.event', requestId, event: { type: 'chunk', data: { text } } });
const done = (requestId: string): WorkerMessage => ({ type: 'inference.event', requestId, event: { type: 'result', data: null } });
const beat = { type: 'training.started', jobId: 'j', workerId: 'w' } as WorkerMessage;

function recorder() {
  const writes: (WorkerMessage | WorkerMessage[])[] = [];
  const outbox = new Outbox((msg, sent) => {
    writes.push(msg);
    sent();
  });
  return { writes, outbox };
}

const tick = () => new Promise<void>((r) => setTimeout(r, 0));

describe('worker IPC outbox', () => {
  it('sends the messages of one tick as one write, in order', async () => {
    const { writes, outbox } = recorder();
    void outbox.send(beat);
    void outbox.send({ type: 'training.checkpoint', jobId: 'j', step: 1, path: '/p' });
    expect(writes).toHaveLength(0); // nothing leaves before the tick ends
    await tick();
    expect(writes).toEqual([[beat, { type: 'training.checkpoint', jobId: 'j', step: 1, path: '/p' }]]);
  });

  it("sends a request's first delta at once, with what was queued before it; its later deltas wait for the tick", async () => {
    const { writes, outbox } = recorder();
    // Step 1: request a streams, b gets its first token.
    await outbox.send(delta('a', 'x')); // a's first delta: at once
    expect(writes).toEqual([delta('a', 'x')]);
    void outbox.send(delta('a', 'y'));
    void outbox.send(delta('b', '1'));
    expect(writes).toEqual([delta('a', 'x'), [delta('a', 'y'), delta('b', '1')]]);
    void outbox.send(delta('a', 'z'));
    void outbox.send(delta('b', '2'));
    expect(writes).toHaveLength(2);
    await tick();
    expect(writes).toEqual([delta('a', 'x'), [delta('a', 'y'), delta('b', '1')], [delta('a', 'z'), delta('b', '2')]]);
  });

  it('treats a request id as new again once its request ended', async () => {
    const { writes, outbox } = recorder();
    await outbox.send(delta('a', 'x'));
    void outbox.send(done('a'));
    await tick();
    void outbox.send(delta('a', 'again'));
    expect(writes).toEqual([delta('a', 'x'), done('a'), delta('a', 'again')]);
  });

  it('resolves each send once its write is handed to the channel', async () => {
    const pending: (() => void)[] = [];
    const outbox = new Outbox((_msg, sent) => pending.push(sent));
    let resolved = 0;
    void outbox.send(beat).then(() => resolved++);
    void outbox.send(beat).then(() => resolved++);
    await tick();
    expect(resolved).toBe(0);
    pending.forEach((p) => p());
    await tick();
    expect(resolved).toBe(2);
  });
});
