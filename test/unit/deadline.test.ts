// withDeadline (src/domain/deadline.ts): the bounded waits of the Redis transport and the model-load announcements.
import { describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { withDeadline } from '../../src/domain/deadline.js';

describe('withDeadline', () => {
  it("gives the work's value, or its rejection, when it settles in time", async () => {
    expect(await withDeadline(sleep(5).then(() => 'done'), 1000, () => 'late')).toBe('done');
    await expect(withDeadline(Promise.reject(new Error('refused')), 1000, () => 'late')).rejects.toThrow('refused');
  });

  it("gives the deadline's fallback, or its error, when the work takes longer", async () => {
    const never = new Promise<string>(() => {});
    expect(await withDeadline(never, 10, () => 'late')).toBe('late');
    await expect(withDeadline(never, 10, () => { throw new Error('no answer within 10 ms'); })).rejects.toThrow('no answer within 10 ms');
  });
});
