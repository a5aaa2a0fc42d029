// Builds a Hugging Face tokenizer.json (+ tokenizer_config.json fields) from GGUF `tokenizer.ggml.*`
// metadata, so GGUF models are tokenized by the same `tokenizers` code path as HF folders.
//  - "llama": SentencePiece BPE with byte fallback → HF BPE model with merges derived from the
//    piece scores (llama.cpp merges the adjacent pair whose concatenation has the best score;
//    ranking merges by that score gives the same result).
//  - "gpt2": byte-level BPE with explicit merges and a pre-tokenizer regex chosen by tokenizer.ggml.pre.
import type { GgufValue } from './gguf-reader.js';

const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

const PRE_TOKENIZER_REGEX: Record<string, string> = {
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
const PRE_ALIASES: Record<string, string> = {
  default: 'gpt2', 'gpt-2': 'gpt2', gpt2: 'gpt2', 'llama-bpe': 'llama3', llama3: 'llama3', 'smaug-bpe': 'llama3', qwen2: 'qwen2',
};

export interface GgufTokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  /** tokenizer_config.json contents (special tokens, add_bos_token, chat_template). */
  tokenizerConfig: Record<string, unknown>;
}

function meta<T extends GgufValue>(md: Map<string, GgufValue>, key: string): T | undefined {
  return md.get(key) as T | undefined;
}

/** GGUF uses -1 / 0xFFFFFFFF for "none". */
function optionalId(v: GgufValue | undefined, vocabSize: number): number | null {
  if (typeof v !== 'number' || v < 0 || v >= vocabSize) return null;
  return v;
}

export function buildTokenizerFromGguf(md: Map<string, GgufValue>): GgufTokenizerFiles {
  const kind = meta<string>(md, 'tokenizer.ggml.model');
  const tokens = meta<string[]>(md, 'tokenizer.ggml.tokens');
  if (!kind || !tokens) throw new Error('GGUF file has no tokenizer (tokenizer.ggml.model / tokenizer.ggml.tokens missing)');
  const types = meta<number[]>(md, 'tokenizer.ggml.token_type') ?? tokens.map(() => TOKEN_TYPE.normal);
  const n = tokens.length;
  const bos = optionalId(meta(md, 'tokenizer.ggml.bos_token_id'), n);
  const eos = optionalId(meta(md, 'tokenizer.ggml.eos_token_id'), n);
  const unk = optionalId(meta(md, 'tokenizer.ggml.unknown_token_id'), n);
  const pad = optionalId(meta(md, 'tokenizer.ggml.padding_token_id'), n);
  const addBos = (meta<boolean>(md, 'tokenizer.ggml.add_bos_token') ?? kind === 'llama') && bos !== null;
  const addEos = (meta<boolean>(md, 'tokenizer.ggml.add_eos_token') ?? false) && eos !== null;

  const addedTokens = [];
  for (let id = 0; id < n; id++) {
    const t = types[id];
    const special = t === TOKEN_TYPE.control || t === TOKEN_TYPE.unknown || id === bos || id === eos;
    if (special || t === TOKEN_TYPE.userDefined) {
      addedTokens.push({ id, content: tokens[id], single_word: false, lstrip: false, rstrip: false, normalized: false, special });
    }
  }
  const vocab: Record<string, number> = {};
  for (let id = 0; id < n; id++) if (!(tokens[id] in vocab)) vocab[tokens[id]] = id;

  const postProcessor = templateProcessor(addBos ? tokens[bos!] : null, addBos ? bos! : null, addEos ? tokens[eos!] : null, addEos ? eos! : null);
  let json: Record<string, unknown>;
  if (kind === 'llama') {
    const scores = meta<number[]>(md, 'tokenizer.ggml.scores');
    if (!scores) throw new Error('GGUF SentencePiece tokenizer has no tokenizer.ggml.scores');
    const addSpacePrefix = meta<boolean>(md, 'tokenizer.ggml.add_space_prefix') ?? true;
    json = {
      version: '1.0', truncation: null, padding: null,
      added_tokens: addedTokens,
      normalizer: { type: 'Sequence', normalizers: [
        ...(addSpacePrefix ? [{ type: 'Prepend', prepend: '▁' }] : []),
        { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
      ] },
      pre_tokenizer: null,
      post_processor: postProcessor,
      decoder: { type: 'Sequence', decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' }, { type: 'Fuse' },
        ...(addSpacePrefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
      ] },
      model: {
        type: 'BPE', dropout: null, unk_token: unk !== null ? tokens[unk] : null,
        continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
        vocab, merges: mergesFromScores(tokens, scores, types),
      },
    };
  } else if (kind === 'gpt2') {
    const merges = meta<string[]>(md, 'tokenizer.ggml.merges');
    if (!merges) throw new Error('GGUF byte-level BPE tokenizer has no tokenizer.ggml.merges');
    const preName = meta<string>(md, 'tokenizer.ggml.pre') ?? 'default';
    const pre = PRE_ALIASES[preName];
    if (!pre) throw new Error(`unsupported GGUF pre-tokenizer "${preName}" (supported: ${Object.keys(PRE_ALIASES).join(', ')})`);
    json = {
      version: '1.0', truncation: null, padding: null,
      added_tokens: addedTokens,
      normalizer: pre === 'qwen2' ? { type: 'NFC' } : null,
      pre_tokenizer: { type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: PRE_TOKENIZER_REGEX[pre] }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      ] },
      post_processor: postProcessor ?? { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: {
        type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: false, byte_fallback: false, ignore_merges: pre === 'llama3',
        vocab, merges: merges.map((m) => splitMerge(m)),
      },
    };
  } else {
    throw new Error(`unsupported GGUF tokenizer model "${kind}" (supported: llama (SentencePiece), gpt2 (byte-level BPE))`);
  }

  const tokenizerConfig: Record<string, unknown> = {
    add_bos_token: addBos, add_eos_token: addEos,
    bos_token: bos !== null ? tokens[bos] : null,
    eos_token: eos !== null ? tokens[eos] : null,
    unk_token: unk !== null ? tokens[unk] : null,
    pad_token: pad !== null ? tokens[pad] : null,
    clean_up_tokenization_spaces: false,
    tokenizer_class: kind === 'llama' ? 'LlamaTokenizerFast' : 'PreTrainedTokenizerFast',
  };
  const chatTemplate = meta<string>(md, 'tokenizer.chat_template');
  if (chatTemplate) tokenizerConfig.chat_template = chatTemplate;
  return { tokenizerJson: json, tokenizerConfig };
}

function splitMerge(m: string): [string, string] {
  const i = m.indexOf(' ', 1); // a merge's left side is never empty; tokens themselves contain no raw spaces in byte-level BPE
  if (i < 0) throw new Error(`bad GGUF merge entry "${m}"`);
  return [m.slice(0, i), m.slice(i + 1)];
}

function templateProcessor(bosTok: string | null, bosId: number | null, eosTok: string | null, eosId: number | null): Record<string, unknown> | null {
  if (bosTok === null && eosTok === null) return null;
  const single: unknown[] = [];
  const special: Record<string, unknown> = {};
  if (bosTok !== null) { single.push({ SpecialToken: { id: bosTok, type_id: 0 } }); special[bosTok] = { id: bosTok, ids: [bosId], tokens: [bosTok] }; }
  single.push({ Sequence: { id: 'A', type_id: 0 } });
  if (eosTok !== null) { single.push({ SpecialToken: { id: eosTok, type_id: 0 } }); special[eosTok] = { id: eosTok, ids: [eosId], tokens: [eosTok] }; }
  const pair = [...single, ...single.map((p) => (JSON.stringify(p).includes('"A"') ? { Sequence: { id: 'B', type_id: 1 } } : p))];
  return { type: 'TemplateProcessing', single, pair, special_tokens: special };
}

/**
 * SentencePiece BPE → HF merges: every split of a normal piece into two vocab pieces is a merge,
 * ranked by the merged piece's score (higher first), ties by the pieces' ids (as HF's extractor does).
 */
export function mergesFromScores(tokens: string[], scores: number[], types: number[]): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, i) => { if (!ids.has(t)) ids.set(t, i); });
  const found: { l: string; r: string; score: number; lid: number; rid: number }[] = [];
  for (let id = 0; id < tokens.length; id++) {
    if (types[id] !== TOKEN_TYPE.normal && types[id] !== TOKEN_TYPE.userDefined) continue;
    const chars = Array.from(tokens[id]);
    for (let cut = 1; cut < chars.length; cut++) {
      const l = chars.slice(0, cut).join('');
      const r = chars.slice(cut).join('');
      const lid = ids.get(l), rid = ids.get(r);
      if (lid !== undefined && rid !== undefined) found.push({ l, r, score: scores[id], lid, rid });
    }
  }
  found.sort((a, b) => b.score - a.score || a.lid - b.lid || a.rid - b.rid);
  return found.map((m) => [m.l, m.r]);
}
