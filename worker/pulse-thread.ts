// The pulse thread's body (pulse.ts says why it exists, when it sends and which cancels it hears). It shares no
// objects with the main thread: it reads three shared counters and writes one cell, holds the last heartbeat, lock
// list and jobs the main thread posted, and has its own way out and in (a socket pair with the embedded queue, or
// its own Redis connections).
import net from 'node:net';
import { createInterface } from 'node:readline';
import { parentPort, workerData } from 'node:worker_threads';
import { pulseDue, type PulseCommand, type PulseThreadData, type PulseTransport } from './pulse.js';
import type { WorkerMessage } from '../src/protocol/messages.js';
import { cancelComputeIn } from '../src/runtime/compute-cancel.js';
import type { Redis } from 'ioredis';

type Heartbeat = Extract<WorkerMessage, { type: 'heartbeat' }>;
type Send = (message: Heartbeat, locks: { jobId: string; token: string }[]) => Promise<void>;
/** Called with each training job the API asks to cancel. */
type Hear = (jobId: string) => void;

/** A cancel the API sent (src/queue/embedded.ts, src/queue/bullmq.ts), or null. */
function cancelledJob(raw: string): string | null {
  try {
    const msg = JSON.parse(raw) as { type?: unknown; jobId?: unknown };
    return msg.type === 'training.cancel' && typeof msg.jobId === 'string' ? msg.jobId : null;
  } catch {
    return null;
  }
}

/**
 * Embedded queue: JSON lines both ways on the socket the API opened as this process's `fd` (src/queue/embedded.ts):
 * heartbeats out, cancels in. This thread is its only user.
 */
function socketChannel(fd: number, hear: Hear): Send {
  const socket = new net.Socket({ fd, readable: true, writable: true });
  let broken = false;
  socket.on('error', () => (broken = true)); // the API is gone; the process is about to be told, or killed
  createInterface({ input: socket }).on('line', (line) => {
    const jobId = cancelledJob(line);
    if (jobId) hear(jobId);
  });
  return async (message) => {
    // Something still unwritten: the API is behind on the socket, and this pulse is skipped rather than queued.
    if (broken || socket.writableLength > 0) return;
    socket.write(`${JSON.stringify(message)}\n`);
  };
}

/**
 * Redis: the heartbeat into the reports stream and the job locks extended for the normal lock duration; cancels from
 * the control channel, on a subscriber connection of this thread's own.
 */
async function redisChannel(t: Extract<PulseTransport, { kind: 'redis' }>, hear: Hear): Promise<Send> {
  const { Queue } = await import('bullmq');
  const { Redis } = await import('ioredis');
  const { reportsStream, controlChannel, REPORTS_MAXLEN } = await import('../src/protocol/redis-keys.js');
  // Commands fail at once while disconnected and after 2 s unanswered (a partition that sends no reset): a pulse
  // that cannot leave is dropped, never queued to arrive late.
  const queue = new Queue(t.queue, { prefix: t.prefix, connection: { url: t.url, enableOfflineQueue: false, commandTimeout: 2000, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => 1000 } });
  queue.on('error', () => {}); // reconnects by itself; the main thread's liveness monitor logs outages
  // Resubscribes by itself after a reconnect; a cancel published meanwhile still reaches the main thread's own
  // subscriber, or the main thread at the job's next micro-batch.
  const sub = new Redis(t.url, { maxRetriesPerRequest: null, connectTimeout: 2000, retryStrategy: () => 1000 });
  sub.on('error', () => {});
  sub.on('message', (_channel: string, raw: string) => {
    const jobId = cancelledJob(raw);
    if (jobId) hear(jobId);
  });
  void sub.subscribe(controlChannel(t.prefix)).catch(() => {});
  // A subscriber only listens, so a partition that sends no reset would leave it deaf until the kernel's keepalive
  // gives up (minutes), and the main thread's watched connections are not this thread's to drop. While pulses are
  // due (the main thread blocked: only this thread can hear a cancel), each one PINGs the subscriber too; no answer
  // within 2 s: a fresh connection, which subscribes again.
  let pinging = false;
  const checkSubscriber = () => {
    if (pinging || sub.status !== 'ready') return;
    pinging = true;
    const deaf = setTimeout(() => sub.disconnect(true), 2000);
    void sub.ping().catch(() => {}).finally(() => {
      clearTimeout(deaf);
      pinging = false;
    });
  };
  const stream = reportsStream(t.prefix);
  return async (message, locks) => {
    checkSubscriber();
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
  const jobs = new Map<string, number>(); // training jobs under way → their cancel tokens
  parentPort!.on('message', (cmd: PulseCommand) => {
    if (cmd.type === 'heartbeat') heartbeat = cmd.message;
    else if (cmd.type === 'locks') locks = cmd.locks;
    else if (cmd.type === 'job') jobs.set(cmd.jobId, cmd.token);
    else jobs.delete(cmd.jobId);
  });
  const hear: Hear = (jobId) => {
    const token = jobs.get(jobId);
    if (token !== undefined) cancelComputeIn(data.cancel, token);
  };
  const send = data.transport.kind === 'ipc' ? socketChannel(data.transport.fd, hear) : await redisChannel(data.transport, hear);

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
