import { describe, expect, it } from 'vitest';
import { workerNodeFlags } from '../../src/queue/embedded.js';

describe('embedded queue: node flags of worker children', () => {
  it('inference workers run V8 with a single-threaded GC unless HEARTH_INFERENCE_NODE_FLAGS says otherwise; training workers get none', () => {
    expect(workerNodeFlags('inference', {})).toEqual(['--single-threaded-gc']);
    expect(workerNodeFlags('training', {})).toEqual([]);
    expect(workerNodeFlags('training', { HEARTH_INFERENCE_NODE_FLAGS: '--max-old-space-size=4096' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: '' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: ' --single-threaded-gc  --max-old-space-size=4096 ' })).toEqual(['--single-threaded-gc', '--max-old-space-size=4096']);
  });
});
