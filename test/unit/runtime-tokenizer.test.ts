// Tokenizer wrapper: encode/decode round trips, incremental decoding that never splits a UTF-8
// character, special tokens, and chat templates (model template with tools, ChatML fallback).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { sharedPath } from '../helpers/shared.js';
import { Tokenizer } from '../../src/runtime/tokenizer.js';
import { CHATML_TEMPLATE, chatTemplateFromConfig } from '../../src/runtime/chat-template.js';
import { byteLevelTokenizerJson, trainByteLevelBpe } from '../../src/runtime/bpe-trainer.js';
import { SPECIAL_TOKENS, TINY_CHAT_TEMPLATE, tinyTokenizer } from '../../src/synthetic-models/tiny-model.js';

const tiny = () => new Tokenizer({ tokenizerJson: tinyTokenizer().json as Record<string, any>, tokenizerConfig: { bos_token: '<s>', eos_token: '</s>' } });

describe('byte-level BPE (generated models)', () => {
  it('trains deterministically and learns merges from the corpus', () => {
    const text = 'the cat sat on the mat. the cat ran. the end.';
    const a = trainByteLevelBpe(text, { vocabSize: 300, specialTokens: ['<s>'] });
    const b = trainByteLevelBpe(text, { vocabSize: 300, specialTokens: ['<s>'] });
    expect(a.merges).toEqual(b.merges);
    expect(a.merges[0]).toEqual(['a', 't']); // cat, sat, mat, cat: the most frequent pair
    expect(a.vocab.size).toBeGreaterThan(256);
    expect(a.vocab.size).toBeLessThanOrEqual(299);
  });

  it('round-trips any text, adds BOS, and knows its special tokens', async () => {
    const t = tiny();
    const text = 'The lamp on the hill! ünïcødé 日本語 🎉\n\ttabs  and  spaces';
    const ids = await t.encode(text);
    expect(ids[0]).toBe(t.bosTokenId);
    expect(ids.length).toBeLessThan(new TextEncoder().encode(text).length); // merges are used
    expect(t.decode(ids)).toBe(text);
    expect(t.decode(ids, { skipSpecialTokens: false })).toBe('<s>' + text);
    const noBos = await t.encode('hill', { addSpecialTokens: false });
    expect(noBos).not.toContain(t.bosTokenId);
    const imStart = t.tokenToId('<|im_start|>')!;
    expect(await t.encode('<|im_start|>user', { addSpecialTokens: false })).toContain(imStart);
  });

  it('stream decoding emits whole characters only and concatenates to the full decode', async () => {
    const t = tiny();
    const text = 'a🎉b日本ü';
    const ids = await t.encode(text, { addSpecialTokens: false });
    // Feed byte tokens one at a time: the 4-byte emoji must not appear until complete.
    const d = t.streamDecoder();
    const pieces = ids.map((id) => d.push(id));
    pieces.push(d.flush());
    expect(pieces.join('')).toBe(text);
    for (const p of pieces) expect(p).not.toContain('\uFFFD');
    const emojiBytes = Array.from(new TextEncoder().encode('🎉'));
    const d2 = t.streamDecoder();
    const byteIds = emojiBytes.map((b) => t.tokenToId(String.fromCodePoint(b2u(b)))!);
    expect(byteIds.map((id) => d2.push(id))).toEqual(['', '', '', '🎉']);
  });
});

describe('whole-sequence decode', () => {
  it('equals the stream decoder joined, on random ids (partial characters, special tokens)', () => {
    const t = tiny();
    let x = 12345;
    const rand = (n: number) => ((x = (x * 1103515245 + 12345) % 2 ** 31), x % n);
    for (let k = 0; k < 300; k++) {
      const ids = Array.from({ length: 1 + rand(12) }, () => rand(t.vocabSize));
      for (const skipSpecialTokens of [true, false]) {
        const d = t.streamDecoder({ skipSpecialTokens });
        expect(t.decode(ids, { skipSpecialTokens })).toBe(ids.map((id) => d.push(id)).join('') + d.flush());
      }
    }
  });
});

function b2u(b: number): number {
  if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return b;
  let n = 0;
  for (let x = 0; x < b; x++) if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) n++;
  return 256 + n;
}

describe('a real byte-level tokenizer.json (GPT-2)', () => {
  it('decodes like the reference tokenizer', async () => {
    const GPT2 = sharedPath('models', 'tiny-gpt2') + '/';
    const t = new Tokenizer({ tokenizerJson: JSON.parse(readFileSync(GPT2 + 'tokenizer.json', 'utf8')), tokenizerConfig: JSON.parse(readFileSync(GPT2 + 'tokenizer_config.json', 'utf8')) });
    const text = "Hello world, it's 2024! Ünïcode ✓";
    const ids = await t.encode(text);
    expect(ids.slice(0, 2)).toEqual([15496, 995]); // "Hello", " world"
    expect(t.decode(ids)).toBe(text);
  });
});

describe('chat templates', () => {
  it('renders the model template with tools and a generation prompt', () => {
    const tpl = chatTemplateFromConfig({ chat_template: TINY_CHAT_TEMPLATE, bos_token: '<s>', eos_token: '</s>' });
    const out = tpl.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true, tools: [{ type: 'function', function: { name: 'get_time' } }] });
    expect(out).toBe('<|im_start|>system\nYou may call these tools:\n{"type": "function", "function": {"name": "get_time"}}\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    expect(tpl.render([{ role: 'user', content: 'Hi' }])).toBe('<|im_start|>user\nHi<|im_end|>\n');
  });

  it('falls back to ChatML without a template, and passes special tokens and kwargs', () => {
    expect(chatTemplateFromConfig({}).source).toBe(CHATML_TEMPLATE);
    const tpl = chatTemplateFromConfig({ chat_template: '{{ bos_token }}{% if enable_thinking %}T{% endif %}{{ messages[0].content }}', bos_token: { content: '<s>' } });
    expect(tpl.render([{ role: 'user', content: 'x' }], { kwargs: { enable_thinking: true } })).toBe('<s>Tx');
  });

  it('picks the default from a list of named templates', () => {
    const tpl = chatTemplateFromConfig({ chat_template: [{ name: 'tool_use', template: 'T' }, { name: 'default', template: 'D' }] });
    expect(tpl.render([])).toBe('D');
  });

  it('special token list matches the generated tokenizer', () => {
    const t = tiny();
    for (const s of SPECIAL_TOKENS) expect(t.specialIds.has(t.tokenToId(s)!)).toBe(true);
  });
});
