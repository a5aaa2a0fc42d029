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
