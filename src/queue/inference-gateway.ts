// Inference requests in flight from this API process: hand them to the queue, route each event of the answer
// (src/protocol/inference-events.ts) back to the HTTP request that waits for it, as the worker's adapter made it,
// and fail them cleanly when their worker goes away.
import crypto from 'node:crypto';
import type { QueueAdapter } from './port.js';
import type { InferenceTask } from '../protocol/messages.js';
import { InferenceFailure, type InferenceEvent } from '../protocol/inference-events.js';
import { DomainError, overCapacity, unavailable } from '../errors/domain-errors.js';
import { EntityAdmission, type EntityLimits } from './entity-admission.js';

/**
 * A request for the gateway: what the route's exchange gives, and how it takes the answer's events. A chunk goes to
 * `onChunk`; the result settles `submit`'s promise, an error event rejects it as an InferenceFailure carrying the
 * event (its status and OpenAI fields as the worker gave them). Callbacks are called as methods (`call.onChunk(…)`),
 * so a class can implement them.
 */
export interface InferenceCall {
  op: InferenceTask['op'];
  body: unknown;
  model: InferenceTask['model'];
  stream: boolean;
  /** Back-pressure bucket, usually the model name. */
  queueKey: string;
  /**
   * The tenant (the API key's entity): its requests meet the per-entity limits (entity-admission.ts) and the worker
   * shares its batch fairly by it, and partitions its prefix cache by it. Absent for the server's own work
   * (calibration), which only meets the per-key cap.
   */
  entity?: string;
  /** A chunk event's data (a chat.completion.chunk or text_completion chunk), as the worker's adapter made it. */
  onChunk?: (data: unknown) => void;
  /** The worker's time to the first chunk (streams) or to the result, in ms, just before either is passed on. */
  onWorkerTime?: (ms: number) => void;
  /**
   * Called at once with the function that cancels this call (the route calls it when its client goes away). A
   * callback rather than an AbortSignal: an AbortController and its listener cost ~0.05 ms of a request's time to
   * first token when requests come between model steps (cold caches, 2 cores), and the route needs no more.
   */
  cancelWith?: (cancel: () => void) => void;
}

interface Pending {
  call: InferenceCall;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  workerId: string | null;
  submittedMs: number;
  /** Handed to the adapter (false while it waits for one of its entity's in-flight slots). */
  dispatched: boolean;
}

export class InferenceGateway {
  private readonly pending = new Map<string, Pending>();
  private readonly depth = new Map<string, number>();
  /**
   * Request ids are this gateway's random prefix and a count: unique across API processes sharing a Redis queue,
   * and cheaper than a UUID per request (~0.01 ms cold).
   */
  private readonly idPrefix = `${crypto.randomBytes(6).toString('hex')}-`;
  private submitted = 0;
  private readonly admission: EntityAdmission<string>;

  constructor(
    private readonly adapter: QueueAdapter,
    private readonly maxPerKey: number,
    private readonly queueTimeoutMs: number,
    /** The API host's HEARTH_HOME, sent with each task: a worker host maps the model's paths onto its own home. */
    private readonly home?: { home: string; homeId: string },
    /** HEARTH_INFERENCE_INFLIGHT_PER_ENTITY / _QUEUE_PER_ENTITY (the config's defaults); none when not given. */
    entityLimits: EntityLimits = { inFlight: Infinity, queued: Infinity },
  ) {
    this.admission = new EntityAdmission(entityLimits);
  }

  inFlight(): number {
    return this.pending.size;
  }

  submit(call: InferenceCall): Promise<unknown> {
    const d = this.depth.get(call.queueKey) ?? 0;
    if (d >= this.maxPerKey) {
      return Promise.reject(overCapacity(`Too many requests queued for ${call.queueKey} (${d}); retry later`, { retryAfterSec: 1 }));
    }
    if (this.adapter.reachable?.() === false) {
      return Promise.reject(unavailable('the queue (Redis) is unreachable; retry shortly', { retryAfterSec: 2 }));
    }
    const requestId = this.idPrefix + (++this.submitted).toString(36);
    const admitted = call.entity === undefined ? ({ kind: 'run' } as const) : this.admission.offer(call.entity, requestId);
    if (admitted.kind === 'full') {
      return Promise.reject(overCapacity(`Too many requests from your entity: ${admitted.reason}; retry later`, { retryAfterSec: 1 }));
    }
    const done = new Promise<unknown>((resolve, reject) => {
      this.pending.set(requestId, { call, resolve, reject, workerId: null, submittedMs: Date.now(), dispatched: false });
    });
    this.depth.set(call.queueKey, d + 1);
    // After the call has settled, cancelling finds nothing pending and does nothing.
    call.cancelWith?.(() => this.cancel(requestId, new DomainError('client_closed', 'client closed the request')));
    if (admitted.kind === 'run') this.dispatch(requestId);
    return done;
  }

  /** Hand a pending request to the transport. */
  private dispatch(requestId: string): void {
    const p = this.pending.get(requestId);
    if (!p) return;
    p.dispatched = true;
    const { call } = p;
    const task: InferenceTask = {
      requestId, op: call.op, body: call.body, model: call.model, stream: call.stream, ...(call.entity !== undefined ? { entity: call.entity } : {}), ...this.home,
    };
    this.adapter.startInference(task).catch((err: Error) => this.settle(requestId, unavailable(`queue unavailable: ${err.message}; retry shortly`, { retryAfterSec: 2 })));
  }

  started(requestId: string, workerId: string): void {
    const p = this.pending.get(requestId);
    if (p) p.workerId = workerId;
  }

  /** One event of a request's answer, as the worker reported it (queue-service.ts passes `inference.event` here). */
  event(requestId: string, event: InferenceEvent, workerMs?: number): void {
    const p = this.pending.get(requestId);
    if (!p) return; // settled already (cancelled, failed with its worker, or a second terminal event)
    if (workerMs !== undefined) p.call.onWorkerTime?.(workerMs);
    if (event.type === 'chunk') p.call.onChunk?.(event.data);
    else if (event.type === 'result') this.settle(requestId, null, event.data);
    else this.settle(requestId, new InferenceFailure(event));
  }

  /** Fail what a dead worker held, and what no worker picked up in time. */
  reap(isLive: (workerId: string) => boolean, now = Date.now()): void {
    for (const [id, p] of this.pending) {
      if (p.workerId && !isLive(p.workerId)) this.settle(id, unavailable('the inference worker stopped while serving this request; retry'));
      else if (!p.workerId && now - p.submittedMs > this.queueTimeoutMs) {
        const s = Math.round(this.queueTimeoutMs / 1000);
        this.cancel(id, unavailable(p.dispatched ? `no inference worker picked up the request within ${s} s` : `the request waited ${s} s behind your entity's own requests in flight (HEARTH_INFERENCE_INFLIGHT_PER_ENTITY)`));
      }
    }
  }

  workerGone(workerId: string, message = 'the inference worker stopped while serving this request; retry'): void {
    for (const [id, p] of this.pending) if (p.workerId === workerId) this.settle(id, unavailable(message));
  }

  private cancel(requestId: string, err: Error): void {
    const p = this.pending.get(requestId);
    if (!p) return;
    if (p.dispatched) void this.adapter.cancelInference(requestId).catch(() => {});
    this.settle(requestId, err);
  }

  private settle(requestId: string, err: Error | null, result?: unknown): void {
    const p = this.pending.get(requestId);
    if (!p) return;
    this.pending.delete(requestId);
    const d = (this.depth.get(p.call.queueKey) ?? 1) - 1;
    if (d <= 0) this.depth.delete(p.call.queueKey);
    else this.depth.set(p.call.queueKey, d);
    const entity = p.call.entity;
    if (entity !== undefined) {
      // A request that ran frees its entity's slot for that entity's next waiting one; one that waited leaves the line.
      if (!p.dispatched) this.admission.withdraw(entity, requestId);
      else {
        const next = this.admission.finished(entity);
        if (next !== null) this.dispatch(next);
      }
    }
    if (err) p.reject(err);
    else p.resolve(result);
  }
}
