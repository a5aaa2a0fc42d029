// BullMQ adapter: queues `training` and `inference` in Redis, workers anywhere (`hearth worker --redis …`).
// Workers report through one Redis stream read by a consumer group, so reports are ordered and survive an
// API restart (unacknowledged entries are read again). Cancellation travels on a pub/sub channel.
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { acquireLiveness, releaseLiveness, watchedRedis, type RedisLiveness } from '../protocol/redis-liveness.js';
import type { QueueAdapter, QueueHealth } from './port.js';
import { WorkerMessage, type InferenceTask, type TrainingTask } from '../protocol/messages.js';
import { withDeadline } from '../domain/deadline.js';
import { controlChannel, REPORTS_CONSUMER, REPORTS_GROUP, reportsStream, workerConnectionName } from '../protocol/redis-keys.js';

export interface BullmqOptions {
  redisUrl: string;
  prefix: string;
  log?: (msg: string) => void;
}

/** Longest start() waits for the reports that arrived while no API ran to be applied. */
const BACKLOG_WAIT_MS = 30_000;

/** Longest an inference request waits for Redis to take it before it fails with 503 (Redis unreachable). */
const HANDOVER_TIMEOUT_MS = 3000;

type StreamReply = [string, [string, string[]][]][] | null;

export class BullmqQueue implements QueueAdapter {
  readonly name = 'bullmq' as const;
  readonly durable = true;
  private readonly training: Queue;
  private readonly inference: Queue;
  private readonly redis: Redis;
  private readonly reader: Redis;
  private running = false;
  private loop: Promise<void> | null = null;
  private readonly log: (msg: string) => void;
  private readonly liveness: RedisLiveness | null;
  /**
   * One name for every API process of the installation: the reports a killed API process had been handed but had not
   * acknowledged stay pending under this name, and the next process reads them first (a name per process left them
   * pending forever: a gradient step lost at each such kill). Reports it had applied already are dropped then by
   * their seq (TrainingJobsService.recordEvent), so none is stored twice.
   */
  private readonly consumer = REPORTS_CONSUMER;

  constructor(private readonly opts: BullmqOptions) {
    this.log = opts.log ?? ((m) => process.stderr.write(`${m}\n`));
    // Every connection to Redis (these two and the queues') is watched: dropped and reconnected within seconds when
    // Redis stops answering, with one line when it is declared lost and one when it is back
    // (src/protocol/redis-liveness.ts). Created first, so BullMQ's own connections are tracked too.
    this.liveness = acquireLiveness(opts.redisUrl, this.log);
    const connection = { url: opts.redisUrl, maxRetriesPerRequest: null };
    this.training = new Queue('training', { connection, prefix: opts.prefix });
    this.inference = new Queue('inference', { connection, prefix: opts.prefix });
    this.redis = watchedRedis(opts.redisUrl, this.liveness, { maxRetriesPerRequest: null });
    this.reader = watchedRedis(opts.redisUrl, this.liveness, { maxRetriesPerRequest: null });
    // ioredis reconnects by itself; without a listener each failed attempt prints a stack ("Unhandled error event").
    for (const emitter of [this.redis, this.reader, this.training, this.inference]) emitter.on('error', () => {});
  }

  async start(sink: (msg: WorkerMessage) => void): Promise<void> {
    const stream = reportsStream(this.opts.prefix);
    await this.createGroup(stream, '$');
    await this.adoptPending(stream).catch((err: Error) => this.log(`bullmq: could not take over earlier API processes' unacknowledged reports: ${err.message}`));
    this.running = true;
    let caughtUp!: () => void;
    const backlogRead = new Promise<void>((resolve) => (caughtUp = resolve));
    this.loop = this.readLoop(stream, sink, caughtUp);
    // The reports workers sent while no API ran (jobs started, steps, checkpoints, ends) are applied before this
    // resolves. Bounded: a Redis that does not answer must not keep the API from starting.
    const read = await withDeadline(backlogRead.then(() => true), BACKLOG_WAIT_MS, () => false);
    if (!read) this.log(`bullmq: the worker reports sent while the API was down were not all read within ${BACKLOG_WAIT_MS / 1000} s; going on, they are applied as they come`);
  }

  private async createGroup(stream: string, from: '$' | '0'): Promise<void> {
    try {
      await this.redis.xgroup('CREATE', stream, REPORTS_GROUP, from, 'MKSTREAM');
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
    }
  }

  /** Take over reports still pending under other consumer names (API processes of earlier versions, one per pid). */
  private async adoptPending(stream: string): Promise<void> {
    type Consumer = [string, string, string, number, ...unknown[]];
    const consumers = ((await this.redis.call('XINFO', 'CONSUMERS', stream, REPORTS_GROUP)) as Consumer[]).map((c) => ({ name: String(c[1]), pending: Number(c[3]) }));
    for (const c of consumers.filter((x) => x.name !== this.consumer)) {
      if (c.pending > 0) {
        // XCLAIM by id, in pages; bounded: a consumer's pending list is at most the stream's length.
        for (let page = 0; page < 1000; page++) {
          const entries = (await this.redis.xpending(stream, REPORTS_GROUP, '-', '+', 1000, c.name)) as [string, ...unknown[]][];
          if (!entries.length) break;
          await this.redis.xclaim(stream, REPORTS_GROUP, this.consumer, 0, ...entries.map((e) => e[0]), 'JUSTID');
        }
        this.log(`bullmq: took over ${c.pending} unacknowledged worker reports of ${c.name} (an API process that stopped)`);
      }
      await this.redis.xgroup('DELCONSUMER', stream, REPORTS_GROUP, c.name);
    }
  }

  private async readLoop(stream: string, sink: (msg: WorkerMessage) => void, caughtUp: () => void): Promise<void> {
    // First whatever an earlier API process received but never acknowledged, then the entries that arrived while no
    // API ran (without blocking: an empty answer means caught up), then new entries as they come.
    let cursor = '0';
    let backlog = true;
    while (this.running) {
      let reply: StreamReply;
      try {
        const block = backlog ? [] : ['BLOCK', 1000];
        reply = (await this.reader.xreadgroup('GROUP', REPORTS_GROUP, this.consumer, 'COUNT', 1000, ...(block as ['BLOCK', number]), 'STREAMS', stream, cursor)) as StreamReply;
      } catch (err) {
        if (!this.running) return;
        const message = (err as Error).message;
        this.log(`bullmq: reading worker reports failed (${message}); retrying`);
        // Redis restarted without its data: the group is gone. Recreate it from the stream's start, so the
        // reports workers sent since the restart are read too.
        if (message.includes('NOGROUP')) await this.createGroup(stream, '0').catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      const entries = reply?.[0]?.[1] ?? [];
      if (cursor === '0' && entries.length === 0) {
        cursor = '>';
        continue;
      }
      if (backlog && entries.length === 0) {
        backlog = false;
        caughtUp();
        continue;
      }
      const ids: string[] = [];
      for (const [id, fields] of entries) {
        ids.push(id);
        const raw = fields[fields.indexOf('m') + 1];
        try {
          const parsed = WorkerMessage.safeParse(JSON.parse(raw));
          if (parsed.success) sink(parsed.data);
          else this.log(`bullmq: ignoring a malformed report ${id}`);
        } catch (err) {
          this.log(`bullmq: a report failed to apply (${(err as Error).message})`);
        }
      }
      if (ids.length) await this.redis.xack(stream, REPORTS_GROUP, ...ids);
    }
  }

  reachable(): boolean {
    return this.redis.status === 'ready';
  }

  canStartTraining(): boolean {
    return true;
  }

  async startTraining(task: TrainingTask): Promise<void> {
    // jobId = training job id: adding it again after an API restart is a no-op. Finished jobs stay an hour,
    // so a resubmission that races a job's last reports finds it and adds nothing.
    await this.training.add('train', task, { jobId: task.jobId, removeOnComplete: { age: 3600 }, removeOnFail: 1000, attempts: 1 });
  }

  async resubmitTraining(task: TrainingTask): Promise<boolean> {
    if (await this.training.getJob(task.jobId)) return false;
    this.log(`bullmq: training job ${task.jobId} is no longer in Redis (restarted without its data?); queueing it again`);
    await this.startTraining(task);
    return true;
  }

  async cancelTraining(jobId: string): Promise<void> {
    const removed = await this.training.remove(jobId).catch(() => 0); // still waiting: take it off the queue
    if (!removed) await this.redis.publish(controlChannel(this.opts.prefix), JSON.stringify({ type: 'training.cancel', jobId }));
  }

  async startInference(task: InferenceTask): Promise<void> {
    const added = this.inference.add('infer', task, { jobId: task.requestId, removeOnComplete: true, removeOnFail: true, attempts: 1 });
    // Redis gone between the gateway's reachable() check and this command: ioredis would hold the command until
    // Redis is back. The client hears 503 now, and the job, if it lands later, is taken off the queue again.
    try {
      await withDeadline(added, HANDOVER_TIMEOUT_MS, () => {
        throw new Error(`Redis did not take the request within ${HANDOVER_TIMEOUT_MS / 1000} s`);
      });
    } catch (err) {
      void added.then(() => this.inference.remove(task.requestId)).catch(() => {});
      throw err;
    }
  }

  async cancelInference(requestId: string): Promise<void> {
    const removed = await this.inference.remove(requestId).catch(() => 0);
    if (!removed) await this.redis.publish(controlChannel(this.opts.prefix), JSON.stringify({ type: 'inference.cancel', requestId }));
  }

  async workerConnected(workerId: string): Promise<boolean | null> {
    try {
      const clients = String(await this.redis.call('CLIENT', 'LIST', 'TYPE', 'normal'));
      const name = ` name=${workerConnectionName(this.opts.prefix, workerId)} `;
      return clients.split('\n').some((line) => `${line} `.includes(name));
    } catch {
      return null; // CLIENT LIST refused (renamed or ACL-denied on managed Redis): only the load timeout applies
    }
  }

  async health(timeoutMs = 2000): Promise<QueueHealth> {
    const t0 = performance.now();
    try {
      // Commands wait while ioredis reconnects: bound the wait, so a health check never hangs on a Redis outage.
      await withDeadline(this.redis.ping(), timeoutMs, () => {
        throw new Error(`no answer within ${timeoutMs} ms`);
      });
      return { ok: true, error: null, durationMs: performance.now() - t0 };
    } catch (err) {
      return { ok: false, error: `Redis: ${(err as Error).message}`, durationMs: performance.now() - t0 };
    }
  }

  async close(): Promise<void> {
    this.running = false;
    this.reader.disconnect(); // interrupts the blocking read
    await this.loop?.catch(() => {});
    await Promise.all([this.training.close(), this.inference.close()]);
    await this.redis.quit().catch(() => {});
    await releaseLiveness(this.liveness);
  }
}
