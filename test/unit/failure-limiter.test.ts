// Unknown-key attempts per client address (src/api/rate-limit.ts FailureLimiter).
import { describe, expect, it } from 'vitest';
import { FailureLimiter } from '../../src/api/rate-limit.js';

describe('FailureLimiter', () => {
  it('blocks an address after its budget of failures, until tokens come back; other addresses are not affected', () => {
    const limiter = new FailureLimiter(3);
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i++) {
      expect(limiter.blockedForSec('10.0.0.1', t0)).toBe(0);
      limiter.recordFailure('10.0.0.1', t0);
    }
    expect(limiter.blockedForSec('10.0.0.1', t0)).toBe(20); // 3 a minute: one token every 20 s
    expect(limiter.blockedForSec('10.0.0.2', t0)).toBe(0);
    expect(limiter.blockedForSec('10.0.0.1', t0 + 20_000)).toBe(0);
  });

  it('0 turns the limit off', () => {
    const limiter = new FailureLimiter(0);
    for (let i = 0; i < 100; i++) limiter.recordFailure('a', 0);
    expect(limiter.blockedForSec('a', 0)).toBe(0);
  });

  it('forgets addresses back to a full bucket once it tracks its maximum', () => {
    const limiter = new FailureLimiter(60, 2);
    limiter.recordFailure('a', 0);
    limiter.recordFailure('b', 0);
    limiter.recordFailure('c', 120_000); // a and b are full again by now: forgotten, c tracked
    expect(limiter.blockedForSec('c', 120_000)).toBe(0);
    expect((limiter as unknown as { buckets: Map<string, unknown> }).buckets.size).toBe(1);
  });
});
