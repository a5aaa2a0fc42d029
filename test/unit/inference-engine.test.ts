import { afterEach, describe, expect, it, vi } from 'vitest';
import { Engine, type EngineEvent, type EngineOptions, type GenerateRequest } from '../../worker/inference/engine.js';
import { defaultSamplingParams, type SamplingParams } from '../../worker/inference/sampling-params.js';
import type { StepItem, StepOutput } from '../../worker/inference/model-port.js';
import { ToyModel, ToyTokenizer, type ToyModelOptions } from './inference-toy-model.js';

const tok = new ToyTokenizer();

interface Result {
  text: string;
  ids: number[];
  finish: string;
  stopReason: string | number | null;
  deltas: string;
}

function run(engine: Engine, req: GenerateRequest): Promise<Result[]> & { cancel(): void } {
  const results: Result[] = [];
  const deltas: string[] = [];
  let cancel = () => {};
  const p = new Promise<Result[]>((resolve, reject) => {
    const h = engine.submit(req, (e: EngineEvent) => {
      if (e.type === 'delta') deltas[e.index] = (deltas[e.index] ?? '') + e.text;
      if (e.type === 'finished')
        results[e.index] = { text: e.text, ids: e.tokens.map((t) => t.id), finish: e.finishReason, stopReason: e.stopReason, deltas: deltas[e.index] ?? '' };
      if (e.type === 'done') resolve(results);
      if (e.type === 'error') reject(new Error(e.message));
    });
    cancel = h.cancel;
  });
  return Object.assign(p, { cancel: () => cancel() });
}

const prompts = ['hello world', 'a', 'the quick brown fox jumps over the lazy dog again and again', 'xyz 123', '{"name": "bob"}'];
const params = (o: Partial<SamplingParams> = {}) => defaultSamplingParams({ temperature: 0, maxTokens: 12, ...o });

function engineWith(opts: Partial<EngineOptions> = {}, model: ToyModelOptions = {}) {
  const m = new ToyModel(model);
  return { engine: new Engine(m, tok, { maxNumSeqs: 8, maxBatchedTokens: 64, kvCacheTokens: 1024, blockSize: 4, ...opts }), model: m };
}

async function oneAtATime(p: Partial<SamplingParams>) {
  const out = [];
  for (const text of prompts) {
    const { engine } = engineWith();
    out.push((await run(engine, { promptIds: tok.encode(text), params: params(p) }))[0]);
  }
  return out;
}

describe('engine', () => {
  it('batched output equals one-at-a-time output (greedy), also with chunked prefill and preemption', async () => {
    const sequential = await oneAtATime({});
    for (const opts of [{}, { maxBatchedTokens: 5 }, { kvCacheTokens: 96, maxBatchedTokens: 64, blockSize: 4 }]) {
      const { engine, model } = engineWith(opts);
      const batched = await Promise.all(prompts.map((t) => run(engine, { promptIds: tok.encode(t), params: params() })));
      expect(batched.map((r) => r[0])).toEqual(sequential);
      expect(Math.max(...model.steps.map((s) => s.length))).toBeGreaterThan(1);
      expect(model.cache.size).toBe(0); // every sequence's KV was freed
      const starts = model.steps.flat().filter((i) => i.pastLength === 0).length;
      if (opts.kvCacheTokens === 96) expect(starts).toBeGreaterThan(prompts.length); // someone was preempted and recomputed
      if (opts.maxBatchedTokens === 5) expect(model.steps.flat().some((i) => i.pastLength > 0 && i.tokens.length > 1)).toBe(true); // chunked
    }
    expect(sequential.some((r) => r.finish === 'length')).toBe(true);
    for (const r of sequential) expect(r.deltas).toBe(r.text);
  });

  it('a seeded sampled run is reproducible and independent of batching', async () => {
    const sequential = await oneAtATime({ temperature: 1, seed: 7 });
    const { engine } = engineWith({ maxBatchedTokens: 6 });
    const batched = await Promise.all(prompts.map((t) => run(engine, { promptIds: tok.encode(t), params: params({ temperature: 1, seed: 7 }) })));
    expect(batched.map((r) => r[0])).toEqual(sequential);
    const other = await oneAtATime({ temperature: 1, seed: 8 });
    expect(other).not.toEqual(sequential);
  });

  it('n choices differ under sampling and count usage over all of them', async () => {
    const { engine } = engineWith();
    const events: EngineEvent[] = [];
    await new Promise<void>((resolve) =>
      engine.submit({ promptIds: [2, 3, 4], params: params({ temperature: 1, seed: 1, maxTokens: 6, ignoreEos: true }), n: 3 }, (e) => {
        events.push(e);
        if (e.type === 'done') resolve();
      }),
    );
    const fin = events.filter((e) => e.type === 'finished');
    expect(fin).toHaveLength(3);
    expect(new Set(fin.map((e) => JSON.stringify(e.tokens.map((t) => t.id)))).size).toBeGreaterThan(1);
    expect(events.at(-1)).toEqual({ type: 'done', promptTokens: 3, completionTokens: 18, cachedTokens: 0 });
  });

  it('stops on EOS (kept in tokens, not in text), on stop strings and on stop token ids', async () => {
    const { engine } = engineWith({}, { boost: new Map([[0, 100]]) });
    const [eos] = await run(engine, { promptIds: tok.encode('hi'), params: params() });
    expect(eos).toMatchObject({ text: '', ids: [0], finish: 'stop', stopReason: null });

    const { engine: e2 } = engineWith();
    // Biased to repeat the token "ST": the stop string "TST" spans two tokens ("S|T|ST").
    const [stopStr] = await run(e2, { promptIds: tok.encode('hi'), params: params({ logitBias: new Map([[tok.encode('ST')[0], 1000]]), stop: ['TST'] }) });
    expect(stopStr).toMatchObject({ text: 'S', deltas: 'S', finish: 'stop', stopReason: 'TST' });
    expect(stopStr.ids.length).toBe(2);

    const stopId = tok.encode('q')[0];
    const [byId] = await run(e2, { promptIds: tok.encode('hi'), params: params({ logitBias: new Map([[stopId, 1000]]), stopTokenIds: [stopId] }) });
    expect(byId).toMatchObject({ text: '', ids: [stopId], finish: 'stop', stopReason: stopId });
  });

  it('min_tokens blocks EOS; ignore_eos runs to max_tokens', async () => {
    const { engine } = engineWith({}, { boost: new Map([[0, 5]]) });
    const [r] = await run(engine, { promptIds: tok.encode('hi'), params: params({ minTokens: 3 }) });
    expect(r.ids.length).toBe(4);
    expect(r.ids.slice(0, 3)).not.toContain(0);
    const [s] = await run(engine, { promptIds: tok.encode('hi'), params: params({ ignoreEos: true, maxTokens: 5 }) });
    expect(s).toMatchObject({ finish: 'length' });
    expect(s.ids).toEqual([0, 0, 0, 0, 0]);
  });

  it('cancel frees the sequence at once and other requests continue', async () => {
    const { engine, model } = engineWith();
    // Cancel the long request once it is mid-generation (3 deltas out), between two engine steps.
    const long = { deltas: 0, ended: false };
    let midway!: () => void;
    const reachedMidway = new Promise<void>((r) => (midway = r));
    const handle = engine.submit({ promptIds: tok.encode('abc'), params: params({ maxTokens: 200, ignoreEos: true }) }, (e: EngineEvent) => {
      if (e.type === 'delta' && ++long.deltas === 3) midway();
      if (e.type === 'finished' || e.type === 'done' || e.type === 'error') long.ended = true;
    });
    const short = run(engine, { promptIds: tok.encode('def'), params: params({ maxTokens: 30, ignoreEos: true }) });
    await reachedMidway;
    handle.cancel();
    expect(engine.stats.running + engine.stats.waiting).toBe(1); // only the short request is left
    const [r] = await short;
    expect(r).toMatchObject({ finish: 'length' });
    expect(r.ids).toHaveLength(30);
    await engine.idle();
    expect(long).toEqual({ deltas: 3, ended: false }); // nothing more was generated or sent after the cancel
    expect(model.cache.size).toBe(0);
  });

  it('rejects prompts longer than the context', () => {
    const { engine } = engineWith({}, { maxContext: 8 });
    expect(() => engine.submit({ promptIds: tok.encode('abcdefghijkl'), params: params() }, () => {})).toThrow(/at most 7/);
  });

  it('caps generation at the context length with finish_reason length', async () => {
    const { engine } = engineWith({}, { maxContext: 10 });
    const [r] = await run(engine, { promptIds: [2, 3, 4, 5, 6, 7], params: params({ maxTokens: 100, ignoreEos: true }) });
    expect(r).toMatchObject({ finish: 'length' });
    expect(r.ids.length).toBe(4);
  });

  it('never mixes adapters in one step when the runner cannot', async () => {
    const { engine, model } = engineWith({}, { mixedAdapterBatches: false });
    const rs = await Promise.all(['x', 'y', null].map((adapter) => run(engine, { promptIds: tok.encode('abc'), params: params(), adapter })));
    expect(rs).toHaveLength(3);
    expect(model.steps.every((s) => new Set(s.map((i) => i.adapter)).size === 1)).toBe(true);
  });
});

/** A toy model whose steps take 2 ms plus 0.125 ms per prompt token on a fake clock (decode rows are the 2 ms). */
class TimedToyModel extends ToyModel {
  /** Per step: prompt tokens in it, whether it also decoded, and the engine's budget when it was scheduled. */
  readonly log: { prompt: number; decodes: boolean; budget: number }[] = [];
  budget: () => number = () => NaN;
  override async step(batch: StepItem[]): Promise<StepOutput[]> {
    const decodes = batch.filter((b) => b.tokens.length === 1 && b.pastLength > 0).length;
    const prompt = batch.reduce((a, b) => a + b.tokens.length, 0) - decodes;
    this.log.push({ prompt, decodes: decodes > 0, budget: this.budget() });
    vi.advanceTimersByTime(2 + 0.125 * prompt);
    return super.step(batch);
  }
}

describe('mixed-step budget (prefillChunkTokens auto)', () => {
  afterEach(() => vi.useRealTimers());

  it('learns from its step times: mixed steps settle at (2.25 − 1) · 2 ms / 0.125 ms = 20 prompt tokens, and never exceed the budget', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const model = new TimedToyModel({ maxContext: 512 });
    const engine = new Engine(model, tok, { maxNumSeqs: 8, maxBatchedTokens: 256, kvCacheTokens: 8192, blockSize: 4, prefixCaching: false });
    expect(engine.options.prefillChunkTokens).toBe('auto');
    model.budget = () => engine.chunkBudget!.tokensFor(1);
    const long = (k: number) => Array.from({ length: 90 }, (_, i) => (i * 7 + k) % 20);
    // A stream that decodes throughout, and prompts arriving one after another while it does.
    const streaming = run(engine, { promptIds: long(0), params: params({ maxTokens: 200, ignoreEos: true }) });
    for (let k = 1; k <= 6; k++) {
      await run(engine, { promptIds: long(k), params: params({ maxTokens: 4, ignoreEos: true }) });
    }
    await streaming;
    const mixed = model.log.filter((s) => s.decodes && s.prompt > 0);
    expect(mixed.length).toBeGreaterThan(10);
    for (const s of mixed) expect(s.prompt).toBeLessThanOrEqual(s.budget);
    expect(engine.chunkBudget!.estimateFor(1).decodeMs).toBeCloseTo(2, 6);
    expect(engine.chunkBudget!.estimateFor(1).tokenMs).toBeCloseTo(0.125, 6);
    expect(engine.chunkBudget!.tokensFor(1)).toBe(20);
    expect(mixed.at(-1)!.budget).toBe(20); // the last prompts were cut at the learned budget, not the initial 32
    expect(mixed.some((s) => s.prompt === 20)).toBe(true);
    expect(engine.lastMixedStepBudget).toBe(20); // what the worker reports as hearth_prefill_chunk_tokens
    // A prompt alone (nobody decoding) takes the whole step budget, whatever the mixed-step budget says (0 here:
    // decode(1) was not measured yet, so the next step with a decoding row only decodes).
    expect(model.log[0]).toEqual({ prompt: 90, decodes: false, budget: 0 });
    expect(model.log[1]).toEqual({ prompt: 0, decodes: true, budget: 0 }); // the next prompt waits one step
    expect(model.log[2]).toEqual({ prompt: 32, decodes: true, budget: 32 }); // then the initial budget, until a mixed step is measured
  });

  it('a fixed number turns the measured budget off; anything else is refused', () => {
    const fixed = engineWith({ prefillChunkTokens: 16 }).engine;
    expect(fixed.chunkBudget).toBeNull();
    expect(fixed.lastMixedStepBudget).toBe(16);
    for (const bad of [0, 2.5, -1, 'fast'] as never[]) expect(() => engineWith({ prefillChunkTokens: bad })).toThrow(/prefillChunkTokens/);
  });
});

describe('prefix caching', () => {
  const system = 'you are a helpful agent. answer briefly. ';
  const reqs = ['hello', 'what is the time', 'abc'].map((q) => tok.encode(system + q));

  async function serveAll(prefixCopy: boolean, opts: Partial<EngineOptions> = {}) {
    const { engine, model } = engineWith({ blockSize: 4, ...opts }, { prefixCopy });
    const out = [];
    for (const ids of reqs) out.push((await run(engine, { promptIds: ids, params: params({ maxTokens: 6 }) }))[0]);
    return { out, model };
  }

  it('reuses a finished request cache for the shared prompt prefix, with identical output', async () => {
    const plain = await serveAll(false);
    const cached = await serveAll(true);
    expect(cached.out).toEqual(plain.out);
    const firstChunks = cached.model.steps.flat().filter((i) => i.tokens.length > 1);
    // The 2nd and 3rd prompts start after the shared system prompt instead of at 0.
    const shared = tok.encode(system).length;
    expect(firstChunks.map((i) => i.pastLength)).toEqual([0, expect.any(Number), expect.any(Number)]);
    expect(firstChunks[1].pastLength).toBeGreaterThanOrEqual(shared - 1);
    expect(firstChunks[2].pastLength).toBeGreaterThanOrEqual(shared - 1);
    expect(plain.model.steps.flat().filter((i) => i.tokens.length > 1).every((i) => i.pastLength === 0)).toBe(true);
  });

  it('evicts cached prefixes before preempting running sequences', async () => {
    const { engine, model } = engineWith({ kvCacheTokens: 64, maxBatchedTokens: 64, blockSize: 4, prefixCacheEntries: 8 }, { prefixCopy: true });
    for (const ids of reqs) await run(engine, { promptIds: ids, params: params({ maxTokens: 4 }) });
    expect(model.cache.size).toBeGreaterThan(0); // kept for reuse
    const big = await run(engine, { promptIds: tok.encode('zzzz yyyy xxxx wwww vvvv uuuu tttt ssss'), params: params({ maxTokens: 20, ignoreEos: true }) });
    expect(big[0].ids).toHaveLength(20);
    expect(model.cache.size).toBeLessThanOrEqual(2);
  });

  it('does not share caches between adapters', async () => {
    const { engine, model } = engineWith({ blockSize: 4 }, { prefixCopy: true });
    await run(engine, { promptIds: reqs[0], params: params(), adapter: 'a' });
    await run(engine, { promptIds: reqs[1], params: params(), adapter: 'b' });
    await run(engine, { promptIds: reqs[2], params: params(), adapter: 'a' });
    const starts = model.steps.flat().filter((i) => i.tokens.length > 1).map((i) => i.pastLength > 0);
    expect(starts).toEqual([false, false, true]);
  });
});
