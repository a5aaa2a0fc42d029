// The console's pure pieces: SSE framing, events → metric series, chunk → token pieces.
import { describe, expect, it } from 'vitest';
import { SseParser } from '../../src/console/web/lib/sse.js';
import { appendEvents, emptySeries, metricOrder } from '../../src/console/web/lib/series.js';
import { blankMark, percent, pieceOfChunk } from '../../src/console/web/lib/tokens.js';
import { elapsed, formatBytes } from '../../src/console/web/lib/format.js';

describe('SseParser', () => {
  it('returns complete events only, across arbitrary splits and CRLF', () => {
    const p = new SseParser();
    expect(p.push('data: {"a"')).toEqual([]);
    expect(p.push(':1}\r\n\r\ndata: [DO')).toEqual(['{"a":1}']);
    expect(p.push('NE]\n\n: comment\n\n')).toEqual(['[DONE]']);
    expect(p.push('data: x\ndata: y\n\n')).toEqual(['x\ny']);
  });
});

describe('metric series', () => {
  it('keeps one value per gradient step per metric, null where a step lacks it', () => {
    const s = emptySeries();
    appendEvents(s, [
      { id: '1', type: 'training_started', data: { num_sequences: 2 } },
      { id: '2', type: 'gradient_step', data: { loss: 2, learning_rate: 0.1, step: 1 } },
    ]);
    appendEvents(s, [
      { id: '3', type: 'gradient_step', data: { loss: 1, reward: 0.5, note: 'x' } },
      { id: '4', type: 'training_ended', data: {} },
    ]);
    expect(s.steps).toEqual([1, 2]);
    expect(Object.fromEntries(s.metrics)).toEqual({ loss: [2, 1], learning_rate: [0.1, null], reward: [null, 0.5] });
    expect(metricOrder(s.metrics.keys())).toEqual(['loss', 'reward', 'learning_rate']);
  });
});

describe('token pieces', () => {
  it('decodes token bytes for the hover and keeps the delta text', () => {
    const piece = pieceOfChunk({
      choices: [{ delta: { content: 'é' }, logprobs: { content: [{ token: 'token_id:7', logprob: -0.5, bytes: [195, 169], top_logprobs: [{ token: 'token_id:8', logprob: -1, bytes: null }] }] } }],
    });
    expect(piece).toEqual({ text: 'é', tokens: [{ text: 'é', logprob: -0.5, top: [{ text: 'token_id:8', logprob: -1 }] }] });
    expect(pieceOfChunk({ choices: [{ delta: { role: 'assistant' }, logprobs: null }] })).toBeNull();
    expect(percent(0)).toBe('100%');
    expect(percent(Math.log(0.5))).toBe('50.0%');
  });

  it('marks pieces that draw nothing (a special token, a held byte, a bare line break, control characters) so they can be hovered', () => {
    const special = pieceOfChunk({ choices: [{ delta: { content: '' }, logprobs: { content: [{ token: 'token_id:3', logprob: -6.3, bytes: [] }] } }] });
    expect(special?.tokens).toHaveLength(1);
    expect(blankMark(special!.text)).toBe('∅');
    expect(blankMark('\n')).toBe('↵');
    expect(blankMark('\r\n\n')).toBe('↵');
    expect(blankMark('\f')).toBe('·');
    expect(blankMark('\u0003\u200d')).toBe('·');
    expect(blankMark('\u0301')).toBe('◌'); // a combining accent alone
    expect(blankMark('\ufe0f\u0308')).toBe('◌'); // a variation selector and a diaeresis
    expect(blankMark('e\u0301')).toBeNull();
    expect(blankMark('\t')).toBeNull();
    expect(blankMark(' ')).toBeNull();
    expect(blankMark('a\n')).toBeNull();
  });
});

describe('format', () => {
  it('formats sizes and durations', () => {
    expect(formatBytes(1234)).toBe('1.2 KB');
    expect(formatBytes(null)).toBe('—');
    expect(elapsed('2026-01-01T00:00:00Z', '2026-01-01T00:01:05Z')).toBe('1m 5s');
    expect(elapsed(null, null)).toBe('—');
  });
});

describe('fine-tune form and base model facts', () => {
  it('turns the form into an SFT config, or names the bad field', async () => {
    const { sftConfigFrom, defaultTrainedName } = await import('../../src/console/web/lib/fine-tune.js');
    expect(sftConfigFrom({ learningRate: '5e-3', batchSize: 'auto' })).toEqual({ learning_rate: 5e-3, batch_size: 'auto' });
    expect(sftConfigFrom({ learningRate: '1e-4', batchSize: ' 4 ' })).toEqual({ learning_rate: 1e-4, batch_size: 4 });
    expect(sftConfigFrom({ learningRate: '0', batchSize: 'auto' })).toEqual({ error: expect.stringMatching(/^Learning rate/) });
    expect(sftConfigFrom({ learningRate: 'fast', batchSize: 'auto' })).toEqual({ error: expect.stringMatching(/^Learning rate/) });
    expect(sftConfigFrom({ learningRate: '1e-4', batchSize: '2.5' })).toEqual({ error: expect.stringMatching(/^Batch size/) });
    expect(defaultTrainedName('hearth/tiny-random-llama', new Date('2026-11-27T00:12:34.567Z'))).toBe('tiny-random-llama-sft-20261127-001234');
    expect(defaultTrainedName('Qwen/Qwen2.5-0.5B-Instruct', new Date('2026-11-27T00:12:34Z'))).toMatch(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/);
  });

  it('writes parameter counts as people say them', async () => {
    const { formatParams } = await import('../../src/console/web/lib/format.js');
    expect([918_656, 1_100_000_000, 8_030_261_248, 260_000, 5_000, 12, null].map(formatParams)).toEqual(['0.92M', '1.1B', '8.0B', '0.26M', '5.0K', '12', '—']);
  });
});
