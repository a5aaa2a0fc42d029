// Serving benchmark: the inference engine (continuous batching, sampler, detokenizer) on the ONNX
// runner with a generated random model. Prints JSON.
//   npx tsx scripts/bench-engine.ts [--size tiny|s20|m120] [--concurrency 1,4,8] [--prompt 64] [--tokens 64] [--json] [--lora]
//                                   [--chunks 16,32,64,512 [--rounds 4]]
// --chunks measures the mixed-step chunk budget (prefillChunkTokens) instead: closed loops of the first
// concurrency level, the values interleaved round by round (the machine's speed drifts), each value with
// output tokens/s (median of rounds), inter-token latency p50/p99 and TTFT p50 (pooled).
// --mixed-steps prints what a mixed step costs against a decode step of 8 rows (context ~100), for chunks of
// 8–64 prompt tokens, in process CPU time (ORT's threads do not spin, so it counts work, and it holds up
// better than wall time when other processes share the cores): ITL p99 ≤ 3 × p50 needs mixed steps under
// 3 × the decode step, which is how the default chunk budget was chosen. `separateOverPacked` is the same
// work as two runs (the decoding rows, then the chunk alone): what packing the rows into one run saves.
// Reports, per concurrency: output tokens/s over all requests, mean time to first token, and the
// single-sequence loop of src/runtime/generate.ts as the no-engine baseline. Two arrival patterns: a burst
// (all requests at once) and a closed loop (each of `c` clients sends its next request when the last ends,
// 4·c requests, each with its own prompt), which is what bench:serve does over HTTP.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTinyModel, type TinySize } from '../src/synthetic-models/tiny-model.js';
import { generateIds } from '../src/runtime/generate.js';
import { loadModel } from '../src/runtime/load-model.js';
import { Engine } from '../worker/inference/engine.js';
import { servableFromRuntime } from '../worker/inference/runtime-model.js';
import { defaultSamplingParams } from '../worker/inference/sampling-params.js';
import { responseFormatConstraint } from '../worker/inference/json-constraint.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const size = arg('size', 's20') as TinySize;
const concurrency = arg('concurrency', '1,4,8').split(',').map(Number);
const promptLen = Number(arg('prompt', '64'));
const maxTokens = Number(arg('tokens', '64'));
const json = process.argv.includes('--json');
/** Build the graph with LoRA inputs (as the worker does) to see what that costs base-model requests. */
const lora = process.argv.includes('--lora');
const chunks = process.argv.includes('--chunks') ? arg('chunks', '').split(',').map(Number) : null;
const rounds = Number(arg('rounds', '4'));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

const dir = mkdtempSync(join(tmpdir(), 'hearth-bench-serve-'));
try {
  makeTinyModel({ dir, size, seed: 1 });
  const loaded = await loadModel(dir, { maxContext: 1024, lora });
  const servable = servableFromRuntime(loaded);
  const vocab = loaded.config.vocabSize;
  const prompt = (k: number) => Array.from({ length: promptLen }, (_, i) => 5 + ((i * 31 + k * 7) % (vocab - 10)));

  // Baseline: the runtime's single-sequence loop, greedy, no engine.
  await generateIds(loaded, prompt(0), { maxTokens: 4, stopAtEos: false }); // warm-up
  let t0 = performance.now();
  await generateIds(loaded, prompt(0), { maxTokens, stopAtEos: false });
  const baselineTps = maxTokens / ((performance.now() - t0) / 1000);

  /** c clients, each sending its next request when the last one ends; 4·c requests with prompts of their own. */
  async function closedLoop(engine: Engine, c: number, constraint: Parameters<Engine['submit']>[0]['constraint']): Promise<number> {
    let started = 0, tokens = 0;
    const one = (k: number) =>
      new Promise<void>((resolve, reject) =>
        engine.submit({ promptIds: prompt(1000 + k), params: defaultSamplingParams({ temperature: 0, maxTokens, ignoreEos: true }), constraint }, (e) => {
          if (e.type === 'finished') tokens += e.tokens.length;
          if (e.type === 'done') resolve();
          if (e.type === 'error') reject(new Error(e.message));
        }),
      );
    const t = performance.now();
    await Promise.all(Array.from({ length: c }, async () => { while (started < 4 * c) await one(started++); }));
    return +(tokens / ((performance.now() - t) / 1000)).toFixed(1);
  }

  /** Closed loop as above, with every delta's arrival time: tokens/s, ITL and TTFT samples. */
  async function latencyLoop(engine: Engine, c: number) {
    let started = 0, tokens = 0;
    const itl: number[] = [], ttft: number[] = [];
    const one = (k: number) =>
      new Promise<void>((resolve, reject) => {
        const t0 = performance.now();
        let last = -1;
        engine.submit({ promptIds: prompt(1000 + k), params: defaultSamplingParams({ temperature: 0, maxTokens, ignoreEos: true }) }, (e) => {
          const now = performance.now();
          if (e.type === 'delta') {
            if (last < 0) ttft.push(now - t0);
            else itl.push(now - last);
            last = now;
          }
          if (e.type === 'finished') tokens += e.tokens.length;
          if (e.type === 'done') resolve();
          if (e.type === 'error') reject(new Error(e.message));
        });
      });
    const t = performance.now();
    await Promise.all(Array.from({ length: c }, async () => { while (started < 4 * c) await one(started++); }));
    return { tps: tokens / ((performance.now() - t) / 1000), itl, ttft };
  }

  if (process.argv.includes('--mixed-steps')) {
    const r = loaded.runner;
    const cpuMs = (c0: NodeJS.CpuUsage) => { const d = process.cpuUsage(c0); return (d.user + d.system) / 1000; };
    const rows = [] as ReturnType<typeof r.newSequence>[];
    for (let b = 0; b < 8; b++) { const kv = r.newSequence(); await r.forward([{ tokens: prompt(b).concat(prompt(b)).slice(0, 100 - b), kv }]); rows.push(kv); }
    const sizes = [0, 8, 16, 32, 48, 64];
    const acc = new Map(sizes.map((c) => [c, [] as number[]]));
    const ratios = new Map(sizes.map((c) => [c, [] as number[]]));
    for (let round = 0; round < rounds * 3; round++)
      for (const C of sizes) {
        const times: number[] = [];
        for (const separate of C ? [false, true] : [false]) {
          rows.forEach((kv, b) => kv.truncate(100 - b));
          const chunkKv = r.newSequence();
          const decodeRows = () => rows.map((kv) => ({ tokens: [5], kv }));
          const chunk = () => (C ? [{ tokens: prompt(99).slice(0, C), kv: chunkKv }] : []);
          const step = async () => {
            if (!separate) return r.forward([...decodeRows(), ...chunk()]);
            await r.forward(decodeRows());
            return r.forward(chunk());
          };
          await step(); // sizes the batch for this chunk
          chunkKv.truncate(0);
          const c0 = process.cpuUsage();
          for (let i = 0; i < 4; i++) { await step(); chunkKv.truncate(0); }
          times.push(cpuMs(c0) / 4);
          chunkKv.dispose();
        }
        acc.get(C)!.push(times[0]);
        if (C) ratios.get(C)!.push(times[1] / times[0]);
      }
    const d8 = pct(acc.get(0)!, 0.5);
    process.stdout.write(JSON.stringify({ bench: 'engine-mixed-steps', date: new Date().toISOString(), loadavg1m: +loadavg()[0].toFixed(2), size, attention: r.attention, packedRows: r.packsRows, loraGraph: lora,
      decode8CpuMs: +d8.toFixed(2), mixed: sizes.slice(1).map((C) => ({ chunk: C, cpuMs: +pct(acc.get(C)!, 0.5).toFixed(2), overDecode: +(pct(acc.get(C)!, 0.5) / d8).toFixed(2), separateOverPacked: +pct(ratios.get(C)!, 0.5).toFixed(2) })) }, null, 2) + '\n');
    await r.release();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }

  if (chunks) {
    const c = concurrency[0];
    const engines = chunks.map((prefillChunkTokens) => {
      const s = servableFromRuntime(loaded); // each engine its own runner port (sequence ids restart per engine)
      return new Engine(s.model, s.tokenizer, { maxNumSeqs: Math.max(c, 1), maxBatchedTokens: 512, prefillChunkTokens, kvCacheTokens: 65536, prefixCaching: false });
    });
    const acc = chunks.map(() => ({ tps: [] as number[], itl: [] as number[], ttft: [] as number[] }));
    await latencyLoop(engines[0], c); // warm-up
    for (let r = 0; r < rounds; r++)
      for (const [i, engine] of engines.entries()) {
        const res = await latencyLoop(engine, c);
        acc[i].tps.push(res.tps);
        acc[i].itl.push(...res.itl);
        acc[i].ttft.push(...res.ttft);
      }
    const r1 = (x: number) => Math.round(x * 10) / 10;
    const results = chunks.map((chunk, i) => ({
      prefillChunkTokens: chunk, tokensPerSecond: r1(pct(acc[i].tps, 0.5)), tokensPerSecondRounds: acc[i].tps.map(r1),
      itlMs: { p50: r1(pct(acc[i].itl, 0.5)), p99: r1(pct(acc[i].itl, 0.99)) }, ttftMs: { p50: r1(pct(acc[i].ttft, 0.5)), p99: r1(pct(acc[i].ttft, 0.99)) },
    }));
    process.stdout.write(JSON.stringify({ bench: 'engine-chunks', date: new Date().toISOString(), loadavg1m: +loadavg()[0].toFixed(2), size, attention: loaded.runner.attention, loraGraph: lora, concurrency: c, promptTokens: promptLen, maxTokens, packedRuns: loaded.runner.timing.packedCalls, results }, null, 2) + '\n');
    await loaded.runner.release();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }

  const runs = [];
  for (const c of concurrency) {
    const engine = new Engine(servable.model, servable.tokenizer, { maxNumSeqs: Math.max(c, 1), maxBatchedTokens: 512, kvCacheTokens: 65536 });
    const constraint = json ? responseFormatConstraint(servable.tokenizer, { type: 'json_object' }) ?? undefined : undefined;
    t0 = performance.now();
    const ttft: number[] = [];
    let tokens = 0;
    await Promise.all(
      Array.from({ length: c }, (_, k) =>
        new Promise<void>((resolve, reject) => {
          let first = true;
          engine.submit({ promptIds: prompt(k), params: defaultSamplingParams({ temperature: 1, seed: k, maxTokens, ignoreEos: true }), constraint }, (e) => {
            if (e.type === 'delta' && first) {
              first = false;
              ttft.push(performance.now() - t0);
            }
            if (e.type === 'finished') tokens += e.tokens.length;
            if (e.type === 'done') resolve();
            if (e.type === 'error') reject(new Error(e.message));
          });
        }),
      ),
    );
    const seconds = (performance.now() - t0) / 1000;
    runs.push({
      concurrency: c, outputTokens: tokens, seconds: +seconds.toFixed(3), tokensPerSecond: +(tokens / seconds).toFixed(1), meanTtftMs: +(ttft.reduce((a, b) => a + b, 0) / ttft.length).toFixed(1),
      closedLoopTokensPerSecond: await closedLoop(engine, c, constraint),
    });
  }
  await loaded.runner.release();
  process.stdout.write(
    JSON.stringify({ bench: 'serve', date: new Date().toISOString(), loadavg1m: +loadavg()[0].toFixed(2), size, attention: loaded.runner.attention, promptTokens: promptLen, maxTokens, jsonConstraint: json, loraGraph: lora, baselineSingleSequenceTokensPerSecond: +baselineTps.toFixed(1), runs }, null, 2) + '\n',
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
