import { describe, expect, it } from 'vitest';
import { chatMlRow, corpusWindows, HELD_OUT_EVERY, heldOutWindows, sftJsonl, sharedNgrams, shuffled, splitCorpus, TOUR_TRAINING } from '../../src/cli/tour-data.js';
import { corpusText } from '../../src/cli/commands/tour.js';

describe('tour data', () => {
  it('holds out every eighth paragraph whole and never trains on any of its text', () => {
    const { train, heldOut } = splitCorpus(corpusText());
    expect(heldOut.length).toBe(Math.floor((train.length + heldOut.length) / HELD_OUT_EVERY));
    expect(heldOut.length).toBeGreaterThanOrEqual(8);
    for (const p of heldOut) expect(train).not.toContain(p);
    // Every row is cut from a training paragraph.
    const rows = sftJsonl(corpusWindows(train), 1).trim().split('\n').map((l) => JSON.parse(l));
    for (const r of rows) expect(train.some((p) => p.includes(`${r.messages[0].content} ${r.messages[1].content}`))).toBe(true);
    // The corpus repeats phrases on purpose, yet the held-out text is mostly new: of its 8-word runs, under a
    // tenth occur in the rows (33 of 598 at the time of writing).
    const jsonl = rows.map((r) => `${r.messages[0].content} ${r.messages[1].content}`).join('\n');
    let runs = 0;
    let seen = 0;
    for (const p of heldOut) {
      const w = p.split(' ');
      for (let i = 0; i + 8 <= w.length; i++, runs++) if (jsonl.includes(w.slice(i, i + 8).join(' '))) seen++;
    }
    expect(seen / runs).toBeLessThan(0.1);
  });

  it('cuts paragraphs into overlapping prompt + answer windows and repeats them once per pass, in a fixed order', () => {
    const words = Array.from({ length: 20 }, (_, i) => `w${i}`);
    const w = corpusWindows([words.join(' ')], 12, 2, 5);
    // Starts 0, 5 and 10 (10 words: 2 + 8 answer words); 15 is too short to be a row.
    expect(w).toEqual([
      { prompt: 'w0 w1', answer: words.slice(2, 12).join(' ') },
      { prompt: 'w5 w6', answer: words.slice(7, 17).join(' ') },
      { prompt: 'w10 w11', answer: words.slice(12, 20).join(' ') },
    ]);
    const rows = sftJsonl(w, 3).trim().split('\n').map((l) => JSON.parse(l));
    expect(rows).toHaveLength(9);
    expect(rows[0].messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(sftJsonl(w, 3)).toBe(sftJsonl(w, 3));
    expect(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 1).sort()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 1)).not.toEqual(shuffled([1, 2, 3, 4, 5, 6, 7, 8], 2));
  });

  it('lays out held-out paragraphs as training rows, in ChatML text for the server to score', () => {
    const paragraph = Array.from({ length: 50 }, (_, i) => `w${i}`).join(' ');
    const [row] = heldOutWindows([paragraph]);
    expect(row.prompt.split(' ')).toHaveLength(TOUR_TRAINING.promptWords);
    expect((row.prompt + ' ' + row.answer).split(' ')).toHaveLength(TOUR_TRAINING.windowWords);
    const { prefix, full } = chatMlRow({ prompt: 'There was once', answer: 'a lamp.' });
    expect(prefix).toBe('<|im_start|>user\nThere was once<|im_end|>\n<|im_start|>assistant\n');
    expect(full).toBe(prefix + 'a lamp.');
  });

  it('counts the distinct word pairs an answer shares with the corpus', () => {
    expect(sharedNgrams('The lamp, the LAMP was lit; zq xv', 'an old lamp was lit by the lamp', 2).sort()).toEqual(['lamp was', 'the lamp', 'was lit']);
    expect(sharedNgrams('FFFF ildild', 'the lamp', 2)).toEqual([]);
  });
});
