// Noticing a dead Redis peer (src/protocol/redis-liveness.ts): the pure rule, then the real thing against the shared
// Redis through a TCP relay on loopback that this test can freeze (forwards nothing, answers nothing: a partition that
// sends no reset) and close (new connections refused).
import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { acquireLiveness, DEFAULT_LIVENESS, judgePing, livenessSettings, releaseLiveness, tcpHandshake, watchedRedis } from '../../src/protocol/redis-liveness.js';
import { waitFor } from '../helpers/wait.js';

describe('judgePing (pure)', () => {
  const s = DEFAULT_LIVENESS;
  it('an answered PING is alive; a late one is waited for, then the handshake is tested', () => {
    expect(judgePing(s, { answered: true, waitedMs: 50_000, handshake: null }).kind).toBe('alive');
    expect(judgePing(s, { answered: false, waitedMs: 500, handshake: null }).kind).toBe('wait');
    expect(judgePing(s, { answered: false, waitedMs: s.answerWithinMs, handshake: null }).kind).toBe('test-handshake');
  });
  it('a failed handshake declares the connection lost at once, naming the cause', () => {
    const v = judgePing(s, { answered: false, waitedMs: 2100, handshake: { failed: 'ETIMEDOUT connecting to 10.0.0.1:6379' } });
    expect(v).toEqual({ kind: 'lost', reason: expect.stringContaining('ETIMEDOUT connecting to 10.0.0.1:6379') });
  });
  it('a slow Redis that accepts connections is given deadAfterMs, then declared lost', () => {
    expect(judgePing(s, { answered: false, waitedMs: 10_000, handshake: 'ok' }).kind).toBe('test-handshake');
    expect(judgePing(s, { answered: false, waitedMs: s.deadAfterMs, handshake: 'ok' })).toEqual({ kind: 'lost', reason: expect.stringContaining('accepts new connections') });
  });
  it('HEARTH_REDIS_DEAD_AFTER is read in seconds and checked', () => {
    expect(livenessSettings({ HEARTH_REDIS_DEAD_AFTER: '12' }).deadAfterMs).toBe(12_000);
    expect(livenessSettings({}).deadAfterMs).toBe(30_000);
    expect(() => livenessSettings({ HEARTH_REDIS_DEAD_AFTER: '1' })).toThrow(/at least 3/);
    expect(() => livenessSettings({ HEARTH_REDIS_DEAD_AFTER: 'soon' })).toThrow(/HEARTH_REDIS_DEAD_AFTER/);
  });
});

/** A relay from a loopback port to the shared Redis; `frozen`: bytes are swallowed both ways, nothing is closed. */
function relay() {
  const sockets = new Set<net.Socket>();
  const state = { frozen: false };
  const server = net.createServer((client) => {
    const upstream = net.connect(6379, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (d) => !state.frozen && upstream.write(d));
    upstream.on('data', (d) => !state.frozen && client.write(d));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  const listen = (port = 0) => new Promise<number>((r) => server.listen(port, '127.0.0.1', () => r((server.address() as net.AddressInfo).port)));
  return { server, state, sockets, listen };
}

describe('RedisLiveness against a frozen link', () => {
  let cleanup: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await cleanup?.();
    cleanup = null;
  });

  it('a handshake to a closed port fails with its cause', async () => {
    const r = relay();
    const port = await r.listen();
    await new Promise((res) => r.server.close(res));
    expect(await tcpHandshake({ host: '127.0.0.1', port }, 1000)).toEqual({ failed: expect.stringContaining('ECONNREFUSED') });
  });

  it('declares the connection lost when PINGs go unanswered and new connections fail, drops every connection, and says when it is back', async () => {
    const r = relay();
    const port = await r.listen();
    const lines: string[] = [];
    const url = `redis://127.0.0.1:${port}`;
    const m = acquireLiveness(url, (l) => lines.push(l));
    const client = watchedRedis(url, m, { maxRetriesPerRequest: null });
    cleanup = async () => {
      client.disconnect();
      await releaseLiveness(m);
      for (const s of r.sockets) s.destroy();
      await new Promise((res) => r.server.close(res));
    };
    expect(await client.ping()).toBe('PONG');
    // The partition: existing connections hang, new ones are refused.
    r.state.frozen = true;
    await new Promise((res) => r.server.close(res));
    const pending = client.set('hearth:liveness-test', String(Date.now()), 'EX', 60);
    await waitFor(async () => lines.some((l) => l.startsWith('Redis connection lost')), 'the lost line', 15_000, 100);
    expect(lines.find((l) => l.startsWith('Redis connection lost'))).toMatch(/no answer to PING .* ECONNREFUSED/);
    expect(m.isLost()).toBe(true);
    // The link is back: the dropped connections reconnect (to the same port) and the held command completes.
    r.state.frozen = false;
    await r.listen(port);
    expect(await Promise.race([pending, new Promise((res) => setTimeout(() => res('held'), 10_000))])).toBe('OK');
    await waitFor(async () => lines.some((l) => l.startsWith('Redis connection back')), 'the back line', 10_000, 100);
    expect(lines.filter((l) => l.startsWith('Redis connection lost'))).toHaveLength(1);
    expect(m.isLost()).toBe(false);
  }, 40_000);

  it('a slow Redis that still accepts connections is not declared lost before HEARTH_REDIS_DEAD_AFTER', async () => {
    const r = relay();
    const port = await r.listen();
    const lines: string[] = [];
    const url = `redis://127.0.0.1:${port}`;
    const m = acquireLiveness(url, (l) => lines.push(l), { ...DEFAULT_LIVENESS, deadAfterMs: 60_000 });
    const client = watchedRedis(url, m, { maxRetriesPerRequest: null });
    cleanup = async () => {
      client.disconnect();
      await releaseLiveness(m);
      for (const s of r.sockets) s.destroy();
      await new Promise((res) => r.server.close(res));
    };
    expect(await client.ping()).toBe('PONG');
    r.state.frozen = true; // answers nothing, but the listener still accepts
    await waitFor(async () => lines.some((l) => l.includes('is slow')), 'the slow line', 15_000, 100);
    await new Promise((res) => setTimeout(res, 3000));
    expect(lines.some((l) => l.startsWith('Redis connection lost'))).toBe(false);
    r.state.frozen = false;
  }, 40_000);
});

describe('RedisLiveness over a Unix socket', () => {
  it('a private Redis stopped and started again: one lost line, one back line, the held command completes', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-liveness-'));
    const sock = path.join(dir, 'redis.sock');
    let proc: ChildProcess | null = null;
    const startRedis = async () => {
      proc = spawn('redis-server', ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      await waitFor(() => fs.existsSync(sock), 'the socket', 10_000, 20);
    };
    await startRedis();
    const lines: string[] = [];
    const m = acquireLiveness(sock, (l) => lines.push(l));
    const client = watchedRedis(sock, m, { maxRetriesPerRequest: null });
    try {
      expect(await client.ping()).toBe('PONG');
      const exited = new Promise((r) => proc!.once('exit', r));
      proc!.kill('SIGKILL');
      await exited;
      fs.rmSync(sock, { force: true });
      await waitFor(() => lines.some((l) => l.startsWith('Redis connection lost')), 'the lost line', 10_000, 50);
      expect(lines[0]).toContain(sock);
      const held = client.ping();
      await startRedis();
      expect(await held).toBe('PONG');
      await waitFor(() => lines.some((l) => l.startsWith('Redis connection back')), 'the back line', 10_000, 50);
      expect(lines.filter((l) => l.startsWith('Redis connection lost'))).toHaveLength(1);
    } finally {
      client.disconnect();
      await releaseLiveness(m);
      (proc as ChildProcess | null)?.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});

// Keep the shared Redis tidy: the key above expires in 60 s anyway.
afterEach(async () => {
  const r = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 0 });
  await r.del('hearth:liveness-test').catch(() => {});
  r.disconnect();
});
