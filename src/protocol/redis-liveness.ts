// Noticing a dead Redis peer in seconds, from both ends (API and worker hosts).
//
// Why: when a link dies without a reset (packets silently dropped, or this host's interface down), a TCP connection
// with unacknowledged data does not fail: the kernel keeps retransmitting with a doubling back-off (capped at 120 s),
// and keepalive never fires while data is outstanding. A worker's heartbeats and reports then sit in the send queue,
// and after the link is back it stays silent until the next retransmission: 18–47 s measured (issue #43). The kernel
// knob for this, TCP_USER_TIMEOUT, is not exposed by Node, so the bound is kept here, at the application level:
//
//   - one small probe connection per Redis server PINGs it every second;
//   - a PING unanswered for `answerWithinMs` is not enough to call Redis dead (a Redis busy with a long command, or a
//     host under load, answers late): a fresh TCP connection to the same address is tried. A busy Redis still
//     completes the handshake (the kernel does it), so only a failed handshake (timeout, unreachable, refused) declares
//     the connection lost at once; a PING still unanswered after `deadAfterMs` declares it lost anyway;
//   - declared lost: every tracked connection (ours and BullMQ's) is dropped and reconnects by itself (ioredis), with
//     a short connect timeout and retry delay, so the first attempt after the link is back succeeds within seconds.
//
// One log line when the connection is declared lost (with the cause), one when it is back (with the outage's length).
import net from 'node:net';
import { Redis, type RedisOptions } from 'ioredis';
import { RedisConnection, createIORedisClient } from 'bullmq';

export interface LivenessSettings {
  /** How often the probe PINGs. */
  pingEveryMs: number;
  /** A PING unanswered this long triggers the handshake test. */
  answerWithinMs: number;
  /** A PING unanswered this long declares the connection lost even when new connections are accepted. */
  deadAfterMs: number;
  /** Connect timeout: of the handshake test, and of every tracked connection's reconnect attempts. */
  connectTimeoutMs: number;
}

export const DEFAULT_LIVENESS: LivenessSettings = { pingEveryMs: 1000, answerWithinMs: 2000, deadAfterMs: 30_000, connectTimeoutMs: 2000 };

/** HEARTH_REDIS_DEAD_AFTER (seconds, default 30): the longest a Redis that still accepts connections may leave a PING unanswered. */
export function livenessSettings(env: NodeJS.ProcessEnv = process.env): LivenessSettings {
  const raw = env.HEARTH_REDIS_DEAD_AFTER;
  if (raw === undefined || raw === '') return DEFAULT_LIVENESS;
  const s = Number(raw);
  if (!Number.isFinite(s) || s < 3) throw new Error(`HEARTH_REDIS_DEAD_AFTER must be a number of seconds, at least 3, got "${raw}"`);
  return { ...DEFAULT_LIVENESS, deadAfterMs: Math.round(s * 1000) };
}

export type Verdict = { kind: 'alive' } | { kind: 'wait' } | { kind: 'test-handshake' } | { kind: 'lost'; reason: string };

/**
 * What an unanswered PING means (pure). `handshake`: the outcome of a fresh TCP connection to Redis's address while
 * the PING waits (null: not tried yet this round), or its error message.
 */
export function judgePing(s: LivenessSettings, p: { answered: boolean; waitedMs: number; handshake: null | 'ok' | { failed: string } }): Verdict {
  if (p.answered) return { kind: 'alive' };
  if (p.handshake !== null && p.handshake !== 'ok') return { kind: 'lost', reason: `no answer to PING within ${fmtS(p.waitedMs)} and a new connection failed: ${p.handshake.failed}` };
  if (p.waitedMs >= s.deadAfterMs) return { kind: 'lost', reason: `no answer to PING within ${fmtS(p.waitedMs)}, although Redis accepts new connections` };
  if (p.waitedMs >= s.answerWithinMs) return { kind: 'test-handshake' };
  return { kind: 'wait' };
}

const fmtS = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Options every tracked connection gets: reconnect quickly, and a connect attempt into a dead link gives up quickly. */
export function reconnectOptions(s: LivenessSettings): Pick<RedisOptions, 'connectTimeout' | 'retryStrategy' | 'keepAlive' | 'disconnectTimeout'> {
  return {
    connectTimeout: s.connectTimeoutMs,
    // A dropped connection's socket is closed politely first (FIN); on a dead link that never completes: destroy soon.
    disconnectTimeout: 300,
    // 200 ms, 400 ms, … capped at 1 s: after a partition the first attempt past the fix connects.
    retryStrategy: (times: number) => Math.min(times * 200, 1000),
    // Kernel keepalive for connections idle with nothing outstanding (a blocked BZPOPMIN): probes after 5 s idle.
    keepAlive: 5000,
  };
}

/** Where Redis listens: host and port, or a Unix socket's path. */
export type RedisAddress = { host: string; port: number } | { path: string };
const describe = (a: RedisAddress) => ('path' in a ? a.path : `${a.host}:${a.port}`);

/** Whether a connection to `address` (TCP handshake, or a Unix socket's accept) completes within `ms`: 'ok', or why not. */
export function tcpHandshake(address: RedisAddress, ms: number): Promise<'ok' | { failed: string }> {
  return new Promise((resolve) => {
    const socket = net.connect(address);
    const where = describe(address);
    const done = (v: 'ok' | { failed: string }) => {
      socket.destroy();
      clearTimeout(timer);
      resolve(v);
    };
    const timer = setTimeout(() => done({ failed: `connect to ${where} timed out after ${fmtS(ms)}` }), ms);
    socket.once('connect', () => done('ok'));
    socket.once('error', (err: NodeJS.ErrnoException) => done({ failed: `${err.code ?? err.message} connecting to ${where}` }));
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** The liveness of one Redis server (host:port, or Unix socket) for this process, shared by every user of that server. */
export class RedisLiveness {
  private readonly tracked = new Set<Redis>();
  private readonly probe: Redis;
  private running = true;
  private lostSince: number | null = null;
  private readonly loop: Promise<void>;
  users = 0;

  constructor(
    readonly key: string,
    private readonly address: RedisAddress,
    private readonly settings: LivenessSettings,
    private readonly log: (msg: string, level?: 'info' | 'warn') => void,
    options: RedisOptions,
  ) {
    // The probe holds nothing: commands on it are never queued while it reconnects, never resent after.
    this.probe = new Redis({ ...options, ...reconnectOptions(settings), enableOfflineQueue: false, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0, connectionName: undefined, lazyConnect: false });
    this.probe.on('error', () => {}); // told through declareLost / the PING loop
    this.tracked.add(this.probe);
    this.loop = this.run();
  }

  /** Drop `client` with the others when the connection is declared lost; forgotten when it ends. */
  track(client: Redis): void {
    this.tracked.add(client);
    client.once('end', () => this.tracked.delete(client));
    // A connection error (refused, reset) is a lost connection the moment it happens: say so once.
    client.on('error', (err: Error) => this.declareLost(err.message, false));
  }

  isLost(): boolean {
    return this.lostSince !== null;
  }

  private declareLost(reason: string, drop: boolean): void {
    if (this.lostSince === null) {
      this.lostSince = Date.now();
      this.log(`Redis connection lost (${this.key}: ${reason}); ${drop ? `dropping ${this.tracked.size} connections and ` : ''}reconnecting`, 'warn');
    }
    if (drop) for (const c of this.tracked) if (c.status !== 'end') c.disconnect(true);
  }

  private declareBack(): void {
    if (this.lostSince === null) return;
    this.log(`Redis connection back (${this.key}) after ${fmtS(Date.now() - this.lostSince)}`);
    this.lostSince = null;
  }

  private async run(): Promise<void> {
    while (this.running) {
      await sleep(this.settings.pingEveryMs);
      if (!this.running) return;
      if (this.probe.status !== 'ready') continue; // reconnecting: ioredis retries, errors are reported by track()
      const t0 = Date.now();
      let answered = false;
      // An error reply (LOADING after a restart, say) or the probe's connection closing under the PING ends the
      // round: the first is an answer of a live Redis, the second is reported by the connection's error (track()).
      let failed = false;
      const pong = this.probe.ping().then(() => void (answered = true), () => void (failed = true));
      let handshake: null | 'ok' | { failed: string } = null;
      let slowLogged = false;
      // Bounded: each turn waits at least one PING interval, and deadAfterMs ends it.
      for (let turn = 0; this.running && !failed && turn < 10_000; turn++) {
        const v = judgePing(this.settings, { answered, waitedMs: Date.now() - t0, handshake });
        if (v.kind === 'alive') {
          this.declareBack();
          break;
        }
        if (v.kind === 'lost') {
          this.declareLost(v.reason, true);
          break;
        }
        if (v.kind === 'test-handshake') {
          handshake = await tcpHandshake(this.address, this.settings.connectTimeoutMs);
          if (handshake === 'ok') {
            if (!slowLogged) this.log(`Redis (${this.key}) is slow: a PING has waited ${fmtS(Date.now() - t0)} but new connections are accepted; waiting up to ${fmtS(this.settings.deadAfterMs)}`, 'warn');
            slowLogged = true;
            await Promise.race([pong, sleep(this.settings.pingEveryMs)]);
            handshake = null; // test again next turn
          }
          continue;
        }
        await Promise.race([pong, sleep(Math.max(50, this.settings.answerWithinMs - (Date.now() - t0)))]);
      }
    }
  }

  async close(): Promise<void> {
    this.running = false;
    this.probe.disconnect();
    await this.loop.catch(() => {});
  }
}

// ---- one monitor per Redis server per process, shared; BullMQ's connections tracked through its client factory ----

const monitors = new Map<string, RedisLiveness>();

function target(options: RedisOptions): { key: string; address: RedisAddress } {
  // A Unix socket cannot be partitioned, but Redis behind it can stop or hang: watched the same way.
  if (options.path) return { key: options.path, address: { path: options.path } };
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 6379;
  return { key: `${host}:${port}`, address: { host, port } };
}

/** ioredis's parsed options for a URL (host, port, password, tls, db), without connecting. */
function parse(url: string): RedisOptions {
  const r = new Redis(url, { lazyConnect: true });
  const opts = { ...r.options };
  r.disconnect();
  return opts;
}

/**
 * The monitor of `url`'s Redis server, shared by every user in this process (the first one's `log` and settings
 * apply); the connections made with `watchedRedis` and BullMQ's are tracked by it. Call `releaseLiveness` once per
 * acquire when done: the last release stops it.
 */
export function acquireLiveness(url: string, log: (msg: string, level?: 'info' | 'warn') => void, settings = livenessSettings()): RedisLiveness {
  const options = parse(url);
  const t = target(options);
  let m = monitors.get(t.key);
  if (!m) {
    m = new RedisLiveness(t.key, t.address, settings, log, options);
    monitors.set(t.key, m);
  }
  m.users++;
  installBullmqFactory();
  return m;
}

export async function releaseLiveness(m: RedisLiveness | null): Promise<void> {
  if (!m) return;
  m.users--;
  if (m.users > 0) return;
  monitors.delete(m.key);
  await m.close();
}

/** A watched ioredis client (`extra` on top of the quick-reconnect options). */
export function watchedRedis(url: string, m: RedisLiveness | null, extra: RedisOptions): Redis {
  const client = new Redis(url, { ...(m ? reconnectOptions(DEFAULT_LIVENESS) : {}), ...extra });
  m?.track(client);
  return client;
}

let factoryInstalled = false;
/**
 * BullMQ builds its own ioredis clients (queue, worker, blocking connection) from connection options; its factory hook
 * builds them the same way, plus the quick-reconnect options and tracking by the server's monitor, if any.
 */
function installBullmqFactory(): void {
  if (factoryInstalled || RedisConnection.clientFactory) return;
  factoryInstalled = true;
  RedisConnection.clientFactory = (opts) => {
    const { url, ...rest } = opts as RedisOptions & { url?: string };
    // As BullMQ does it: the URL first (ioredis lets the URL's host, port and password win over the options').
    const t = target(url ? { ...rest, ...parse(url) } : rest);
    const m = monitors.get(t.key);
    const options = { ...rest, ...(m ? reconnectOptions(DEFAULT_LIVENESS) : {}) };
    const raw = url ? new Redis(url, options) : new Redis(options);
    m?.track(raw);
    return createIORedisClient(raw) as ReturnType<NonNullable<typeof RedisConnection.clientFactory>>;
  };
}
