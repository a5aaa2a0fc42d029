import { describe, expect, it } from 'vitest';
import { isDelta, workerNodeFlags } from '../../src/queue/embedded.js';

describe('embedded queue: node flags of worker children', () => {
  it('inference workers run V8 with a single-threaded GC unless HEARTH_INFERENCE_NODE_FLAGS says otherwise; training workers get none', () => {
    expect(workerNodeFlags('inference', {})).toEqual(['--single-threaded-gc']);
    expect(workerNodeFlags('training', {})).toEqual([]);
    expect(workerNodeFlags('training', { HEARTH_INFERENCE_NODE_FLAGS: '--max-old-space-size=4096' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: '' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: ' --single-threaded-gc  --max-old-space-size=4096 ' })).toEqual(['--single-threaded-gc', '--max-old-space-size=4096']);
  });
});

describe('embedded queue: the delta fast path', () => {
  it('takes only well-formed deltas past the schema', () => {
    expect(isDelta({ type: 'inference.delta', requestId: 'r1', data: { choices: [] } })).toBe(true);
    expect(isDelta({ type: 'inference.delta', requestId: 'r1', data: null })).toBe(true);
    expect(isDelta({ type: 'inference.delta', requestId: 'r1', data: {}, workerMs: 12.5 })).toBe(true);
    expect(isDelta({ type: 'inference.delta', requestId: 'r1', data: {}, workerMs: '12.5' })).toBe(false); // the schema's number
    // Anything else goes through WorkerMessage's schema, which drops what does not fit.
    expect(isDelta({ type: 'inference.delta', requestId: 7, data: {} })).toBe(false);
    expect(isDelta({ type: 'inference.delta', requestId: 'r1' })).toBe(false);
    expect(isDelta({ type: 'inference.done', requestId: 'r1', result: null })).toBe(false);
    expect(isDelta(null)).toBe(false);
    expect(isDelta('inference.delta')).toBe(false);
  });
});
