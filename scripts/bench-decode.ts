// Decode benchmark: `npm run bench:decode` (tsx scripts/bench-decode.ts [--models stories,s20,m120] [--attention gqa|standard] [--weights f32|q4] [--q4-block 128] [--threads N] [--device cpu|cuda:N|webgpu:0]).
// For each model, in its own child process (so peak RSS is per model): load time, prefill tok/s
// (S = 128, 512), single-stream decode tok/s from context 128 and 512 (median and best of 3), batch-8 decode tok/s, the
// per-token time outside ORT, and peak RSS. Session: 2 intra-op threads, spinning off. Prints JSON.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { importModel } from '../src/models/model-store.js';
import { makeTinyModel, type TinySize } from '../src/synthetic-models/tiny-model.js';
import { loadModel, type LoadedModel } from '../src/runtime/load-model.js';
import { argmax } from '../src/runtime/generate.js';
import type { AttentionKind } from '../src/runtime/llama-graph.js';
import { Q4_BLOCK } from '../src/runtime/q4.js';
import { machineLabel, speedProbe } from './machine.js';

const STORIES = fileURLToPath(new URL('../../shared/models/stories260K/stories260K.gguf', import.meta.url));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Prompt of n token ids in the model's vocabulary (deterministic, avoids special ids at the start). */
const prompt = (n: number, vocab: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7919) % (vocab - 10)));

async function prefill(m: LoadedModel, n: number, reps: number): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    await m.runner.forward([{ tokens: prompt(n, m.config.vocabSize), kv: m.runner.newSequence() }]);
    times.push(performance.now() - t0);
  }
  return n / (median(times) / 1000);
}

/** Decode `steps` tokens after a context of `ctx`; returns tok/s and the outside-ORT ms per token. */
async function decode(m: LoadedModel, ctx: number, steps: number, batch: number): Promise<{ tokPerSec: number; overheadMs: number }> {
  const seqs = Array.from({ length: batch }, (_, b) => ({ kv: m.runner.newSequence(), last: 0, b }));
  for (const s of seqs) {
    const [l] = await m.runner.forward([{ tokens: prompt(ctx - s.b, m.config.vocabSize), kv: s.kv }]); // slightly different lengths
    s.last = argmax(l);
  }
  // One untimed step: packs the batch's caches together (a one-off copy), as in steady serving.
  const first = await m.runner.forward(seqs.map((s) => ({ tokens: [s.last], kv: s.kv })));
  seqs.forEach((s, j) => (s.last = argmax(first[j])));
  const t = m.runner.timing;
  const before = { ...t };
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) {
    const logits = await m.runner.forward(seqs.map((s) => ({ tokens: [s.last], kv: s.kv })));
    seqs.forEach((s, j) => (s.last = argmax(logits[j])));
  }
  const wall = performance.now() - t0;
  for (const s of seqs) s.kv.dispose(); // a resident cache's device buffers go at once
  const outside = (t.totalMs - before.totalMs) - (t.ortMs - before.ortMs);
  return { tokPerSec: (steps * batch) / (wall / 1000), overheadMs: outside / steps };
}

async function benchOne(spec: string, attention?: AttentionKind, weightType: 'f32' | 'q4' = 'f32', threads = 2, q4Block = Q4_BLOCK, device = 'cpu'): Promise<Record<string, unknown>> {
  const work = mkdtempSync(join(tmpdir(), 'hearth-bench-'));
  try {
    let dir: string;
    if (spec === 'stories') {
      if (!existsSync(STORIES)) return { model: spec, skipped: 'shared stories260K.gguf not found' };
      await importModel(join(work, 'home'), STORIES, { id: 'bench/stories260K' });
      dir = join(work, 'home', 'models', 'bench', 'stories260K');
    } else {
      dir = join(work, spec);
      makeTinyModel({ dir, size: spec as TinySize, seed: 1, std: 0.05 });
    }
    const probeBefore = speedProbe();
    const t0 = performance.now();
    const m = await loadModel(dir, { maxContext: 1024, attention, intraOpThreads: threads, weightType, q4Block, device, log: (l) => process.stderr.write(`${l}\n`) });
    const loadMs = performance.now() - t0;
    await prefill(m, 16, 2); // warm-up
    const result: Record<string, unknown> = {
      model: spec,
      params: m.config.vocabSize * m.config.hiddenSize, // overwritten below
      attention: m.runner.attention,
      device: m.runner.device,
      kv_resident: m.runner.kvResident,
      weights: weightType,
      ...(weightType === 'q4' ? { q4_block: q4Block } : {}),
      threads,
      load_ms: Math.round(loadMs),
      prefill_128_tok_s: Math.round(await prefill(m, 128, 5)),
      prefill_512_tok_s: Math.round(await prefill(m, 512, 3)),
    };
    const steps = spec === 'm120' ? 32 : 128;
    // Three runs each (the host is shared and noisy): report the median and the best.
    const runs = async (ctx: number, n: number, batch: number) => {
      const r = [await decode(m, ctx, n, batch), await decode(m, ctx, n, batch), await decode(m, ctx, n, batch)];
      r.sort((a, b) => a.tokPerSec - b.tokPerSec);
      return { median: r[1], best: r[2] };
    };
    const d128 = await runs(128, steps, 1);
    const d512 = await runs(512, steps, 1);
    const b8 = await runs(128, Math.max(16, steps / 4), 8);
    Object.assign(result, {
      decode_ctx128_tok_s: Math.round(d128.median.tokPerSec),
      decode_ctx512_tok_s: Math.round(d512.median.tokPerSec),
      decode_batch8_tok_s: Math.round(b8.median.tokPerSec),
      best_of_3: { ctx128: Math.round(d128.best.tokPerSec), ctx512: Math.round(d512.best.tokPerSec), batch8: Math.round(b8.best.tokPerSec) },
      overhead_outside_ort_ms_per_token: Number(d128.median.overheadMs.toFixed(3)),
      overhead_outside_ort_ms_per_batch8_step_ctx128: Number(b8.median.overheadMs.toFixed(3)),
      peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
      speed_probe_ms: { before: probeBefore, after: speedProbe() },
    });
    const { listFolderTensors } = await import('../src/runtime/safetensors.js');
    result.params = listFolderTensors(dir).reduce((a, e) => a + e.shape.reduce((x, y) => x * y, 1), 0);
    await m.runner.release();
    return result;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function main(argv: string[]): Promise<void> {
  const flag = (name: string) => { const i = argv.indexOf(`--${name}`); return i >= 0 ? argv[i + 1] : undefined; };
  const attention = flag('attention') as AttentionKind | undefined;
  const weights = (flag('weights') ?? 'f32') as 'f32' | 'q4';
  const threads = Number(flag('threads') ?? 2);
  const q4Block = Number(flag('q4-block') ?? Q4_BLOCK);
  const device = flag('device') ?? 'cpu';
  const one = flag('one');
  if (one) { process.stdout.write(JSON.stringify(await benchOne(one, attention, weights, threads, q4Block, device)) + '\n'); return; }
  const models = (flag('models') ?? 'stories,s20,m120').split(',');
  const results = [];
  for (const spec of models) {
    const args = [fileURLToPath(import.meta.url), '--one', spec, '--weights', weights, '--threads', String(threads), '--q4-block', String(q4Block), '--device', device, ...(attention ? ['--attention', attention] : [])];
    const child = spawnSync(process.execPath, ['--import', 'tsx', ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
    const line = child.stdout.trim().split('\n').pop() ?? '';
    try { results.push(JSON.parse(line)); } catch { results.push({ model: spec, error: (child.stderr || line).slice(-500) }); }
  }
  const load = (await import('node:os')).loadavg().map((x) => Number(x.toFixed(2)));
  process.stdout.write(JSON.stringify({ date: new Date().toISOString(), machine: machineLabel(), threads, spinning: false, loadavg_after: load, results }, null, 2) + '\n');
}

await main(process.argv.slice(2));
