// npm run bench:serve — the service as clients see it: a Hearth API on loopback (embedded queue, one inference
// worker process), closed-loop streaming clients at concurrency 1, 8 and 32. Per model and concurrency:
// aggregate output tokens/s, time to first token p50/p99, inter-token latency p50/p99. The API+queue overhead
// per request is TTFT at concurrency 1 over HTTP minus the same request's TTFT on the bare engine in-process.
//   npx tsx scripts/bench-serve.ts [--models s20,stories] [--concurrency 1,8,32] [--tokens 64] [--prompt 64]
// (The engine alone, without HTTP: `npm run bench:engine`.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTinyModel } from '../src/models/tiny-model.js';
import { adoptGeneratedFolder, importModel, modelsRoot } from '../src/models/model-store.js';
import { startServer, type TestServer } from '../test/helpers/server.js';
import { waitFor } from '../test/helpers/wait.js';
import { loadModel } from '../worker/runtime/load-model.js';
import { createEngineFromRuntime } from '../worker/inference/serve-loop.js';
import { machineLabel } from './machine.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STORIES = path.resolve(REPO, '../shared/models/stories260K/stories260K.gguf');
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const MODELS = arg('models', 's20,stories').split(',');
const CONCURRENCY = arg('concurrency', '1,8,32').split(',').map(Number);
const TOKENS = Number(arg('tokens', '64'));
const PROMPT_WORDS = Number(arg('prompt', '64'));

const q = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const r2 = (x: number) => Math.round(x * 100) / 100;

interface Sample { ttftMs: number; itlMs: number[]; tokens: number }

/** One streaming completion over HTTP; arrival time of each chunk. */
async function streamOnce(s: TestServer, key: string, model: string, prompt: string): Promise<Sample> {
  const t0 = performance.now();
  const res = await fetch(`${s.url}/v1/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: TOKENS, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const arrivals: number[] = [];
  let tokens = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(part, { stream: true });
    let i: number;
    while ((i = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const chunk = JSON.parse(event.slice(6)) as { choices: { text?: string }[]; usage?: { completion_tokens: number } | null };
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      if (chunk.choices.length) arrivals.push(performance.now());
    }
  }
  return { ttftMs: arrivals[0] - t0, itlMs: arrivals.slice(1).map((t, k) => t - arrivals[k]), tokens };
}

async function closedLoop(s: TestServer, key: string, model: string, prompt: string, concurrency: number) {
  const total = Math.max(8, concurrency * 3);
  let started = 0;
  const samples: Sample[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started++ < total) samples.push(await streamOnce(s, key, model, prompt));
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const itl = samples.flatMap((x) => x.itlMs);
  return {
    concurrency,
    requests: samples.length,
    output_tokens_per_s: Math.round(samples.reduce((a, x) => a + x.tokens, 0) / secs),
    ttft_ms: { p50: r2(q(samples.map((x) => x.ttftMs), 0.5)), p99: r2(q(samples.map((x) => x.ttftMs), 0.99)) },
    itl_ms: { p50: r2(q(itl, 0.5)), p99: r2(q(itl, 0.99)) },
  };
}

/** TTFT of the same request on the engine in this process (no HTTP, no queue, no IPC). */
async function bareEngineTtft(dir: string, prompt: string): Promise<number> {
  const loaded = await loadModel(dir, { lora: true });
  const hearth = createEngineFromRuntime(loaded, { kvCacheBytes: 2 ** 28 });
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now();
      let first: number | null = null;
      void hearth.submit({ kind: 'completion', body: { model: 'm', prompt, max_tokens: 1, temperature: 0, ignore_eos: true, stream: true }, model: 'm', adapter: null }, (e) => {
        if (e.type === 'chunk') first ??= performance.now() - t0;
        else if (e.type === 'end') resolve(first ?? performance.now() - t0);
        else if (e.type === 'error') reject(new Error(e.message));
      });
    });
  for (let i = 0; i < 3; i++) await once();
  const xs: number[] = [];
  for (let i = 0; i < 15; i++) xs.push(await once());
  await loaded.runner.release();
  return q(xs, 0.5);
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-bench-serve-'));
fs.mkdirSync(modelsRoot(home), { recursive: true });
const ids: { name: string; id: string }[] = [];
for (const name of MODELS) {
  if (name === 'stories') {
    if (!fs.existsSync(STORIES)) continue;
    await importModel(home, STORIES, { id: 'karpathy/stories260K' });
    ids.push({ name, id: 'karpathy/stories260K' });
  } else {
    const tmp = fs.mkdtempSync(path.join(modelsRoot(home), '.gen-'));
    makeTinyModel({ dir: tmp, size: name as never, seed: 1, std: 0.05 });
    adoptGeneratedFolder(home, tmp, `bench/${name}`, 'generated');
    ids.push({ name, id: `bench/${name}` });
  }
}

const s = await startServer({ home, env: { HEARTH_WORKERS: 'inference:cpu', HEARTH_RATE_LIMIT: '0' }, queue: { workerEnv: { HEARTH_MAX_NUM_SEQS: '32', HEARTH_KV_CACHE_MB: '512' } } });
const key = s.key('bench');
await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'an inference worker', 60_000);
const prompt = Array.from({ length: PROMPT_WORDS }, (_, i) => ['once', 'upon', 'a', 'time', 'there', 'was', 'little', 'girl'][i % 8]).join(' ');

const results: Record<string, unknown> = {};
for (const { name, id } of ids) {
  for (let i = 0; i < 3; i++) await streamOnce(s, key, id, prompt); // warm-up: load the model
  const levels = [];
  for (const c of CONCURRENCY) levels.push(await closedLoop(s, key, id, prompt, c));
  const dir = s.ctx.catalog.get(id)!.dir;
  const engineTtft = await bareEngineTtft(dir, prompt);
  const httpTtft = (levels.find((l) => l.concurrency === 1)?.ttft_ms.p50 ?? NaN) as number;
  results[name] = { model: id, levels, bare_engine_ttft_ms_p50: r2(engineTtft), api_queue_overhead_ms: r2(httpTtft - engineTtft) };
}
await s.close();
process.stdout.write(
  `${JSON.stringify({ bench: 'serve', date: new Date().toISOString(), machine: machineLabel(), load_average: os.loadavg().map(r2), prompt_words: PROMPT_WORDS, output_tokens: TOKENS, results }, null, 2)}\n`,
);
process.exit(0);
