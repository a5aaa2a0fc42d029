// A small deterministic byte-level BPE trainer that writes a standard tokenizer.json (GPT-2 style:
// ByteLevel pre-tokenizer + decoder, every byte in the base vocabulary, so nothing is ever unknown).
// Used for Hearth's generated demo models; the `tokenizers` package's own trainer exposes no
// vocab size or alphabet options in its Node binding.
import { byteToUnicode } from './byte-level.js';

export const GPT2_SPLIT_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export interface BpeTrainOptions {
  /** Target vocabulary size including the 256 bytes and the special tokens. */
  vocabSize: number;
  specialTokens: string[];
  /** Ignore pairs seen fewer times than this (default 2). */
  minFrequency?: number;
}

export interface TrainedBpe {
  vocab: Map<string, number>;
  merges: [string, string][];
  specialTokens: { content: string; id: number }[];
}

export function trainByteLevelBpe(text: string, opts: BpeTrainOptions): TrainedBpe {
  const b2u = byteToUnicode();
  const enc = new TextEncoder();
  const wordCounts = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(GPT2_SPLIT_REGEX, 'gu'))) {
    const w = Array.from(enc.encode(m[0]), (b) => b2u[b]).join('');
    wordCounts.set(w, (wordCounts.get(w) ?? 0) + 1);
  }
  // Words as symbol arrays, in a fixed order so training is deterministic.
  const words = [...wordCounts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([w, c]) => ({ syms: Array.from(w), count: c }));
  const vocab = new Map<string, number>();
  for (let b = 0; b < 256; b++) vocab.set(b2u[b], b);
  const merges: [string, string][] = [];
  const budget = opts.vocabSize - 256 - opts.specialTokens.length;
  const minFreq = opts.minFrequency ?? 2;
  while (merges.length < budget) {
    const pairs = new Map<string, number>();
    for (const w of words)
      for (let i = 0; i + 1 < w.syms.length; i++) {
        const key = w.syms[i] + '\u0000' + w.syms[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + w.count);
      }
    let best: string | null = null;
    let bestCount = 0;
    for (const [k, c] of pairs) if (c > bestCount || (c === bestCount && best !== null && k < best)) { best = k; bestCount = c; }
    if (best === null || bestCount < minFreq) break;
    const [l, r] = best.split('\u0000');
    const merged = l + r;
    merges.push([l, r]);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const w of words) {
      if (w.syms.length < 2) continue;
      const out: string[] = [];
      for (let i = 0; i < w.syms.length; i++) {
        if (i + 1 < w.syms.length && w.syms[i] === l && w.syms[i + 1] === r) { out.push(merged); i++; } else out.push(w.syms[i]);
      }
      w.syms = out;
    }
  }
  const specialTokens = opts.specialTokens.map((content) => ({ content, id: vocab.size + opts.specialTokens.indexOf(content) }));
  return { vocab, merges, specialTokens };
}

/** A tokenizer.json for a trained byte-level BPE; BOS (if given) is added by the post-processor. */
export function byteLevelTokenizerJson(bpe: TrainedBpe, bosToken: string | null): Record<string, unknown> {
  const vocab: Record<string, number> = Object.fromEntries(bpe.vocab);
  for (const s of bpe.specialTokens) vocab[s.content] = s.id;
  const bos = bosToken ? bpe.specialTokens.find((s) => s.content === bosToken) : undefined;
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: bpe.specialTokens.map((s) => ({ id: s.id, content: s.content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: GPT2_SPLIT_REGEX }, behavior: 'Isolated', invert: false },
      byteLevel,
    ] },
    post_processor: bos
      ? { type: 'TemplateProcessing',
          single: [{ SpecialToken: { id: bos.content, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          pair: [{ SpecialToken: { id: bos.content, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: bos.content, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: { [bos.content]: { id: bos.content, ids: [bos.id], tokens: [bos.content] } } }
      : byteLevel,
    decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: bpe.merges },
  };
}
