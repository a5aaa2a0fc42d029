// SFT data: train.jsonl rows -> sequences with the loss on assistant turns, with a toy template and
// with a real tokenizer + chat template from a generated tiny model folder, then a short SFT run.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../src/synthetic-models/tiny-model.js';
import { chatTemplateFromConfig } from '../../src/runtime/chat-template.js';
import { readModelWeights } from '../../src/runtime/hf-model.js';
import { loadTokenizer } from '../../src/runtime/load-model.js';
import { chatTokenizerFrom } from '../../worker/training/chat-tokenizer.js';
import { runSft, type TrainingEvent } from '../../worker/training/loop.js';
import type { ChatTokenizer } from '../../worker/training/rl-data.js';
import { parseSftJsonl, tokenizeSftRows } from '../../worker/training/sft-data.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-sft-data-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** <role> chars <end> per message; roles user 11 / assistant 12 / system 10. */
const toy: ChatTokenizer = {
  async encodeChat(messages, opts) {
    const role: Record<string, number> = { system: 10, user: 11, assistant: 12 };
    const ids = messages.flatMap((m) => [role[m.role], ...[...String(m.content)].map((c) => 20 + c.charCodeAt(0)), 3]);
    if (opts.addGenerationPrompt) ids.push(12);
    return ids;
  },
};

describe('SFT data', () => {
  it('parses train.jsonl and names bad lines', () => {
    const rows = parseSftJsonl('{"messages":[{"role":"user","content":"a"}]}\n\n{"messages":[{"role":"user","content":"b"}],"tools":[]}\n');
    expect(rows).toHaveLength(2);
    expect(() => parseSftJsonl('{"messages":[]}\nnot json')).toThrow(/line 2 is not JSON/);
    expect(() => parseSftJsonl('{"messages":[{"content":"x"}]}')).toThrow(/line 1 needs "messages"/);
  });

  it('trains on every assistant turn (content + end marker), nothing else', async () => {
    const rows = parseSftJsonl(
      JSON.stringify({ messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo' }, { role: 'user', content: 'q' }, { role: 'assistant', content: 'ok' }] }) +
        '\n' +
        JSON.stringify({ messages: [{ role: 'user', content: 'no answer' }] }),
    );
    const { sequences, rowsWithoutAssistant } = await tokenizeSftRows(rows, toy);
    expect(rowsWithoutAssistant).toBe(1);
    expect(sequences).toHaveLength(1);
    const s = sequences[0];
    const c = (t: string) => [...t].map((ch) => 20 + ch.charCodeAt(0));
    expect(s.ids).toEqual([10, ...c('s'), 3, 11, ...c('hi'), 3, 12, ...c('yo'), 3, 11, ...c('q'), 3, 12, ...c('ok'), 3]);
    const trained = s.ids.filter((_, i) => s.lossMask[i] === 1);
    expect(trained).toEqual([...c('yo'), 3, ...c('ok'), 3]);
  });

  it('an assistant message with weight 0 is context: only weighted turns are trained (ART assistant_turns "last")', async () => {
    const c = (t: string) => [...t].map((ch) => 20 + ch.charCodeAt(0));
    const messages = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo', weight: 0 }, { role: 'user', content: 'q' }, { role: 'assistant', content: 'ok', weight: 1 }];
    const { sequences } = await tokenizeSftRows(parseSftJsonl(JSON.stringify({ messages })), toy);
    expect(sequences).toHaveLength(1);
    const s = sequences[0];
    // The weight key never reaches the template: the ids are those of the plain conversation.
    expect(s.ids).toEqual([11, ...c('hi'), 3, 12, ...c('yo'), 3, 11, ...c('q'), 3, 12, ...c('ok'), 3]);
    expect(s.ids.filter((_, i) => s.lossMask[i] === 1)).toEqual([...c('ok'), 3]);
    // Every assistant turn weighted 0: nothing to train in that row.
    const none = await tokenizeSftRows(parseSftJsonl(JSON.stringify({ messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b', weight: 0 }] })), toy);
    expect([none.sequences.length, none.rowsWithoutAssistant]).toEqual([0, 1]);
    expect(() => parseSftJsonl(JSON.stringify({ messages: [{ role: 'user', content: 'a', weight: 0 }] }))).toThrow(/line 1, message 0: "weight" must be 0 or 1, on assistant messages only/);
    expect(() => parseSftJsonl(JSON.stringify({ messages: [{ role: 'assistant', content: 'a', weight: 0.5 }] }))).toThrow(/"weight" must be 0 or 1/);
  });

  it('with a real tokenizer and chat template: tokenize, train a few LoRA steps, write the adapter', async () => {
    const dir = join(root, 'tiny');
    makeTinyModel({ dir, size: 'tiny', seed: 1 });
    const tokenizer = chatTokenizerFrom(loadTokenizer(dir), chatTemplateFromConfig(JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'))));
    const rows = parseSftJsonl(
      [
        { messages: [{ role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'Paris.' }] },
        { messages: [{ role: 'user', content: 'Say hello.' }, { role: 'assistant', content: 'Hello!' }] },
      ].map((r) => JSON.stringify(r)).join('\n'),
    );
    const { sequences } = await tokenizeSftRows(rows, tokenizer);
    expect(sequences).toHaveLength(2);
    for (const s of sequences) {
      const trained = s.lossMask.reduce((a, b) => a + b, 0);
      expect(trained).toBeGreaterThan(0);
      expect(trained).toBeLessThan(s.ids.length / 2); // the prompt is not trained
    }
    const { config, weights } = readModelWeights(dir);
    const events: TrainingEvent[] = [];
    const result = await runSft(
      { sequences: [...sequences, ...sequences, ...sequences], batchSize: 2, learningRate: 1e-2 },
      { model: { config, weights, baseModelName: 'tiny', mode: 'lora' }, checkpointDir: join(root, 'ckpt', 'step-1'), log: () => {} },
      (e) => void events.push(e),
    );
    const losses = events.filter((e) => e.type === 'gradient_step').map((e) => e.data.loss);
    expect(losses).toHaveLength(3);
    expect(losses[2]).toBeLessThan(losses[0]);
    expect(result.steps).toBe(3);
  });
});
