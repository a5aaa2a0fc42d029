// When a worker's pulse thread repeats its heartbeat (worker/pulse.ts): only inside a stretch, only when the main
// thread's own heartbeats have stopped, and only while the compute keeps moving.
import { describe, expect, it } from 'vitest';
import { Pulse, pulseDue } from '../../worker/pulse.js';

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
});
