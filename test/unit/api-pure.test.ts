import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { takeToken, RateLimiter } from '../../src/api/rate-limit.js';
import { toPage } from '../../src/services/pagination.js';
import { aggregateTrajectoryMetrics, std } from '../../src/services/trajectory-metrics.js';
import { zodIssuesToDetail } from '../../src/api/errors.js';
import { TrajectoryGroup } from '../../src/protocol/training.js';
import { loadConfig, parseWorkers } from '../../src/config/config.js';

describe('token bucket', () => {
  it('allows the burst, refuses the next, and refills with time', () => {
    const b = { tokens: 3, updatedMs: 0 };
    expect([1, 2, 3].map(() => takeToken(b, 3, 0).allowed)).toEqual([true, true, true]);
    const refused = takeToken(b, 3, 0);
    expect(refused).toEqual({ allowed: false, retryAfterSec: 20 }); // 3/min → one token per 20 s
    expect(takeToken(b, 3, 19_000).allowed).toBe(false);
    expect(takeToken(b, 3, 20_100).allowed).toBe(true);
  });
  it('is off at 0', () => {
    const l = new RateLimiter(0);
    for (let i = 0; i < 1000; i++) expect(l.take('k').allowed).toBe(true);
  });
});

describe('pagination', () => {
  it('uses the extra row only to set has_more', () => {
    const rows = [1, 2, 3].map((n) => ({ id: `id${n}` }));
    expect(toPage(rows, 2, (r) => r)).toEqual({ object: 'list', data: rows.slice(0, 2), first_id: 'id1', last_id: 'id2', has_more: true });
    expect(toPage(rows, 3, (r) => r).has_more).toBe(false);
    expect(toPage([], 3, (r: { id: string }) => r)).toEqual({ object: 'list', data: [], first_id: '', last_id: '', has_more: false });
  });
});

describe('trajectory metrics', () => {
  it('computes population std like numpy', () => {
    expect(std([1, 0])).toBe(0.5);
    expect(std([2, 4, 4, 4, 5, 5, 7, 9])).toBe(2);
    expect(std([])).toBe(0);
  });
  it('aggregates reward, within-group std, exception rate and custom metrics per split', () => {
    const g = (rewards: number[], exceptions = 0) =>
      TrajectoryGroup.parse({
        trajectories: rewards.map((r, i) => ({ reward: r, metrics: { turns: i + 1, ok: i % 2 === 0 } })),
        exceptions: Array.from({ length: exceptions }, () => ({ type: 'E', message: 'x' })),
      });
    const m = aggregateTrajectoryMetrics('train', [g([1, 0]), g([1, 1, 1], 1)]);
    expect(m['train/reward']).toBeCloseTo(4 / 5, 12);
    expect(m['train/reward_std_dev']).toBeCloseTo(0.25, 12);
    expect(m['train/exception_rate']).toBeCloseTo(1 / 6, 12);
    expect(m['train/turns']).toBeCloseTo((1 + 2 + 1 + 2 + 3) / 5, 12);
    expect(m['train/ok']).toBeCloseTo(3 / 5, 12);
  });
});

describe('zod issues → FastAPI detail', () => {
  const schema = z.strictObject({ a: z.number().int().min(1), b: z.string(), c: z.enum(['x', 'y']) });
  it('maps missing, types, bounds, enums and extra keys to pydantic names', () => {
    const r = schema.safeParse({ a: 0, c: 'z', extra: 1 }, { reportInput: true });
    const detail = zodIssuesToDetail(r.error!.issues, 'body');
    expect(detail).toEqual(
      expect.arrayContaining([
        { loc: ['body', 'a'], msg: 'Input should be greater than or equal to 1', type: 'greater_than_equal', input: 0 },
        { loc: ['body', 'b'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'c'], msg: "Input should be 'x' or 'y'", type: 'enum', input: 'z' },
        { loc: ['body', 'extra'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
      ]),
    );
    const t = schema.safeParse({ a: 1.5, b: 2, c: 'x' }, { reportInput: true });
    expect(zodIssuesToDetail(t.error!.issues, 'query').map((d) => d.type)).toEqual(['int_type', 'string_type']);
  });
});

describe('configuration', () => {
  it('reads HEARTH_WORKERS and HEARTH_WEIGHTS, refusing unknown values with the variable named', () => {
    const c = loadConfig({ HEARTH_WORKERS: 'inference:cuda:1', HEARTH_WEIGHTS: 'q4' });
    expect(c.workers).toEqual([{ kind: 'inference', device: 'cuda:1' }]);
    expect(c.servedWeights).toBe('q4');
    expect(loadConfig({}).servedWeights).toBe('stored');
    expect(loadConfig({ HEARTH_WEIGHTS: 'f32' }).servedWeights).toBe('f32');
    expect(() => loadConfig({ HEARTH_WEIGHTS: 'Q4' })).toThrow(/HEARTH_WEIGHTS must be stored, f32 or q4, got "Q4"/);
    expect(() => parseWorkers('inference:gpu')).toThrow(/HEARTH_WORKERS: unknown device "gpu"/);
  });
});
