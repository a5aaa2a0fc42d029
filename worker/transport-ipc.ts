// Embedded mode: the API process forked this worker and talks to it over Node's IPC channel.
// Order is preserved end to end, so training events arrive in the order they were emitted.
import type { ApiToWorker, WorkerMessage } from '../src/protocol/messages.js';
import type { WorkerHost } from './host.js';

/**
 * Messages made in the same tick leave as one IPC message (an array, in order). The engine emits a delta
 * for every running stream after each model step; one channel write per step instead of one per stream
 * is what keeps the pipe's cost flat as the batch grows (each write is a syscall and a wake-up of the API).
 * A request's first delta leaves at once, with whatever is queued before it: its first token is what the
 * client is waiting on, and the rest of the step (the other rows' tokens, a finished request's last chunks)
 * would hold it back (measured on ~20M, 4-word prompts: 0.1–0.13 ms of its time to first token).
 */
export class Outbox {
  /** The messages waiting for this tick's write, and one promise for all of them (a step sends one per stream). */
  private box: { msgs: WorkerMessage[]; sent: Promise<void>; resolve: () => void } | null = null;
  /** Requests that have sent a delta (their later deltas ride with the step's batch). */
  private readonly streaming = new Set<string>();

  constructor(private readonly write: (msg: WorkerMessage | WorkerMessage[], done: () => void) => void) {}

  send(msg: WorkerMessage): Promise<void> {
    let box = this.box;
    if (!box) {
      let resolve!: () => void;
      const sent = new Promise<void>((r) => (resolve = r));
      box = this.box = { msgs: [], sent, resolve };
      queueMicrotask(() => this.flush());
    }
    box.msgs.push(msg);
    if (msg.type === 'inference.done' || msg.type === 'inference.error') this.streaming.delete(msg.requestId);
    if (msg.type === 'inference.delta' && !this.streaming.has(msg.requestId)) {
      this.streaming.add(msg.requestId);
      this.flush();
    }
    return box.sent;
  }

  private flush(): void {
    const box = this.box;
    if (!box) return; // already sent (a first delta flushed it)
    this.box = null;
    this.write(box.msgs.length === 1 ? box.msgs[0] : box.msgs, box.resolve);
  }
}

const outbox = new Outbox((msg, done) => {
  if (!process.send || !process.connected) return done();
  process.send(msg, undefined, undefined, done);
});

/** Send one message to the parent; resolves once handed to the channel (or at once when it is gone). */
export function ipcSend(msg: WorkerMessage): Promise<void> {
  // The parent marked the request started when it handed it over (src/queue/embedded.ts).
  if (msg.type === 'inference.started') return Promise.resolve();
  return outbox.send(msg);
}

export function serveOverIpc(host: WorkerHost, heartbeatMs: number, onShutdown: () => Promise<void>): void {
  if (!process.send) throw new Error('--ipc needs a parent process with an IPC channel (the embedded queue starts workers this way)');
  const beat = () => void ipcSend(host.heartbeat());
  beat();
  const timer = setInterval(beat, heartbeatMs);
  const stop = () => {
    clearInterval(timer);
    void onShutdown();
  };
  process.on('message', (raw: ApiToWorker) => {
    switch (raw.type) {
      case 'training.run':
        void host.runTraining(raw.task);
        break;
      case 'inference.run':
        void host.runInference(raw.task);
        break;
      case 'training.cancel':
        host.cancel(raw.jobId);
        break;
      case 'inference.cancel':
        host.cancel(raw.requestId);
        break;
      case 'shutdown':
        stop();
        break;
    }
  });
  // The parent is gone (crash or kill -9): nothing would collect our results, so stop. It may have gone while
  // this worker was still loading (before this listener existed): then the event is past, so check now too.
  process.on('disconnect', stop);
  if (!process.connected) stop();
}
