// Test-only tiny deterministic "model" and byte-level tokenizer for the inference engine tests.
// The model's logits depend on every token of the sequence so far (through a rolling hash that
// it keeps as its "KV cache"), and it checks that the engine feeds positions in order: a
// scheduling bug (wrong pastLength, skipped or repeated chunk) throws or changes the output.

import type { ModelPort, StepItem, StepOutput, TokenizerPort } from '../../worker/inference/model-port.js';

/** Vocabulary: 0 = </s> (special, EOS), 1 = <|pad|> (special), then text pieces. */
export const TOY_PIECES: string[] = [
  '</s>', '<|pad|>',
  ...'abcdefghijklmnopqrstuvwxyz0123456789 {}[]":,.-+eE\\/\n_<>'.split(''),
  'ab', 'cd', 'true', 'false', 'null', '{"', '":', '",', '"}', ' "', 'name', 'age', 'STOP', 'ST', 'OP', '</', 'tool_call>', '<tool_call>',
  '\u00e9', 'caf',
];
/** Two tokens that each hold half of the UTF-8 bytes of 'é' (0xC3 0xA9). */
export const HALF_E1 = TOY_PIECES.length;
export const HALF_E2 = TOY_PIECES.length + 1;
export const TOY_VOCAB = TOY_PIECES.length + 2;

const enc = new TextEncoder();

export class ToyTokenizer implements TokenizerPort {
  readonly vocabSize = TOY_VOCAB;
  readonly eosTokenIds = [0];
  private readonly bytes: Uint8Array[] = [...TOY_PIECES.map((p) => enc.encode(p)), Uint8Array.of(0xc3), Uint8Array.of(0xa9)];

  isSpecial(id: number): boolean {
    return id === 0 || id === 1;
  }
  tokenBytes(id: number): Uint8Array {
    return this.bytes[id];
  }
  /** Greedy longest match over the pieces (specials never produced). */
  encode(text: string): number[] {
    const out: number[] = [];
    let i = 0;
    while (i < text.length) {
      let best = -1;
      for (let id = 2; id < TOY_PIECES.length; id++) {
        const p = TOY_PIECES[id];
        if (text.startsWith(p, i) && (best < 0 || p.length > TOY_PIECES[best].length)) best = id;
      }
      if (best < 0) throw new Error(`toy tokenizer cannot encode ${JSON.stringify(text[i])}`);
      out.push(best);
      i += TOY_PIECES[best].length;
    }
    return out;
  }
  decode(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    const skip = opts.skipSpecialTokens ?? true;
    const parts = ids.filter((id) => !(skip && this.isSpecial(id))).map((id) => this.bytes[id]);
    const all = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) {
      all.set(p, o);
      o += p.length;
    }
    return new TextDecoder().decode(all);
  }
}

function mix(h: number, x: number): number {
  h = Math.imul(h ^ x, 0x9e3779b1) >>> 0;
  return (h ^ (h >>> 15)) >>> 0;
}

export interface ToyModelOptions {
  maxContext?: number;
  mixedAdapterBatches?: boolean;
  /** Force these logits boosts: token → extra logit, applied every step (to make EOS likely etc.). */
  boost?: Map<number, number>;
  /** Logit scale: larger → peakier distributions. */
  scale?: number;
  /** Offer copyPrefix (prefix caching) to the engine. */
  prefixCopy?: boolean;
  /** Return a hidden state of this width (from the same rolling hash) with every step, so embeddings work. */
  hiddenSize?: number;
}

export class ToyModel implements ModelPort {
  readonly vocabSize = TOY_VOCAB;
  readonly maxContext: number;
  readonly mixedAdapterBatches: boolean;
  readonly hiddenSize?: number;
  /** seqId → rolling hash after each cached position (its length is the cached length). */
  readonly cache = new Map<number, { hashes: number[]; length: number; hash: number }>();
  readonly steps: StepItem[][] = [];
  readonly copyPrefix?: (from: number, to: number, length: number) => void;

  constructor(private readonly opts: ToyModelOptions = {}) {
    this.maxContext = opts.maxContext ?? 256;
    this.mixedAdapterBatches = opts.mixedAdapterBatches ?? true;
    if (opts.hiddenSize) this.hiddenSize = opts.hiddenSize;
    if (opts.prefixCopy)
      this.copyPrefix = (from, to, length) => {
        const c = this.cache.get(from);
        if (!c || c.length < length) throw new Error(`copyPrefix: seq ${from} holds ${c?.length ?? 0} < ${length}`);
        const hashes = c.hashes.slice(0, length);
        this.cache.set(to, { hashes, length, hash: hashes[length - 1] });
      };
  }

  async step(batch: StepItem[]): Promise<StepOutput[]> {
    this.steps.push(batch.map((b) => ({ ...b, tokens: [...b.tokens] })));
    if (!this.mixedAdapterBatches && new Set(batch.map((b) => b.adapter)).size > 1) throw new Error('mixed adapters in one step');
    await Promise.resolve();
    return batch.map((item) => {
      const c = this.cache.get(item.seqId) ?? { hashes: [], length: 0, hash: 17 };
      if (c.length !== item.pastLength) throw new Error(`seq ${item.seqId}: runner has ${c.length} cached, engine says ${item.pastLength}`);
      for (const t of item.tokens) c.hashes.push((c.hash = mix(c.hash, t + 1)));
      c.length += item.tokens.length;
      if (c.length > this.maxContext) throw new Error('context overflow');
      this.cache.set(item.seqId, c);
      const adapterSalt = item.adapter ? [...item.adapter].reduce((h, ch) => mix(h, ch.charCodeAt(0)), 1) : 0;
      const logits = new Float32Array(this.vocabSize);
      const scale = this.opts.scale ?? 4;
      for (let j = 0; j < this.vocabSize; j++) {
        logits[j] = (mix(mix(c.hash, j + 7), adapterSalt) / 2 ** 32 - 0.5) * scale;
        logits[j] += this.opts.boost?.get(j) ?? 0;
      }
      // Like a graph without a logits_lse output: the sampler computes it.
      const width = this.opts.hiddenSize;
      const hidden = width ? Float32Array.from({ length: width }, (_, j) => mix(mix(c.hash, j + 1000), adapterSalt) / 2 ** 32 - 0.5) : null;
      return { logits, logSumExp: NaN, hidden };
    });
  }

  free(seqId: number): void {
    this.cache.delete(seqId);
  }

  /** Any adapter name works: it salts the logits (see step). Names starting with "bad" fail. */
  loadAdapter(name: string): void {
    if (name.startsWith('bad')) throw new Error(`cannot read adapter ${name}`);
  }
}
