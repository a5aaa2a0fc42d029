// What `hearth tour` trains on and how it judges the result, as plain functions (no I/O): the demo corpus
// (models/tiny-corpus.txt) cut into SFT rows, a held-out part it never trains on, and the word n-grams a
// model's output shares with the corpus.

/** Settings the tour trains with, measured to make the demo model learn the corpus in well under a minute on 2 cores (models/README.md). */
export const TOUR_TRAINING = {
  /** Words per training row: the first PROMPT_WORDS are the user turn, the rest the assistant's answer. */
  windowWords: 40,
  promptWords: 4,
  /** Each row appears this many times (in a fixed shuffled order per pass): SFT jobs make one pass over their data. */
  epochs: 20,
  batchSize: 2,
  learningRate: 5e-3,
} as const;

/** Every HELD_OUT_EVERY-th paragraph is kept out of training (the held-out part). */
export const HELD_OUT_EVERY = 8;

export interface CorpusSplit {
  train: string[];
  heldOut: string[];
}

/** Paragraphs (blank-line separated, whitespace folded), every HELD_OUT_EVERY-th one held out. Titles and short lines are skipped. */
export function splitCorpus(text: string): CorpusSplit {
  const paragraphs = text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p.split(' ').length >= 8);
  return {
    train: paragraphs.filter((_, i) => i % HELD_OUT_EVERY !== HELD_OUT_EVERY - 1),
    heldOut: paragraphs.filter((_, i) => i % HELD_OUT_EVERY === HELD_OUT_EVERY - 1),
  };
}

export interface PromptAndAnswer {
  prompt: string;
  answer: string;
}

/** Windows of `windowWords` words of each paragraph: the first `promptWords` ask, the rest answer. */
export function corpusWindows(paragraphs: string[], windowWords: number = TOUR_TRAINING.windowWords, promptWords: number = TOUR_TRAINING.promptWords): PromptAndAnswer[] {
  const out: PromptAndAnswer[] = [];
  for (const p of paragraphs) {
    const words = p.split(' ');
    for (let i = 0; i < words.length; i += windowWords) {
      const w = words.slice(i, i + windowWords);
      if (w.length < promptWords + 4) continue;
      out.push({ prompt: w.slice(0, promptWords).join(' '), answer: w.slice(promptWords).join(' ') });
    }
  }
  return out;
}

/** A deterministic permutation (mulberry32-driven Fisher–Yates), so every run trains on the same order. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The SFT file (ART's train.jsonl: one `{messages}` per line): every window, `epochs` times, each pass in its own order. */
export function sftJsonl(windows: PromptAndAnswer[], epochs: number = TOUR_TRAINING.epochs): string {
  const lines: string[] = [];
  for (let e = 0; e < epochs; e++) {
    for (const w of shuffled(windows, e + 1)) {
      lines.push(JSON.stringify({ messages: [{ role: 'user', content: w.prompt }, { role: 'assistant', content: w.answer }] }));
    }
  }
  return lines.join('\n') + '\n';
}

/** Lower-case words (letters and apostrophes): what n-grams are made of. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[a-z']+/g) ?? [];
}

/** The distinct word n-grams of `text`, joined with spaces. */
export function ngrams(text: string, n: number): Set<string> {
  const w = words(text);
  const out = new Set<string>();
  for (let i = 0; i + n <= w.length; i++) out.add(w.slice(i, i + n).join(' '));
  return out;
}

/** The distinct word n-grams of `output` that also occur in `corpus`. */
export function sharedNgrams(output: string, corpus: string, n: number): string[] {
  const known = ngrams(corpus, n);
  return [...ngrams(output, n)].filter((g) => known.has(g));
}
