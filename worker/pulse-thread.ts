// The pulse thread's body (pulse.ts says why it exists and when it sends). It shares no objects with the main
// thread: it reads three shared counters, holds the last heartbeat and lock list the main thread posted, and has
// its own way out (a pipe to the embedded queue, or its own Redis connection).
import fs from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { pulseDue, type PulseCommand, type PulseThreadData, type PulseTransport } from './pulse.js';
import type { WorkerMessage } from '../src/protocol/messages.js';
import type { Redis } from 'ioredis';

type Heartbeat = Extract<WorkerMessage, { type: 'heartbeat' }>;
type Send = (message: Heartbeat, locks: { jobId: string; token: string }[]) => Promise<void>;

/** Embedded queue: one JSON line on the pipe the API opened for it (src/queue/embedded.ts). This thread is its only writer. */
function pipeSender(fd: number): Send {
  let broken = false;
  return async (message) => {
    if (broken) return;
    try {
      fs.writeSync(fd, `${JSON.stringify(message)}\n`);
    } catch (err) {
      // EAGAIN: the API is behind on the pipe, this pulse is skipped; anything else: the API is gone.
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') broken = true;
    }
  };
}

/** Redis: the heartbeat into the reports stream, and the job locks extended for the normal lock duration. */
async function redisSender(t: Extract<PulseTransport, { kind: 'redis' }>): Promise<Send> {
  const { Queue } = await import('bullmq');
  const { reportsStream, REPORTS_MAXLEN } = await import('../src/protocol/redis-keys.js');
  // Commands fail at once while disconnected and after 2 s unanswered (a partition that sends no reset): a pulse
  // that cannot leave is dropped, never queued to arrive late.
  const queue = new Queue(t.queue, { prefix: t.prefix, connection: { url: t.url, enableOfflineQueue: false, commandTimeout: 2000, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => 1000 } });
  queue.on('error', () => {}); // reconnects by itself; the main thread's liveness monitor logs outages
  const stream = reportsStream(t.prefix);
  return async (message, locks) => {
    try {
      const client = (await queue.backend.client) as unknown as Redis; // BullMQ's type is narrower than the ioredis it is
      await client.xadd(stream, 'MAXLEN', '~', String(REPORTS_MAXLEN), '*', 'm', JSON.stringify(message));
      if (locks.length) await queue.backend.extendLocks(locks.map((l) => l.jobId), locks.map((l) => l.token), t.lockMs);
    } catch (err) {
      // A command left unanswered on a connection that did not fail: start a fresh one for the next pulse.
      if (/timed out/i.test((err as Error).message)) (await queue.backend.client).disconnect(true);
    }
  };
}

async function main(): Promise<void> {
  const data = workerData as PulseThreadData;
  const progress = new Int32Array(data.progress);
  const stretches = new Int32Array(data.stretches);
  const mainBeat = new BigInt64Array(data.mainBeat);
  let heartbeat: Heartbeat | null = null;
  let locks: { jobId: string; token: string }[] = [];
  parentPort!.on('message', (cmd: PulseCommand) => {
    if (cmd.type === 'heartbeat') heartbeat = cmd.message;
    else locks = cmd.locks;
  });
  const send = data.transport.kind === 'ipc' ? pipeSender(data.transport.fd) : await redisSender(data.transport);

  let seenTicks = Atomics.load(progress, 0);
  let movedAtMs = Date.now();
  let sending = false;
  setInterval(() => {
    const now = Date.now();
    const ticks = Atomics.load(progress, 0);
    if (ticks !== seenTicks) {
      seenTicks = ticks;
      movedAtMs = now;
    }
    const due = pulseDue({
      stretches: Atomics.load(stretches, 0), sinceMainBeatMs: now - Number(Atomics.load(mainBeat, 0)),
      sinceProgressMs: now - movedAtMs, everyMs: data.everyMs, stallMs: data.stallMs,
    });
    if (!due || !heartbeat || sending) return;
    sending = true;
    void send({ ...heartbeat, worker: { ...heartbeat.worker, lastSeenMs: now } }, locks).finally(() => (sending = false));
  }, data.everyMs);
}

void main();
