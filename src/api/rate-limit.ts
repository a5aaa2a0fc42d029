// A token bucket per key: `perMinute` requests a minute on average, bursts up to the same number.
// Pure: the caller passes the clock, so tests need no sleeping.

export interface Bucket {
  tokens: number;
  updatedMs: number;
}

export interface TakeResult {
  allowed: boolean;
  /** Seconds until one token is available again (0 when allowed). */
  retryAfterSec: number;
}

export function takeToken(bucket: Bucket, perMinute: number, nowMs: number): TakeResult {
  const ratePerMs = perMinute / 60_000;
  bucket.tokens = Math.min(perMinute, bucket.tokens + (nowMs - bucket.updatedMs) * ratePerMs);
  bucket.updatedMs = nowMs;
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    return { allowed: true, retryAfterSec: 0 };
  }
  return { allowed: false, retryAfterSec: Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerMs / 1000)) };
}

/** Tokens a bucket holds at `nowMs`, without taking one. */
export function tokensAt(bucket: Bucket, perMinute: number, nowMs: number): number {
  return Math.min(perMinute, bucket.tokens + (nowMs - bucket.updatedMs) * (perMinute / 60_000));
}

/**
 * Failures (unknown API keys) per client address: each costs a token, and an address without tokens is refused
 * before its key is looked at. Buckets back to full are forgotten once many addresses are tracked.
 */
export class FailureLimiter {
  private readonly buckets = new Map<string, Bucket>();
  constructor(
    private readonly perMinute: number,
    private readonly maxTracked = 10_000,
  ) {}

  /** Seconds until `key` may try again (0: it may now). */
  blockedForSec(key: string, nowMs = Date.now()): number {
    const b = this.buckets.get(key);
    if (this.perMinute <= 0 || !b) return 0;
    const tokens = tokensAt(b, this.perMinute, nowMs);
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil((1 - tokens) / (this.perMinute / 60_000) / 1000));
  }

  recordFailure(key: string, nowMs = Date.now()): void {
    if (this.perMinute <= 0) return;
    let b = this.buckets.get(key);
    if (!b) {
      if (this.buckets.size >= this.maxTracked) this.forgetFull(nowMs);
      b = { tokens: this.perMinute, updatedMs: nowMs };
      this.buckets.set(key, b);
    }
    takeToken(b, this.perMinute, nowMs);
  }

  private forgetFull(nowMs: number): void {
    for (const [key, b] of this.buckets) if (tokensAt(b, this.perMinute, nowMs) >= this.perMinute) this.buckets.delete(key);
  }
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  constructor(private readonly perMinute: number) {}

  take(key: string, nowMs = Date.now()): TakeResult {
    if (this.perMinute <= 0) return { allowed: true, retryAfterSec: 0 };
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: this.perMinute, updatedMs: nowMs };
      this.buckets.set(key, b);
    }
    return takeToken(b, this.perMinute, nowMs);
  }
}
