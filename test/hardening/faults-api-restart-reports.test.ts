// The API process killed between Redis handing it worker reports and its acknowledging them (found by
// npm run test:cluster: a gradient step lost at an API kill -9). Reports are read by a consumer group; the next API
// process must apply what the killed one was handed and never applied, and must not store twice what it had applied.
// Real Redis (the shared one, under this test's own prefix), a real store; the killed process is simulated by reading
// as it would have (XREADGROUP without XACK) while no API runs.
import { afterAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { Redis } from 'ioredis';
import { installManifestOnly, startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { REPORTS_CONSUMER, REPORTS_GROUP, reportsStream } from '../../src/protocol/redis-keys.js';
import { BullmqQueue } from '../../src/queue/bullmq.js';
import type { WorkerMessage } from '../../src/protocol/messages.js';

const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = `restart-reports-${crypto.randomBytes(4).toString('hex')}`;
const redis = new Redis(redisUrl);
const servers: TestServer[] = [];

afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

const start = async (home: string) => {
  const s = await startServer({ home, queue: {}, env: { REDIS_URL: redisUrl, HEARTH_QUEUE_PREFIX: prefix } });
  servers.push(s);
  return s;
};
const step = (jobId: string, seq: number) => ({ type: 'training.event', jobId, seq, event: { type: 'gradient_step', data: { loss: seq } } });

describe('worker reports across an API restart (Redis)', () => {
  it('applies the reports a killed API process was handed but never applied, and stores none of them twice', async () => {
    const home = tempHome();
    installManifestOnly(home, 'test-publisher/tiny-base');
    const first = await start(home);
    const model = (await first.call('POST', '/v1/preview/models', { key: first.key('alice'), body: { project: 'p', name: 'm', base_model: 'test-publisher/tiny-base' } })).body;
    const jobId = crypto.randomUUID();
    const now = new Date().toISOString();
    first.store.jobs.insert({ id: jobId, entity: 'alice', modelId: model.id, kind: 'sft', status: 'running', payload: { resolved_data_path: 'train.jsonl' }, dedupKey: null, errorMessage: null, createdAt: now, startedAt: now, finishedAt: null });
    const stream = reportsStream(prefix);
    const add = (msg: unknown) => redis.xadd(stream, '*', 'm', JSON.stringify(msg));
    await add(step(jobId, 0));
    await waitFor(() => first.store.events.count(jobId) === 1, 'the first step applied', 10_000, 20);
    await first.close();
    servers.pop();

    // While no API runs: step 1 is handed to (and applied by) an API process that is killed before XACK; step 2 is
    // handed to an API process of an earlier version (a consumer per pid) and killed before applying it; step 3 waits.
    await add(step(jobId, 1));
    await redis.xreadgroup('GROUP', REPORTS_GROUP, REPORTS_CONSUMER, 'COUNT', 1, 'STREAMS', stream, '>');
    const killed = await startServer({ home }); // the store as the killed process left it: step 1 stored
    expect(killed.ctx.trainingJobs.recordEvent(jobId, 'gradient_step', { loss: 1 }, 1)).toBe(true);
    await killed.close();
    await add(step(jobId, 2));
    await redis.xreadgroup('GROUP', REPORTS_GROUP, 'api-424242', 'COUNT', 1, 'STREAMS', stream, '>');
    await add(step(jobId, 3));

    const second = await start(home);
    await waitFor(() => second.store.events.count(jobId) >= 4, 'steps 1-3 applied', 10_000, 20);
    await new Promise((r) => setTimeout(r, 300)); // a duplicate would land now
    const losses = second.store.events.all(jobId).map((e) => (e.data as { loss: number }).loss);
    expect(losses).toEqual([0, 1, 2, 3]);
    const pending = (await redis.xpending(stream, REPORTS_GROUP)) as [number, ...unknown[]];
    expect(pending[0]).toBe(0); // everything acknowledged, nothing left under the old consumer's name
    const consumers = ((await redis.call('XINFO', 'CONSUMERS', stream, REPORTS_GROUP)) as string[][]).map((c) => c[1]);
    expect(consumers).toEqual([REPORTS_CONSUMER]);
  }, 60_000);

  it('start() resolves only after the reports sent while no API ran are applied (jobs current before routes open)', async () => {
    // Else a checkpoint upload arriving as the API opens could find its job still "queued" (its training.started
    // unread) and be refused with 409, and queued jobs would be handed out on stale states.
    const own = `${prefix}-backlog`;
    const first = new BullmqQueue({ redisUrl, prefix: own, log: () => {} });
    await first.start(() => {});
    await first.close();
    for (let i = 0; i < 5; i++) await redis.xadd(reportsStream(own), '*', 'm', JSON.stringify(step('job-x', i)));
    const seen: WorkerMessage[] = [];
    const second = new BullmqQueue({ redisUrl, prefix: own, log: () => {} });
    try {
      await second.start((m) => seen.push(m));
      expect(seen.length).toBe(5); // all applied when start() resolved, nothing awaited in between
    } finally {
      await second.close();
      await redis.del(reportsStream(own));
    }
  }, 30_000);
});
