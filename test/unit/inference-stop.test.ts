import { describe, expect, it } from 'vitest';
import { IncrementalDetokenizer } from '../../worker/inference/detokenizer.js';
import { StopStringMatcher, earliestMatch, longestPartialSuffix } from '../../worker/inference/stop.js';
import { HALF_E1, HALF_E2, ToyTokenizer } from './inference-toy-model.js';

function feed(m: StopStringMatcher, pieces: string[]) {
  let out = '';
  for (const p of pieces) {
    const r = m.push(p);
    out += r.emit;
    if (r.stopped) return { out, stopped: r.stopped };
  }
  return { out: out + m.flush(), stopped: null };
}

describe('stop strings', () => {
  it('matches a stop string split across tokens and leaves it out', () => {
    expect(feed(new StopStringMatcher(['STOP']), ['Hello S', 'T', 'OP and more'])).toEqual({ out: 'Hello ', stopped: 'STOP' });
  });

  it('holds back text that may start a stop string, releases it when it does not', () => {
    const m = new StopStringMatcher(['###']);
    expect(m.push('a#').emit).toBe('a');
    expect(m.push('#').emit).toBe('');
    expect(m.push('b').emit).toBe('##b');
    expect(m.push('#').emit).toBe('');
    expect(m.flush()).toBe('#');
  });

  it('picks the earliest of several stop strings and can include it', () => {
    expect(feed(new StopStringMatcher(['bb', 'ab']), ['xa', 'bb'])).toEqual({ out: 'x', stopped: 'ab' });
    expect(feed(new StopStringMatcher(['END'], true), ['the E', 'ND'])).toEqual({ out: 'the END', stopped: 'END' });
  });

  it('partial suffix length', () => {
    expect(longestPartialSuffix('abcST', ['STOP'])).toBe(2);
    expect(longestPartialSuffix('abc', ['STOP'])).toBe(0);
    // Only a proper prefix counts (a whole stop string is a match, not something to hold back)…
    expect(longestPartialSuffix('xSTOP', ['STOP'])).toBe(0);
    expect(longestPartialSuffix('STO', ['STOP'])).toBe(3);
    // …never longer than the text, and the longest over all stop strings.
    expect(longestPartialSuffix('S', ['STOP'])).toBe(1);
    expect(longestPartialSuffix('abcS', ['STOP', 'cSx', 'bcSy'])).toBe(3);
    expect(longestPartialSuffix('abcS', ['bcSy', 'cSx', 'STOP'])).toBe(3);
  });

  it('at the same position the longest stop string wins, whatever their order; an earlier one beats a longer one', () => {
    expect(earliestMatch('say STOP now', ['ST', 'STOP'])).toEqual({ index: 4, stop: 'STOP' });
    expect(earliestMatch('say STOP now', ['STOP', 'ST'])).toEqual({ index: 4, stop: 'STOP' });
    expect(earliestMatch('say STOP now', ['OP now', 'y'])).toEqual({ index: 2, stop: 'y' });
    expect(earliestMatch('say STOP now', ['y', 'OP now'])).toEqual({ index: 2, stop: 'y' });
    expect(earliestMatch('say STOP now', ['zz'])).toBeNull();
  });

  it('refuses an empty stop string', () => {
    expect(() => new StopStringMatcher(['ok', ''])).toThrow('stop strings must not be empty');
  });

  it('after a match emits nothing more, and flush releases nothing', () => {
    const m = new StopStringMatcher(['STOP']);
    expect(m.push('aSTOPb')).toEqual({ emit: 'a', stopped: 'STOP' });
    expect(m.push('more STOP text')).toEqual({ emit: '', stopped: null });
    expect(m.flush()).toBe('');
  });

  it('flush empties what it held: later text starts afresh', () => {
    const m = new StopStringMatcher(['STOP']);
    expect(m.push('aST')).toEqual({ emit: 'a', stopped: null });
    expect(m.flush()).toBe('ST');
    expect(m.push('x')).toEqual({ emit: 'x', stopped: null });
  });
});

describe('incremental detokenizer', () => {
  it('waits for the second half of a split UTF-8 character', () => {
    const t = new ToyTokenizer();
    const d = new IncrementalDetokenizer(t);
    const ids = [...t.encode('caf'), HALF_E1, HALF_E2, ...t.encode(' ok')];
    const deltas = ids.map((id) => d.push(id));
    expect(deltas.join('')).toBe('café ok');
    expect(deltas[ids.indexOf(HALF_E1)]).toBe('');
    expect(deltas[ids.indexOf(HALF_E2)]).toBe('é');
  });

  it('skips special tokens', () => {
    const t = new ToyTokenizer();
    const d = new IncrementalDetokenizer(t, true, t.encode('hi'));
    expect([...t.encode('ab'), 0].map((id) => d.push(id)).join('')).toBe('ab');
  });
});

describe('stop strings (property)', () => {
  it('any split of the text into deltas gives the same output as matching the whole text', async () => {
    const fc = (await import('fast-check')).default;
    const alphabet = fc.constantFrom('a', 'b', 'S', 'T', 'O', 'P', ' ');
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 40 }).map((a) => a.join('')),
        fc.array(fc.array(alphabet, { minLength: 1, maxLength: 4 }).map((a) => a.join('')), { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(40), { maxLength: 10 }),
        (text, stops, cuts) => {
          const points = [...new Set(cuts.map((c) => Math.min(c, text.length)))].sort((a, b) => a - b);
          const bounds = [0, ...points, text.length];
          const pieces = bounds.slice(1).map((end, i) => text.slice(bounds[i], end));
          const got = feed(new StopStringMatcher(stops), pieces);
          // Reference: cut at the earliest stop string in the whole text.
          let cut = -1;
          let which: string | null = null;
          for (const s of stops) {
            const i = text.indexOf(s);
            if (i >= 0 && (cut < 0 || i < cut || (i === cut && s.length > which!.length))) [cut, which] = [i, s];
          }
          expect(got).toEqual(cut < 0 ? { out: text, stopped: null } : { out: text.slice(0, cut), stopped: which });
        },
      ),
      { numRuns: 300, seed: 42 },
    );
  });
});
