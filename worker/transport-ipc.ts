// Embedded mode: the API process forked this worker and talks to it over Node's IPC channel.
// Order is preserved end to end, so training events arrive in the order they were emitted.
import type { ApiToWorker, IpcPiece, WorkerMessage } from '../src/protocol/messages.js';
import type { WorkerHost } from './host.js';

/** A report of a request's result (the message that may be large: a whole answer). */
const isResult = (msg: WorkerMessage): boolean => msg.type === 'inference.event' && msg.event.type === 'result';

/**
 * Messages made in the same tick leave as one IPC message (an array, in order). The engine emits a chunk
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
    if (msg.type === 'inference.event' && msg.event.type !== 'chunk') this.streaming.delete(msg.requestId);
    else if (msg.type === 'inference.event' && !this.streaming.has(msg.requestId)) {
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

/**
 * Largest JSON text one IPC write carries for a result: a larger result report travels in pieces this long.
 * Node's channel writes a message as one JSON string, and V8 caps a string at 2^29 − 24 characters: one answer
 * past that threw `RangeError: Invalid string length` inside the send and took the worker (and every tenant's
 * streams) down (issue #44). Pieces keep each write small; the request caps (inference/request-caps.ts) keep the
 * whole answer far below the limit.
 */
export const IPC_PIECE_CHARS = 4 * 2 ** 20;

/**
 * How one message crosses the channel: itself, or (a result report longer than `pieceChars` as JSON) pieces
 * of its JSON text, or, when it cannot even be serialised, an error that fails its request alone.
 */
export function ipcFrames(msg: WorkerMessage, pieceChars = IPC_PIECE_CHARS): (WorkerMessage | IpcPiece)[] {
  if (msg.type !== 'inference.event' || msg.event.type !== 'result') return [msg]; // chunks and reports are small; measuring them would cost each token
  let text: string;
  try {
    text = JSON.stringify(msg);
  } catch (err) {
    return [answerNotSent(msg.requestId, err)];
  }
  if (text.length <= pieceChars) return [msg];
  const pieces: IpcPiece[] = [];
  for (let at = 0; at < text.length; at += pieceChars)
    pieces.push({ type: 'ipc.piece', requestId: msg.requestId, text: text.slice(at, at + pieceChars), last: at + pieceChars >= text.length });
  return pieces;
}

function answerNotSent(requestId: string, err: unknown): WorkerMessage {
  const message = `the worker could not send this request's answer to the API (${(err as Error).message}); ask for a smaller answer`;
  return { type: 'inference.event', requestId, event: { type: 'error', status: 500, message } };
}

/**
 * Writes one outbox batch: runs of small messages as one array (as before), each piece on its own. A write that
 * throws fails only the requests it carried (a batch is retried message by message first); the worker goes on.
 */
export function writeFrames(batch: WorkerMessage | WorkerMessage[], send: (frame: unknown, cb: () => void) => void, done: () => void): void {
  const msgs = Array.isArray(batch) ? batch : [batch];
  // A step's chunks (the hot path) carry no result to measure: the batch goes as it is.
  const frames = msgs.some(isResult) ? msgs.flatMap((m) => ipcFrames(m)) : msgs;
  const writes: unknown[] = [];
  let run: WorkerMessage[] = [];
  const endRun = () => {
    if (run.length) writes.push(run.length === 1 ? run[0] : run);
    run = [];
  };
  for (const f of frames) {
    if (f.type === 'ipc.piece') (endRun(), writes.push(f));
    else run.push(f);
  }
  endRun();
  let left = writes.length;
  if (left === 0) return done();
  const one = () => {
    if (--left === 0) done();
  };
  const trySend = (frame: unknown, cb: () => void): void => {
    try {
      send(frame, cb);
    } catch (err) {
      if (Array.isArray(frame)) {
        let each = frame.length;
        for (const m of frame) trySend(m, () => --each === 0 && cb());
        return;
      }
      const requestId = (frame as { requestId?: unknown }).requestId;
      const type = (frame as { type?: unknown }).type;
      const failed = type === 'inference.event' && (frame as { event?: { type?: unknown } }).event?.type === 'error';
      if (typeof requestId === 'string' && !failed) return trySend(answerNotSent(requestId, err), cb);
      process.stderr.write(`worker: could not send a ${String(type)} message to the API: ${(err as Error).message}\n`);
      cb();
    }
  };
  for (const w of writes) trySend(w, one);
}

const outbox = new Outbox((msg, done) => {
  if (!process.send || !process.connected) return done();
  writeFrames(msg, (frame, cb) => process.send!(frame, undefined, undefined, cb), done);
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
