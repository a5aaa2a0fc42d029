// The engine on the real ONNX runner (src/runtime) with a generated tiny model: batched,
// chunked and preempted decoding must give exactly the tokens of one-at-a-time decoding.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../scripts/make-tiny-model.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { Engine, type EngineOptions } from '../../worker/inference/engine.js';
import { servableFromRuntime } from '../../worker/inference/runtime-model.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { createEngineFromRuntime, type InferenceEvent } from '../../worker/inference/openai-adapter.js';
import { ChatCompletionResponse } from '../../src/protocol/openai.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-inference-'));
const loaded: Partial<Record<'gqa' | 'standard', LoadedModel>> = {};

beforeAll(async () => {
  makeTinyModel({ dir, size: 'tiny', seed: 3, std: 0.1 });
  for (const attention of ['gqa', 'standard'] as const) loaded[attention] = await loadModel(dir, { attention, maxContext: 128, intraOpThreads: 1 });
});
afterAll(async () => {
  for (const m of Object.values(loaded)) await m!.runner.release();
  rmSync(dir, { recursive: true, force: true });
});

const PROMPTS = ['Once upon a time', 'The', 'Hearth serves models on small machines and keeps going', 'tools and tables', 'a b c d e f g'];

async function generate(engine: Engine, promptIds: number[][], maxTokens = 10): Promise<number[][]> {
  return Promise.all(
    promptIds.map(
      (ids) =>
        new Promise<number[]>((resolve, reject) =>
          engine.submit({ promptIds: ids, params: defaultSamplingParams({ temperature: 0, maxTokens, ignoreEos: true }) }, (e) => {
            if (e.type === 'finished') resolve(e.tokens.map((t) => t.id));
            if (e.type === 'error') reject(new Error(e.message));
          }),
        ),
    ),
  );
}

describe('engine on the ONNX runner', () => {
  for (const attention of ['gqa', 'standard'] as const) {
    it(`${attention}: batched, chunked and preempted greedy output equals one-at-a-time output`, async () => {
      const m = loaded[attention]!;
      const servable = servableFromRuntime(m);
      const ids = await Promise.all(PROMPTS.map((p) => m.tokenizer.encode(p)));
      const mk = (o: Partial<EngineOptions>) => new Engine(servable.model, servable.tokenizer, { maxNumSeqs: 8, maxBatchedTokens: 256, kvCacheTokens: 2048, blockSize: 16, ...o });
      const sequential: number[][] = [];
      for (const p of ids) sequential.push(...(await generate(mk({}), [p])));
      expect(await generate(mk({}), ids)).toEqual(sequential);
      expect(await generate(mk({ maxBatchedTokens: 7 }), ids)).toEqual(sequential);
      // Count fresh starts: more starts than prompts means someone was preempted and recomputed.
      let starts = 0;
      const step = servable.model.step.bind(servable.model);
      servable.model.step = (batch) => ((starts += batch.filter((b) => b.pastLength === 0).length), step(batch));
      expect(await generate(mk({ kvCacheTokens: 48, maxBatchedTokens: 32, blockSize: 8 }), ids)).toEqual(sequential);
      expect(starts).toBeGreaterThan(ids.length);
      expect(new Set(sequential.map((s) => s.join())).size).toBeGreaterThan(1);
    });
  }

  it('gqa: mixed steps (decoding rows and capped prompt chunks in one packed run) give the one-at-a-time tokens', async () => {
    const m = loaded.gqa!;
    const servable = servableFromRuntime(m);
    const ids = await Promise.all(PROMPTS.map((p) => m.tokenizer.encode(p)));
    const sequential: number[][] = [];
    for (const p of ids) sequential.push(...(await generate(new Engine(servable.model, servable.tokenizer, { prefixCaching: false }), [p])));
    for (const prefillChunkTokens of [3, 8, 'auto'] as const) {
      const engine = new Engine(servable.model, servable.tokenizer, { maxNumSeqs: 8, prefillChunkTokens, kvCacheTokens: 2048, prefixCaching: false });
      const packed = m.runner.timing.packedCalls;
      // Staggered arrivals: each prompt comes in while the earlier ones decode.
      const out: Promise<number[]>[] = [];
      await new Promise<void>((resolve, reject) => {
        const submit = (k: number) => {
          let deltas = 0;
          out[k] = new Promise<number[]>((done) =>
            engine.submit({ promptIds: ids[k], params: defaultSamplingParams({ temperature: 0, maxTokens: 10, ignoreEos: true }) }, (e) => {
              if (e.type === 'delta' && ++deltas === 2) (k + 1 < ids.length ? submit(k + 1) : resolve());
              if (e.type === 'finished') done(e.tokens.map((t) => t.id));
              if (e.type === 'error') reject(new Error(e.message));
            }),
          );
        };
        submit(0);
      });
      expect(await Promise.all(out)).toEqual(sequential);
      expect(m.runner.timing.packedCalls - packed).toBeGreaterThan(2);
    }
  });

  it('prefix caching on the real runner: reused caches give the same greedy tokens', async () => {
    const m = loaded.gqa!;
    const servable = servableFromRuntime(m);
    const system = 'You are a helpful assistant in the Hearth test suite. Answer briefly. ';
    const ids = await Promise.all(['Once upon a time', 'Tell me about tables', 'Why?'].map((q) => m.tokenizer.encode(system + q)));
    const results: Record<string, number[][]> = {};
    for (const prefixCaching of [false, true]) {
      const engine = new Engine(servable.model, servable.tokenizer, { kvCacheTokens: 2048, blockSize: 8, prefixCaching });
      const reused: number[] = [];
      const step = servable.model.step.bind(servable.model);
      servable.model.step = (batch) => (reused.push(...batch.filter((b) => b.tokens.length > 1).map((b) => b.pastLength)), step(batch));
      results[String(prefixCaching)] = [];
      for (const p of ids) results[String(prefixCaching)].push(...(await generate(engine, [p])));
      servable.model.step = step;
      if (prefixCaching) expect(reused.filter((n) => n > 0).length).toBe(2);
      else expect(reused.every((n) => n === 0)).toBe(true);
    }
    expect(results.true).toEqual(results.false);
  });

  it('a group (n = 8, or 8 requests at once) prefills its prompt once and gives the one-at-a-time tokens', async () => {
    const m = loaded.gqa!;
    const servable = servableFromRuntime(m);
    const prompt = await m.tokenizer.encode('Hearth serves models on small machines and keeps going, one group at a time');
    const other = await m.tokenizer.encode('tools and tables');
    const alone = (await generate(new Engine(servable.model, servable.tokenizer, { prefixCaching: false }), [prompt]))[0];
    const otherAlone = (await generate(new Engine(servable.model, servable.tokenizer, { prefixCaching: false }), [other]))[0];
    const run = async (submit: (engine: Engine) => Promise<number[][]>) => {
      const engine = new Engine(servable.model, servable.tokenizer, { kvCacheTokens: 4096, blockSize: 8 });
      const out = await submit(engine);
      return { out, computed: engine.counters.tokensComputed, reused: engine.counters.prefixTokensReused };
    };
    const greedy = defaultSamplingParams({ temperature: 0, maxTokens: 10, ignoreEos: true });
    const nChoices = await run(
      (engine) =>
        new Promise((resolve, reject) => {
          const out: number[][] = [];
          engine.submit({ promptIds: prompt, params: greedy, n: 8 }, (e) => {
            if (e.type === 'finished') out[e.index] = e.tokens.map((t) => t.id);
            if (e.type === 'done') resolve(out);
            if (e.type === 'error') reject(new Error(e.message));
          });
        }),
    );
    // The prompt once (P tokens), then 7 copies that each compute their last prompt token, then 9 decode steps × 8.
    expect(nChoices.out).toEqual(Array(8).fill(alone));
    expect(nChoices.computed).toBe(prompt.length + 7 + 8 * 9);
    expect(nChoices.reused).toBe(7 * (prompt.length - 1));
    // Eight separate requests arriving together, among them one unrelated prompt that must not wait.
    const parallel = await run((engine) => generate(engine, [...Array(8).fill(prompt), other]));
    expect(parallel.out).toEqual([...Array(8).fill(alone), otherAlone]);
    expect(parallel.computed).toBe(prompt.length + 7 + 8 * 9 + other.length + 9);
    // A copy arriving while the first decodes in a batch with another stream reads its batch row.
    const late = await run(
      (engine) =>
        new Promise((resolve, reject) => {
          const out: number[][] = [];
          let deltas = 0, open = 3;
          const submit = (ids: number[], slot: number) =>
            engine.submit({ promptIds: ids, params: greedy }, (e) => {
              if (e.type === 'delta' && slot === 0 && ++deltas === 3) submit(prompt, 2);
              if (e.type === 'finished') out[slot] = e.tokens.map((t) => t.id);
              if (e.type === 'done' && --open === 0) resolve(out);
              if (e.type === 'error') reject(new Error(e.message));
            });
          submit(prompt, 0);
          submit(other, 1);
        }),
    );
    expect(late.out).toEqual([alone, otherAlone, alone]);
    expect(late.reused).toBe(prompt.length - 1);
  });

  it('serves a chat completion end to end with the model template and tokenizer', async () => {
    const hearth = createEngineFromRuntime(loaded.gqa!, { kvCacheBytes: 2 ** 24 });
    const ev = await new Promise<InferenceEvent>((resolve) =>
      void hearth.submit({ kind: 'chat', model: 'tiny', body: { model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, temperature: 0, return_token_ids: true } }, resolve),
    );
    expect(ev.type).toBe('result');
    const r = ChatCompletionResponse.parse((ev as { data: unknown }).data);
    expect(r.choices[0].token_ids!.length).toBeGreaterThan(0);
    expect(r.prompt_token_ids!.length).toBe(r.usage.prompt_tokens);
    expect(r.choices[0].message.content).toBe(loaded.gqa!.tokenizer.decode(r.choices[0].token_ids!));
  });
});
