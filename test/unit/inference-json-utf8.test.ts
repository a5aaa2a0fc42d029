// Property test: whatever the vocabulary (random byte tokens, multi-byte characters split across tokens, stray
// continuation bytes, overlongs, surrogates, bytes above U+10FFFF), text sampled under a schema's grammar is
// well-formed UTF-8 and its strings hold minLength/maxLength counted in characters (code points), as JSON Schema
// counts them. Before the fix, a continuation byte was accepted whatever the lead byte, so a `maxLength: 10`
// string could decode to 12 characters (U+FFFD for each bad byte).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GrammarConstraint } from '../../worker/inference/json-constraint.js';
import { GrammarState } from '../../worker/inference/json-grammar.js';
import { compileSchema } from '../../src/domain/json-schema.js';
import type { TokenizerPort } from '../../worker/inference/model-port.js';
import { createRng } from '../../worker/inference/rng.js';

const enc = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Token 0 is EOS; the others are the given byte strings. A fresh object per vocabulary (the trie is cached per tokenizer). */
function byteTokenizer(pieces: Uint8Array[]): TokenizerPort {
  const bytes = [new Uint8Array(0), ...pieces];
  return {
    vocabSize: bytes.length,
    eosTokenIds: [0],
    isSpecial: (id) => id === 0,
    tokenBytes: (id) => bytes[id],
    encode: () => {
      throw new Error('not used');
    },
    decode: () => {
      throw new Error('not used');
    },
  };
}

/** Every byte as its own token, as in byte-level BPE vocabularies, so the grammar can always go on. */
const SINGLE_BYTES = Array.from({ length: 256 }, (_, i) => Uint8Array.of(i));

/** Multi-byte characters (2, 3 and 4 bytes) and the ill-formed sequences the grammar must refuse. */
const CHARS = ['é', 'ß', 'Ж', '中', '€', '😀', '𝄞', '\u{10FFFF}', '\u{FFFD}'];
const ILL_FORMED = [
  [0xed, 0xa0, 0x80], // surrogate U+D800
  [0xed, 0xbf, 0xbf], // surrogate U+DFFF
  [0xe0, 0x80, 0xaf], // overlong '/'
  [0xe0, 0x9f, 0xbf], // overlong
  [0xf0, 0x80, 0x80, 0xaf], // overlong
  [0xf0, 0x8f, 0xbf, 0xbf], // overlong
  [0xf4, 0x90, 0x80, 0x80], // U+110000
  [0xf5, 0x80, 0x80, 0x80], // beyond Unicode
  [0xc0, 0xaf], // overlong 2-byte
  [0xc1, 0xbf],
  [0x80],
  [0xbf],
  [0xff],
];

const pieceArb = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 4 }), // anything at all
  fc.uint8Array({ minLength: 1, maxLength: 3 }).map((a) => a.map((b) => 0x80 | (b & 0x3f))), // continuation bytes only
  fc.tuple(fc.constantFrom(...CHARS), fc.string({ unit: 'grapheme', maxLength: 3 })).map(([c, s]) => enc.encode(c + s)),
  fc.tuple(fc.constantFrom(...CHARS), fc.nat()).map(([c, cut]) => {
    const b = enc.encode(c);
    return cut % 2 ? b.slice(0, 1 + (cut % (b.length - 1 || 1))) : b.slice(1 + (cut % (b.length - 1 || 1))); // a character split in two
  }),
  fc.constantFrom(...ILL_FORMED).map((a) => Uint8Array.from(a)),
);

const lengthsArb = fc.tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 12 })).map(([a, b]) => ({ minLength: Math.min(a, b), maxLength: Math.max(a, b) }));

const schemaArb = fc.tuple(lengthsArb, lengthsArb, fc.boolean()).map(([s, t, withArray]) => ({
  type: 'object',
  properties: {
    s: { type: 'string', ...s },
    ...(withArray ? { t: { type: 'array', items: { type: 'string', ...t }, maxItems: 3 } } : { t: { type: 'string', minLength: t.minLength } }),
  },
  required: ['s', 't'],
  additionalProperties: false,
}));

/** Samples among the allowed tokens, leaning towards non-ASCII ones and closing quotes so runs stay short and varied. */
function sample(tok: TokenizerPort, constraint: GrammarConstraint, seed: number, maxSteps = 400): Uint8Array | null {
  const rng = createRng(seed);
  const out: number[] = [];
  for (let step = 0; step < maxSteps; step++) {
    const mask = constraint.allowedTokens();
    if (mask[0]) return Uint8Array.from(out);
    const allowed = [...mask.keys()].filter((id) => mask[id]);
    expect(allowed.length, 'the grammar must always leave a way on').toBeGreaterThan(0);
    const nonAscii = allowed.filter((id) => tok.tokenBytes(id).some((b) => b >= 0x80));
    const pool = nonAscii.length && rng.next() < 0.6 ? nonAscii : allowed;
    const id = pool[Math.floor(rng.next() * pool.length)];
    constraint.advance(id);
    out.push(...tok.tokenBytes(id));
  }
  return null;
}

function codePoints(s: string): number {
  return [...s].length;
}

describe('constrained strings are well-formed UTF-8', () => {
  it('refuses surrogates, overlongs, stray continuations and code points above U+10FFFF, accepts every valid character', () => {
    const str = compileSchema({ type: 'string' });
    for (const bad of ILL_FORMED) expect(GrammarState.start(str).feedBytes(Uint8Array.from([0x22, ...bad])), bad.map((b) => b.toString(16)).join(' ')).toBeNull();
    for (const c of [...CHARS, '\u{800}', '\u{D7FF}', '\u{E000}', '\u{10000}', '\u{80}', '\u{7FF}', '\u{FFFF}'])
      expect(GrammarState.start(str).feedBytes(enc.encode(JSON.stringify(c)))?.canEnd, c).toBe(true);
    // maxLength counts a 4-byte character once.
    const two = compileSchema({ type: 'string', maxLength: 2 });
    expect(GrammarState.start(two).feedBytes(enc.encode('"😀𝄞"'))?.canEnd).toBe(true);
    expect(GrammarState.start(two).feedBytes(enc.encode('"😀𝄞é'))).toBeNull();
  });

  it('random vocabularies and schemas: every sampled text decodes strictly and matches minLength/maxLength in characters', () => {
    let completed = 0;
    fc.assert(
      fc.property(fc.array(pieceArb, { minLength: 10, maxLength: 60 }), schemaArb, fc.integer({ min: 0, max: 2 ** 31 - 1 }), (pieces, schema, seed) => {
        const tok = byteTokenizer([...SINGLE_BYTES, ...pieces]);
        const bytes = sample(tok, new GrammarConstraint(tok, compileSchema(schema)), seed);
        if (bytes === null) return; // ran out of steps: nothing to check
        const text = strictUtf8.decode(bytes); // throws on ill-formed UTF-8
        const v = JSON.parse(text) as { s: string; t: string | string[] };
        expect(codePoints(v.s)).toBeGreaterThanOrEqual(schema.properties.s.minLength);
        expect(codePoints(v.s)).toBeLessThanOrEqual(schema.properties.s.maxLength);
        const t = schema.properties.t;
        const bounds = ('items' in t ? t.items : t) as { minLength: number; maxLength?: number };
        for (const x of Array.isArray(v.t) ? v.t : [v.t]) {
          expect(codePoints(x)).toBeGreaterThanOrEqual(bounds.minLength);
          expect(codePoints(x)).toBeLessThanOrEqual(bounds.maxLength ?? Infinity);
        }
        completed++;
      }),
      { numRuns: 300, seed: 42 },
    );
    expect(completed).toBeGreaterThan(200);
  });
});
