// One worker process: runs tasks through its handlers, reports everything as WorkerMessages, beats its heart.
// The transport (IPC for the embedded queue, Redis for BullMQ) decides how messages travel; the host does not care.
import os from 'node:os';
import crypto from 'node:crypto';
import type { InferenceTask, TrainingTask, WorkerMessage } from '../src/protocol/messages.js';
import type { WorkerKind } from '../src/protocol/messages.js';
import { CancelledError, TaskError, type Handlers } from './handlers.js';
import type { InferenceEvent } from '../src/protocol/inference-events.js';
import type { ModelLoads } from './model-loads.js';
import type { Pulse } from './pulse.js';

type TrainingEventType = Extract<WorkerMessage, { type: 'training.event' }>['event']['type'];

export interface WorkerIdentity {
  id: string;
  kind: WorkerKind;
  device: string;
}

export function newWorkerIdentity(kind: WorkerKind, device: string): WorkerIdentity {
  return { id: `${os.hostname()}-${kind}-${device}-${process.pid}-${crypto.randomBytes(3).toString('hex')}`, kind, device };
}

export class WorkerHost {
  private readonly cancelled = new Set<string>();
  private readonly inflight = new Map<string, AbortController>();
  private devices: unknown = undefined;

  constructor(
    readonly identity: WorkerIdentity,
    private readonly handlers: Handlers,
    private readonly report: (msg: WorkerMessage) => void | Promise<void>,
    private readonly log: (msg: string) => void = (m) => process.stderr.write(`${m}\n`),
    /** Model loads the handlers announce: each start and end goes out as a heartbeat at once (worker/model-loads.ts). */
    private readonly loads?: ModelLoads,
    /** The thread that repeats this host's heartbeats while its main thread is blocked in a stretch (worker/pulse.ts). */
    private readonly pulse?: Pulse | null,
  ) {
    loads?.onChange(() => {
      pulse?.setLoads(loads.current().length);
      return this.report(this.heartbeat());
    });
  }

  setDevices(devices: unknown): void {
    this.devices = devices;
  }

  get load(): number {
    return this.inflight.size;
  }

  /** This host's heartbeat now; with a pulse thread, also the one it repeats while the main thread is blocked. */
  heartbeat(): WorkerMessage {
    const message = {
      type: 'heartbeat' as const,
      worker: {
        id: this.identity.id, kind: this.identity.kind, device: this.identity.device, host: os.hostname(), pid: process.pid,
        load: this.load, lastSeenMs: Date.now(), devices: this.devices, tasks: [...this.inflight.keys()], stats: this.handlers.stats?.(),
        ...(this.loads?.current().length ? { loading: this.loads.current() } : {}),
        ...(this.pulse?.running ? { pulse: true } : {}),
      },
    };
    this.pulse?.beat(message);
    return message;
  }

  cancel(id: string): void {
    this.cancelled.add(id);
    this.inflight.get(id)?.abort();
  }

  /**
   * Run a training task to its end. Always reports exactly one terminal event, unless the process dies,
   * in which case the API notices the missing heartbeat or the exit and fails the job itself.
   */
  async runTraining(task: TrainingTask): Promise<'succeeded' | 'failed' | 'cancelled'> {
    const send = (msg: WorkerMessage) => this.report(msg);
    const ctrl = new AbortController();
    this.inflight.set(task.jobId, ctrl);
    // A training job is one long stretch of compute: the pulse thread beats for it, from a heartbeat listing it, and
    // hears its cancel while the compute blocks this thread.
    const jobEnded = this.pulse?.job(task.jobId);
    this.heartbeat();
    await send({ type: 'training.started', jobId: task.jobId, workerId: this.identity.id });
    let seq = 0; // of this job's training.event reports (messages.ts)
    const event = (type: TrainingEventType, data: Record<string, unknown>): WorkerMessage => ({ type: 'training.event', jobId: task.jobId, event: { type, data }, seq: seq++ });
    try {
      if (!this.handlers.training) throw new TaskError(501, 'this worker has no training engine');
      await this.handlers.training(task, {
        emit: (type, data) => void send(event(type, data)),
        checkpoint: (path) => void send({ type: 'training.checkpoint', jobId: task.jobId, step: task.step, path }),
        cancelled: () => this.cancelled.has(task.jobId),
        log: (m) => this.log(`[job ${task.jobId}] ${m}`),
      });
      if (this.cancelled.has(task.jobId)) throw new CancelledError();
      await send(event('training_ended', {}));
      return 'succeeded';
    } catch (err) {
      const cancelled = err instanceof CancelledError || this.cancelled.has(task.jobId);
      const message = cancelled ? 'cancelled by the user' : (err as Error).message || String(err);
      if (!cancelled) this.log(`[job ${task.jobId}] failed: ${(err as Error).stack ?? message}`);
      await send(event('training_failed', { error_message: message, ...(cancelled ? { cancelled: true } : {}) }));
      return cancelled ? 'cancelled' : 'failed';
    } finally {
      this.inflight.delete(task.jobId);
      this.cancelled.delete(task.jobId);
      jobEnded?.();
    }
  }

  /**
   * Run one inference request: each event the handler emits (src/protocol/inference-events.ts) goes to the API as
   * it is, in an `inference.event` report; the first result or error ends the request.
   */
  async runInference(task: InferenceTask): Promise<void> {
    const ctrl = new AbortController();
    const t0 = performance.now();
    this.inflight.set(task.requestId, ctrl);
    if (this.cancelled.has(task.requestId)) ctrl.abort();
    // Not awaited: the request starts at once (a transport keeps its messages in order, so `started`
    // still arrives before the first chunk); a report that fails is the transport's to log.
    void Promise.resolve(this.report({ type: 'inference.started', requestId: task.requestId, workerId: this.identity.id })).catch((err: Error) =>
      this.log(`[request ${task.requestId}] could not report its start: ${err.message}`),
    );
    // A stream's first chunk, or else the result, says how long the worker took to it (tokenizing, waiting in
    // the engine, prefill, sampling): the API passes it on as the response's Server-Timing.
    let timed = false;
    let terminal: Promise<void> | null = null;
    const emit = (event: InferenceEvent): void => {
      if (terminal) return; // one result or error per request
      const timing = timed || event.type === 'error' ? {} : { workerMs: performance.now() - t0 };
      if (event.type !== 'error') timed = true;
      if (event.type === 'error' && event.status >= 500) this.log(`[request ${task.requestId}] ${event.status}: ${event.message}`);
      const sent = this.report({ type: 'inference.event', requestId: task.requestId, event, ...timing });
      if (event.type !== 'chunk') terminal = Promise.resolve(sent);
    };
    try {
      if (task.op === 'ping') emit({ type: 'result', data: { pong: true, worker: this.identity.id } });
      else if (!this.handlers.inference) throw new TaskError(501, 'this worker has no inference engine');
      else await this.handlers.inference(task, { emit, signal: ctrl.signal });
      if (!terminal) throw new Error('the inference handler returned without a result or an error');
      await terminal;
    } catch (err) {
      const status = err instanceof TaskError ? err.status : ctrl.signal.aborted ? 499 : 500;
      const message = err instanceof TaskError || ctrl.signal.aborted ? (err as Error).message : 'inference failed in the worker';
      if (status >= 500) this.log(`[request ${task.requestId}] ${(err as Error).stack ?? String(err)}`);
      const where = err instanceof TaskError ? err.where : {};
      await this.report({ type: 'inference.event', requestId: task.requestId, event: { type: 'error', status, message, ...where } });
    } finally {
      this.inflight.delete(task.requestId);
      this.cancelled.delete(task.requestId);
    }
  }
}
