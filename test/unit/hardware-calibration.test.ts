import { describe, expect, it } from 'vitest';
import { CalibrationCache, type CalibrationEntry } from '../../src/hardware/calibration-cache.js';

const entry = (over: Partial<CalibrationEntry> = {}): CalibrationEntry => ({
  modelId: 'meta-llama/Llama-3.2-1B', modelFileHash: 'sha256:aaa', deviceKey: 'nvidia|A100|81920MiB|driver 535|cc 8.0',
  prefillTps: 4000, decodeTps: 300, measuredAt: '2026-11-22T00:00:00.000Z', ...over,
});

describe('CalibrationCache', () => {
  it('returns a measurement only for the same model, model file hash and device', () => {
    const cache = new CalibrationCache([entry()]);
    expect(cache.get('meta-llama/Llama-3.2-1B', 'sha256:aaa', entry().deviceKey)).toEqual(entry());
    expect(cache.get('meta-llama/Llama-3.2-1B', 'sha256:bbb', entry().deviceKey)).toBeUndefined(); // re-imported file
    expect(cache.get('meta-llama/Llama-3.2-1B', 'sha256:aaa', 'nvidia|A100|81920MiB|driver 550|cc 8.0')).toBeUndefined(); // new driver
    expect(cache.get('other/model', 'sha256:aaa', entry().deviceKey)).toBeUndefined();
    expect(cache.needsCalibration('meta-llama/Llama-3.2-1B', 'sha256:bbb', entry().deviceKey)).toBe(true);
    expect(cache.needsCalibration('meta-llama/Llama-3.2-1B', 'sha256:aaa', entry().deviceKey)).toBe(false);
  });

  it('replaces a stale entry when the model is measured again', () => {
    const cache = new CalibrationCache([entry()]);
    cache.record(entry({ modelFileHash: 'sha256:bbb', decodeTps: 310 }));
    expect(cache.toJSON()).toHaveLength(1);
    expect(cache.get('meta-llama/Llama-3.2-1B', 'sha256:aaa', entry().deviceKey)).toBeUndefined();
    expect(cache.get('meta-llama/Llama-3.2-1B', 'sha256:bbb', entry().deviceKey)?.decodeTps).toBe(310);
  });

  it('feeds hardwareOptions through throughputFor', () => {
    const cache = new CalibrationCache([entry(), entry({ deviceKey: 'cpu|x', prefillTps: 50, decodeTps: 8 })]);
    const throughput = cache.throughputFor('meta-llama/Llama-3.2-1B', 'sha256:aaa');
    expect(throughput('cpu|x')).toEqual({ prefillTps: 50, decodeTps: 8 });
    expect(throughput('cpu|y')).toBeUndefined();
    expect(cache.throughputFor('meta-llama/Llama-3.2-1B', 'sha256:old')('cpu|x')).toBeUndefined();
  });

  it('round-trips through JSON, validates input and forgets a model', () => {
    const cache = new CalibrationCache([entry(), entry({ modelId: 'b/c' })]);
    const copy = CalibrationCache.fromJSON(JSON.parse(JSON.stringify(cache)));
    expect(copy.toJSON()).toEqual(cache.toJSON());
    expect(() => CalibrationCache.fromJSON([{ ...entry(), decodeTps: 0 }])).toThrow();
    expect(() => cache.record(entry({ prefillTps: Number.NaN }))).toThrow();
    copy.forgetModel('b/c');
    expect(copy.toJSON().map((e) => e.modelId)).toEqual(['meta-llama/Llama-3.2-1B']);
  });
});
