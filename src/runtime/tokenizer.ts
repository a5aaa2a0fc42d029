// Tokenizer: encoding through the HF `tokenizers` package (tokenizer.json), decoding through our own
// token → bytes table so that decoding is synchronous and incremental decoding never splits a
// UTF-8 character (TextDecoder in streaming mode holds back incomplete sequences).
import { Tokenizer as HfTokenizer } from 'tokenizers';
import { unicodeToByte } from './byte-level.js';

export interface TokenizerFiles {
  /** tokenizer.json contents. */
  tokenizerJson: Record<string, any>;
  /** tokenizer_config.json contents (may be empty). */
  tokenizerConfig: Record<string, any>;
}

type DecodeStyle = 'byte-level' | 'sentencepiece';

/** Stateless use only (no `stream: true`): one decoder serves every whole-sequence decode. */
const UTF8 = new TextDecoder('utf-8', { fatal: false });


function findDecoders(decoder: any): any[] {
  if (!decoder) return [];
  if (decoder.type === 'Sequence') return decoder.decoders.flatMap(findDecoders);
  return [decoder];
}

export class Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  readonly specialIds: Set<number>;
  /** Whether decoding drops one leading space at the start of a text (SentencePiece "dummy prefix"). */
  readonly stripsLeadingSpace: boolean;
  private readonly bytes: Uint8Array[];
  private readonly hf: HfTokenizer;

  constructor(readonly files: TokenizerFiles) {
    const json = files.tokenizerJson;
    this.hf = HfTokenizer.fromString(JSON.stringify(json));
    const decoders = findDecoders(json.decoder);
    const types = decoders.map((d) => d.type);
    let style: DecodeStyle;
    if (types.includes('ByteLevel')) style = 'byte-level';
    else if (types.includes('ByteFallback') || types.includes('Metaspace') || types.includes('Replace')) style = 'sentencepiece';
    else throw new Error(`unsupported tokenizer decoder ${JSON.stringify(types)} (supported: ByteLevel, SentencePiece-style)`);
    const strip = decoders.find((d) => d.type === 'Strip');
    const metaspace = decoders.find((d) => d.type === 'Metaspace');
    this.stripsLeadingSpace = (strip?.start ?? 0) > 0 || (metaspace !== undefined && metaspace.prepend_scheme !== 'never' && metaspace.add_prefix_space !== false);

    const vocabEntries: [string, number][] = Array.isArray(json.model?.vocab)
      ? (json.model.vocab as [string, number][]).map(([piece], id) => [piece, id])
      : Object.entries(json.model?.vocab ?? {}) as [string, number][];
    const added: { id: number; content: string; special: boolean }[] = json.added_tokens ?? [];
    // A loop, not Math.max(...ids): spreading a 128k–152k vocabulary (Llama 3, Qwen) overflows the call stack.
    let size = 0;
    for (const [, id] of vocabEntries) size = Math.max(size, id + 1);
    for (const a of added) size = Math.max(size, a.id + 1);
    this.vocabSize = size;
    this.bytes = new Array(size).fill(new Uint8Array(0));
    const enc = new TextEncoder();
    const byteLevel = style === 'byte-level' ? unicodeToByte() : null;
    for (const [piece, id] of vocabEntries) {
      if (byteLevel) {
        this.bytes[id] = Uint8Array.from(Array.from(piece, (ch) => byteLevel.get(ch.codePointAt(0)!) ?? 0x3f));
      } else {
        const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
        this.bytes[id] = m ? Uint8Array.of(parseInt(m[1], 16)) : enc.encode(piece.replaceAll('▁', ' '));
      }
    }
    this.specialIds = new Set();
    for (const a of added) {
      this.bytes[a.id] = enc.encode(a.content);
      if (a.special) this.specialIds.add(a.id);
    }
    const idOf = (v: unknown): number | null => {
      const tok = typeof v === 'string' ? v : (v as { content?: string } | null)?.content;
      return tok ? this.hf.tokenToId(tok) ?? null : null;
    };
    this.bosTokenId = idOf(files.tokenizerConfig.bos_token);
    this.eosTokenId = idOf(files.tokenizerConfig.eos_token);
  }

  /** Encode text. With addSpecialTokens, the tokenizer's post-processor adds BOS/EOS as the model expects. */
  async encode(text: string, opts: { addSpecialTokens?: boolean } = {}): Promise<number[]> {
    const e = await this.hf.encode(text, null, { addSpecialTokens: opts.addSpecialTokens ?? true });
    return e.getIds();
  }

  idToToken(id: number): string | null { return this.hf.idToToken(id); }
  tokenToId(token: string): number | null { return this.hf.tokenToId(token) ?? null; }

  /** Raw bytes of one token (empty for ids the tokenizer does not know). */
  tokenBytes(id: number): Uint8Array { return this.bytes[id] ?? new Uint8Array(0); }

  /**
   * Decode a whole sequence (as HF `decode(ids, skip_special_tokens)` does): the tokens' bytes joined, then
   * one UTF-8 decode (a partial character at the end becomes U+FFFD). The detokenizer calls this twice per
   * generated token, so it reuses one decoder: constructing a TextDecoder per call was ~3% of a worker's time.
   */
  decode(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    const skip = opts.skipSpecialTokens ?? true;
    const parts: Uint8Array[] = [];
    let size = 0;
    let strip = this.stripsLeadingSpace;
    for (const id of ids) {
      if (skip && this.specialIds.has(id)) continue;
      let b = this.tokenBytes(id);
      if (strip && b.length > 0) {
        if (b[0] === 0x20) b = b.subarray(1);
        strip = false;
      }
      parts.push(b);
      size += b.length;
    }
    const all = new Uint8Array(size);
    let at = 0;
    for (const b of parts) {
      all.set(b, at);
      at += b.length;
    }
    return UTF8.decode(all);
  }

  /**
   * Incremental decoder: push ids, get text deltas. `atStart` = the ids begin a text (so the
   * SentencePiece dummy-prefix space is dropped); pass false when continuing after a prompt.
   */
  streamDecoder(opts: { skipSpecialTokens?: boolean; atStart?: boolean } = {}): StreamDecoder {
    return new StreamDecoder(this, opts.skipSpecialTokens ?? true, (opts.atStart ?? true) && this.stripsLeadingSpace);
  }
}

/** Turns a stream of token ids into text deltas that never end inside a UTF-8 character. */
export class StreamDecoder {
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false });
  constructor(private readonly tok: Tokenizer, private readonly skipSpecial: boolean, private stripNextSpace: boolean) {}

  push(id: number): string {
    if (this.skipSpecial && this.tok.specialIds.has(id)) return '';
    let bytes = this.tok.tokenBytes(id);
    if (this.stripNextSpace && bytes.length > 0) {
      if (bytes[0] === 0x20) bytes = bytes.subarray(1);
      this.stripNextSpace = false;
    }
    return this.utf8.decode(bytes, { stream: true });
  }

  /** End of stream: emits U+FFFD for a dangling partial character, if any. */
  flush(): string {
    return this.utf8.decode();
  }
}
