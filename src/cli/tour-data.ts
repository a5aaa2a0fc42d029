// What `hearth tour` trains on and how it judges the result, as plain functions (no I/O): the tour corpus
// (models/tour-corpus.txt) cut into SFT rows, whole paragraphs held out that it never trains on, the held-out
// text laid out as the rows are (ChatML, the demo model's template) for scoring, and the word n-grams a
// model's output shares with the corpus.

/** Settings the tour trains with, measured to make the demo model learn the corpus in well under a minute on 2 cores (models/README.md). */
export const TOUR_TRAINING = {
  /** Words per training row: the first PROMPT_WORDS are the user turn, the rest the assistant's answer. */
  windowWords: 40,
  promptWords: 4,
  /**
   * A window starts every STRIDE_WORDS words of a paragraph (they overlap): the same text at many offsets
   * teaches the model the corpus's word sequences rather than each row's position, which is what carries
   * over to paragraphs it never saw (measured: held-out loss 5.25 with windows every 5 words, 5.82 without overlap).
   */
  strideWords: 5,
  /** Each row appears this many times (in a fixed shuffled order per pass): SFT jobs make one pass over their data. */
  epochs: 3,
  batchSize: 8,
  learningRate: 5e-3,
} as const;

/** Every HELD_OUT_EVERY-th paragraph is kept out of training (the held-out part). */
export const HELD_OUT_EVERY = 8;
/** A window shorter than its prompt plus this many answer words is not a row (paragraph ends). */
export const MIN_ANSWER_WORDS = 8;

export interface CorpusSplit {
  train: string[];
  heldOut: string[];
}

/** Paragraphs (blank-line separated, whitespace folded), every HELD_OUT_EVERY-th one held out whole. Titles and short lines are skipped. */
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

/**
 * Windows of `windowWords` words of each paragraph, one starting every `strideWords` words: the first
 * `promptWords` ask, the rest answer. Windows with fewer than MIN_ANSWER_WORDS answer words are left out.
 */
export function corpusWindows(
  paragraphs: string[],
  windowWords: number = TOUR_TRAINING.windowWords,
  promptWords: number = TOUR_TRAINING.promptWords,
  strideWords: number = TOUR_TRAINING.strideWords,
): PromptAndAnswer[] {
  const out: PromptAndAnswer[] = [];
  for (const p of paragraphs) {
    const words = p.split(' ');
    for (let i = 0; i < words.length; i += strideWords) {
      const w = words.slice(i, i + windowWords);
      if (w.length < promptWords + MIN_ANSWER_WORDS) continue;
      out.push({ prompt: w.slice(0, promptWords).join(' '), answer: w.slice(promptWords).join(' ') });
    }
  }
  return out;
}

/** The first window of each held-out paragraph, laid out as a training row (what the held-out loss scores). */
export function heldOutWindows(heldOut: string[]): PromptAndAnswer[] {
  return heldOut.map((p) => {
    const w = p.split(' ').slice(0, TOUR_TRAINING.windowWords);
    return { prompt: w.slice(0, TOUR_TRAINING.promptWords).join(' '), answer: w.slice(TOUR_TRAINING.promptWords).join(' ') };
  });
}

/** ChatML's turn marker: one special token in a ChatML tokenizer, several pieces of text in others. */
export const CHATML_START = '<|im_start|>';

/**
 * A row as the model sees it in training, as plain text in ChatML (the demo model's chat template): `prefix`
 * is the user turn and the assistant header, `full` adds the answer. Scoring `full` with completions `echo`
 * and leaving out the tokens of `prefix` gives the answer's loss, the quantity SFT lowers.
 */
export function chatMlRow(row: PromptAndAnswer): { prefix: string; full: string } {
  const prefix = `${CHATML_START}user\n${row.prompt}<|im_end|>\n${CHATML_START}assistant\n`;
  return { prefix, full: prefix + row.answer };
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
