// The per-entity storage quota's bookkeeping (src/services/storage-quota.ts): an estimate that only ever errs
// high, measured again before it refuses anything.
import { describe, expect, it } from 'vitest';
import { requestBodyBytes, StorageQuota } from '../../src/services/storage-quota.js';

describe('StorageQuota', () => {
  it('admits writes up to the limit per entity and refuses the one past it with 413 storage_quota_exceeded', () => {
    const stored = new Map<string, number>();
    let measures = 0;
    const quota = new StorageQuota(1000, (e) => (measures++, stored.get(e) ?? 0));
    quota.admit('bob', 600);
    stored.set('bob', 600);
    quota.admit('bob', 400);
    stored.set('bob', 1000);
    expect(() => quota.admit('bob', 1)).toThrow(expect.objectContaining({ kind: 'too_large', code: 'storage_quota_exceeded', message: expect.stringMatching(/Storage quota exceeded.*1000 B of its 1000 B/) }));
    // Another entity's room is its own.
    quota.admit('alice', 1000);
    expect(measures).toBe(3); // bob once at first, once before refusing; alice once
  });

  it('measures again before refusing, so an estimate too high (rows already stored) never refuses a write that fits', () => {
    let stored = 0;
    const quota = new StorageQuota(1000, () => stored);
    quota.admit('bob', 900); // the same 900 bytes sent twice are stored once (content-addressed)
    stored = 900;
    quota.admit('bob', 50);
    stored = 900; // the second write only repeated rows
    expect(() => quota.admit('bob', 90)).not.toThrow(); // estimate 1040 > 1000, exact 990 fits
  });

  it('gives back what a delete freed', () => {
    let stored = 0;
    const quota = new StorageQuota(1000, () => stored);
    quota.admit('bob', 1000);
    stored = 1000;
    expect(() => quota.admit('bob', 10)).toThrow(/quota/);
    stored = 0;
    quota.freed('bob', 1000);
    expect(() => quota.admit('bob', 1000)).not.toThrow();
  });

  it('has no limit at 0', () => {
    const quota = new StorageQuota(0, () => Number.MAX_SAFE_INTEGER);
    expect(() => quota.admit('bob', 1e12)).not.toThrow();
  });
});

describe('requestBodyBytes', () => {
  it('takes Content-Length, else the body as JSON', () => {
    expect(requestBodyBytes({ 'content-length': '123' }, {})).toBe(123);
    expect(requestBodyBytes({}, { a: 'é' })).toBe(Buffer.byteLength('{"a":"é"}'));
  });
});
