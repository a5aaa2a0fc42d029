// Incremental detokenizer: turns a growing list of token ids into text deltas. Decoding token by
// token is wrong for byte-level BPE (a character may span tokens; SentencePiece drops leading
// spaces), so we decode a small window of recent tokens and emit only what is new. Same scheme as
// vLLM/HF TGI: `prefixOffset` marks the window start, `readOffset` the tokens already emitted.

import type { TokenizerPort } from './model-port.js';

export class IncrementalDetokenizer {
  private ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(
    private readonly tokenizer: Pick<TokenizerPort, 'decode'>,
    private readonly skipSpecialTokens = true,
    /** A few prompt tokens give the first output token its left context (leading-space rules). */
    contextIds: readonly number[] = [],
  ) {
    const ctx = contextIds.slice(-5);
    this.ids = [...ctx];
    this.prefixOffset = 0;
    this.readOffset = ctx.length;
  }

  /** Adds one token and returns the text it completes ('' while a character is still partial). */
  push(id: number): string {
    this.ids.push(id);
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const prefix = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset), opts);
    const full = this.tokenizer.decode(this.ids.slice(this.prefixOffset), opts);
    // A trailing U+FFFD means the last token ended inside a multi-byte character: wait.
    if (full.length > prefix.length && !full.endsWith('\uFFFD')) {
      const delta = full.slice(prefix.length);
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return delta;
    }
    return '';
  }
}
