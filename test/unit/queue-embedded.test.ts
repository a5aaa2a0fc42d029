import { describe, expect, it } from 'vitest';
import { isChunk, workerNodeFlags } from '../../src/queue/embedded.js';

describe('embedded queue: node flags of worker children', () => {
  it('inference workers run V8 with a single-threaded GC unless HEARTH_INFERENCE_NODE_FLAGS says otherwise; training workers get none', () => {
    expect(workerNodeFlags('inference', {})).toEqual(['--single-threaded-gc']);
    expect(workerNodeFlags('training', {})).toEqual([]);
    expect(workerNodeFlags('training', { HEARTH_INFERENCE_NODE_FLAGS: '--max-old-space-size=4096' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: '' })).toEqual([]);
    expect(workerNodeFlags('inference', { HEARTH_INFERENCE_NODE_FLAGS: ' --single-threaded-gc  --max-old-space-size=4096 ' })).toEqual(['--single-threaded-gc', '--max-old-space-size=4096']);
  });
});

describe('embedded queue: the chunk fast path', () => {
  const chunk = (extra: object = {}, event: unknown = { type: 'chunk', data: { choices: [] } }) => ({ type: 'inference.event', requestId: 'r1', event, ...extra });
  it('takes only well-formed chunk events past the schema', () => {
    expect(isChunk(chunk())).toBe(true);
    expect(isChunk(chunk({}, { type: 'chunk', data: null }))).toBe(true);
    expect(isChunk(chunk({ workerMs: 12.5 }))).toBe(true);
    expect(isChunk(chunk({ workerMs: '12.5' }))).toBe(false); // the schema's number
    // Anything else goes through WorkerMessage's schema, which drops what does not fit.
    expect(isChunk(chunk({ requestId: 7 }))).toBe(false);
    expect(isChunk(chunk({}, { type: 'chunk' }))).toBe(false);
    expect(isChunk(chunk({}, null))).toBe(false);
    expect(isChunk(chunk({}, { type: 'result', data: null }))).toBe(false);
    expect(isChunk(chunk({}, { type: 'error', status: 500, message: 'x' }))).toBe(false);
    expect(isChunk({ type: 'inference.started', requestId: 'r1', workerId: 'w' })).toBe(false);
    expect(isChunk(null)).toBe(false);
    expect(isChunk('inference.event')).toBe(false);
  });
});
