// When a worker's pulse thread repeats its heartbeat (worker/pulse.ts): only inside a stretch, only when the main
// thread's own heartbeats have stopped, and only while the compute keeps moving. And that it hears a training cancel
// while the main thread is blocked, even after a partition froze its subscriber.
import net from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Pulse, pulseDue } from '../../worker/pulse.js';
import { ComputeCancelledError, throwIfComputeCancelled } from '../../src/runtime/compute-cancel.js';
import { controlChannel } from '../../src/protocol/redis-keys.js';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

/**
 * A TCP proxy to Redis whose `freeze()` stops every connection open at that moment without closing it (a partition
 * that sends no reset: nothing flows either way); connections made later pass.
 */
async function freezableProxy(target: URL): Promise<{ url: string; freeze(): void; close(): void }> {
  const sockets: net.Socket[][] = [];
  const frozen: net.Socket[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.push([client, upstream]);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => { client.destroy(); upstream.destroy(); };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}${target.pathname}`,
    freeze: () => {
      for (const [client, upstream] of sockets.splice(0)) {
        client.unpipe(upstream); upstream.unpipe(client);
        client.pause(); upstream.pause();
        frozen.push(client, upstream);
      }
    },
    close: () => { for (const s of [...frozen, ...sockets.flat()]) s.destroy(); server.close(); },
  };
}

const base = { stretches: 1, sinceMainBeatMs: 5000, sinceProgressMs: 1000, everyMs: 1000, stallMs: 600_000 };

describe('pulseDue', () => {
  it('beats for a blocked main thread inside a stretch whose compute progresses', () => {
    expect(pulseDue(base)).toBe(true);
    expect(pulseDue({ ...base, stretches: 2 })).toBe(true);
    expect(pulseDue({ ...base, sinceProgressMs: 599_999 })).toBe(true);
  });

  it('stays quiet outside stretches: a main thread blocked there is a hang, caught by the heartbeat timeout', () => {
    expect(pulseDue({ ...base, stretches: 0 })).toBe(false);
  });

  it('stays quiet while the main thread beats itself (its heartbeat at most 1.5 intervals old)', () => {
    expect(pulseDue({ ...base, sinceMainBeatMs: 1000 })).toBe(false);
    expect(pulseDue({ ...base, sinceMainBeatMs: 1500 })).toBe(false);
    expect(pulseDue({ ...base, sinceMainBeatMs: 1501 })).toBe(true);
  });

  it('goes quiet once the compute has not moved for the stall limit (HEARTH_LOAD_TIMEOUT)', () => {
    expect(pulseDue({ ...base, sinceProgressMs: 600_000 })).toBe(false);
    expect(pulseDue({ ...base, sinceProgressMs: 3_600_000 })).toBe(false);
  });
});

describe('Pulse', () => {
  it('says it runs while its thread does, so heartbeats stop claiming a pulse once the thread is gone', async () => {
    const lines: string[] = [];
    // Redis (as the tests' other Redis users): an fd would be taken over by the thread's socket and closed with it.
    const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
    const pulse = Pulse.start({ kind: 'redis', url, prefix: 'hearth-test-pulse', queue: 'training', lockMs: 30_000 }, 100, 60_000, (m) => lines.push(m));
    expect(pulse).not.toBeNull();
    expect(pulse!.running).toBe(true);
    await pulse!.stop();
    await new Promise((r) => setTimeout(r, 50));
    expect(pulse!.running).toBe(false);
    expect(lines).toEqual([]);
  }, 30_000);

  it('hears a cancel while the main thread is blocked, after a partition without a reset froze its subscriber', async () => {
    const prefix = `hearth-test-pulse-${process.pid}`;
    const channel = controlChannel(prefix);
    const redis = new Redis(REDIS_URL);
    const proxy = await freezableProxy(new URL(REDIS_URL));
    const subscribers = async () => Number(((await redis.pubsub('NUMSUB', channel)) as [string, number])[1]);
    const until = async (what: string, ok: () => Promise<boolean>, ms: number) => {
      for (const end = Date.now() + ms; !(await ok()); await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
      }
    };
    const pulse = Pulse.start({ kind: 'redis', url: proxy.url, prefix, queue: 'training', lockMs: 30_000 }, 100, 60_000, () => {})!;
    const endJob = pulse.job('job-1'); // a stretch whose main thread then beats no more: pulses are due
    pulse.beat({ type: 'heartbeat', worker: { id: 'w1', kind: 'training', device: 'cpu', host: 'h', pid: process.pid, load: 0, lastSeenMs: Date.now(), tasks: ['job-1'] } });
    try {
      await until('the thread subscribed', async () => (await subscribers()) === 1, 10_000);
      proxy.freeze();
      // The frozen subscriber stays subscribed as far as Redis knows: a second one is the thread's fresh connection.
      await until('a fresh subscriber after the unanswered PING', async () => (await subscribers()) === 2, 10_000);
      expect(throwIfComputeCancelled).not.toThrow();
      await redis.publish(channel, JSON.stringify({ type: 'training.cancel', jobId: 'job-1' }));
      await until('the cancel heard', async () => {
        try { throwIfComputeCancelled(); return false; } catch (err) { return err instanceof ComputeCancelledError; }
      }, 5_000);
    } finally {
      endJob();
      await pulse.stop();
      proxy.close();
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
  }, 40_000);
});
