import { describe, expect, it } from 'vitest';
import { corpusWindows, HELD_OUT_EVERY, sftJsonl, sharedNgrams, shuffled, splitCorpus } from '../../src/cli/tour-data.js';
import { corpusText } from '../../src/cli/commands/tour.js';

describe('tour data', () => {
  it('holds out every eighth paragraph and never trains on it', () => {
    const { train, heldOut } = splitCorpus(corpusText());
    expect(heldOut.length).toBe(Math.floor((train.length + heldOut.length) / HELD_OUT_EVERY));
    const jsonl = sftJsonl(corpusWindows(train), 2);
    for (const p of heldOut) expect(jsonl).not.toContain(p.split(' ').slice(4, 12).join(' '));
  });

  it('cuts paragraphs into prompt + answer windows and repeats them once per pass, in a fixed order', () => {
    const w = corpusWindows(['one two three four five six seven eight nine ten eleven twelve'], 6, 2);
    expect(w).toEqual([{ prompt: 'one two', answer: 'three four five six' }, { prompt: 'seven eight', answer: 'nine ten eleven twelve' }]);
    const rows = sftJsonl(w, 3).trim().split('\n').map((l) => JSON.parse(l));
    expect(rows).toHaveLength(6);
    expect(rows[0].messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(sftJsonl(w, 3)).toBe(sftJsonl(w, 3));
    expect(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 1).sort()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 1)).not.toEqual(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 2));
  });

  it('counts the distinct word pairs an answer shares with the corpus', () => {
    expect(sharedNgrams('The lamp, the LAMP was lit; zq xv', 'an old lamp was lit by the lamp', 2).sort()).toEqual(['lamp was', 'the lamp', 'was lit']);
    expect(sharedNgrams('FFFF ildild', 'the lamp', 2)).toEqual([]);
  });
});
