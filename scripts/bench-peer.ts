// Hearth against llama.cpp (node-llama-cpp's CPU build, a dev dependency) on the same GGUF files, in one run:
// import time, bytes on disk, cold load (no cached graph), warm load, peak RSS, prefill 128/512 tok/s and
// decode tok/s at 1 and 8 streams, with Hearth/llama.cpp ratios. Each side runs in its own child process
// (peak RSS is that process's own), on the same threads.
//
//   npm run bench:peer -- [--specs 1b:Q4_0,1b:Q4_K,1b:Q8_0,8b:Q4_K:4] [--dir /tmp/hearth-peer] [--threads 2] [--decode 32]
//
// A spec is shape:type[:layers] (shapes and types of scripts/make-tiny-model.ts; 8b:Q4_K:4 is Llama 3.1 8B's
// dimensions with 4 of its 32 layers). Files are generated once into --dir and reused.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { machineLabel, speedProbe } from './machine.js';
import { llamaCppSpeeds, prompt, speeds } from './engine-speeds.js';

const args = process.argv.slice(2);
const flag = (name: string) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : undefined; };
const threads = Number(flag('threads') ?? 2);
const decodeTokens = Number(flag('decode') ?? 32);
const dir = flag('dir') ?? '/tmp/hearth-peer';

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
const maxRssMb = () => round(process.resourceUsage().maxRSS / 1024, 0);

function dirBytes(d: string): number {
  if (!existsSync(d)) return 0;
  let total = 0;
  for (const e of readdirSync(d, { withFileTypes: true })) total += e.isDirectory() ? dirBytes(join(d, e.name)) : statSync(join(d, e.name)).size;
  return total;
}

/** Resident memory split into anonymous (ORT's pre-packed weights, arenas, JS heap) and file-backed (mapped weight files, code). */
function rssParts(): Record<string, number> | null {
  try {
    const text = readFileSync('/proc/self/smaps_rollup', 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    return { anon: round(kb('Anonymous') / 1024, 0), file: round((kb('Rss') - kb('Anonymous')) / 1024, 0) };
  } catch {
    return null; // not Linux
  }
}

/** Hearth's side: (cold) import + load with no cached graph, or (warm) load of the cached graph; then speeds. */
async function hearthChild(file: string, home: string, mode: 'cold' | 'warm'): Promise<Record<string, unknown>> {
  const { importModel, modelDir } = await import('../src/models/model-store.js');
  const { loadModel } = await import('../src/runtime/load-model.js');
  const id = 'bench/peer';
  const out: Record<string, unknown> = {};
  if (mode === 'cold') {
    rmSync(join(home, 'models'), { recursive: true, force: true });
    const t = performance.now();
    const manifest = await importModel(home, file, { id, ignoreMemory: true });
    // Weights a prefill token multiplies by: all but the embedding table and the LM head (run for the last token only).
    const { vocabSize, hiddenSize, tieWordEmbeddings } = manifest.config;
    out.weight_elements = manifest.parameters - vocabSize * hiddenSize * (tieWordEmbeddings ? 1 : 2);
    out.import_s = round((performance.now() - t) / 1000, 2);
    out.stored_bytes = dirBytes(modelDir(home, id)) - dirBytes(join(modelDir(home, id), '.cache'));
  }
  const t = performance.now();
  const m = await loadModel(id, { home, maxContext: 1024, intraOpThreads: threads });
  out[`${mode}_load_s`] = round((performance.now() - t) / 1000, 2);
  out[`${mode}_rss_after_load_mb`] = rssParts();
  out.graph_built = m.graphBuilt;
  out[`${mode}_graph_s`] = round(m.graphMs / 1000, 2); // build + repack, or the cache lookup
  out[`${mode}_session_s`] = round(m.sessionMs / 1000, 2); // ORT: read, optimize, pre-pack
  out.cache_bytes = dirBytes(join(modelDir(home, id), '.cache'));
  type Seq = ReturnType<typeof m.runner.newSequence>;
  Object.assign(out, await speeds<Seq>(decodeTokens, {
    newSeq: () => m.runner.newSequence(),
    run: async (tokens, kv) => { await m.runner.forward([{ tokens, kv }]); },
    batch: async (rows) => { await m.runner.forward(rows.map(([tokens, kv]) => ({ tokens, kv }))); },
    release: (kv) => kv.dispose(),
  }));
  out.peak_rss_mb = maxRssMb();
  await m.runner.release();
  return out;
}

/**
 * Where Hearth's step time goes (ORT's own profile, HEARTH_ORT_PROFILE): MatMulNBits' share of one 128-token
 * prefill and of one 8-row decode step, and the rate its nodes ran at. A step cannot beat its MatMulNBits nodes,
 * so prefill_tok_s / share is what Hearth would reach if every other node were free (the bound printed).
 */
async function hearthProfileChild(home: string): Promise<Record<string, unknown>> {
  const { mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const profDir = mkdtempSync(join(tmpdir(), 'hearth-prof-'));
  process.env.HEARTH_ORT_PROFILE = join(profDir, 'p');
  const { loadModel } = await import('../src/runtime/load-model.js');
  const m = await loadModel('bench/peer', { home, maxContext: 1024, intraOpThreads: threads });
  const warm = m.runner.newSequence();
  await m.runner.forward([{ tokens: prompt(16, 9), kv: warm }]);
  warm.dispose();
  const seq = m.runner.newSequence();
  await m.runner.forward([{ tokens: prompt(128), kv: seq }]);
  const seqs = Array.from({ length: 8 }, () => m.runner.newSequence());
  for (let s = 0; s < 8; s++) await m.runner.forward([{ tokens: prompt(16, s), kv: seqs[s] }]);
  await m.runner.forward(seqs.map((kv, s) => ({ tokens: [5 + s], kv })));
  const file = m.runner.session.endProfiling() as unknown as string | undefined;
  const path = file && existsSync(file) ? file : join(profDir, readdirSync(profDir)[0]);
  type Ev = { cat?: string; name: string; ts: number; dur: number; args?: { op_name?: string; input_type_shape?: Record<string, number[]>[]; output_type_shape?: Record<string, number[]>[] } };
  const events = JSON.parse(readFileSync(path, 'utf8')) as Ev[];
  rmSync(profDir, { recursive: true, force: true });
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const share = (run: Ev, tag: string): Record<string, number> => {
    let all = 0, mnb = 0, flops = 0;
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < run.ts || e.ts > run.ts + run.dur) continue;
      all += e.dur;
      if (e.args?.op_name !== 'MatMulNBits') continue;
      mnb += e.dur;
      const x = Object.values(e.args.input_type_shape![0])[0];
      const n = Object.values(e.args.output_type_shape![0])[0].at(-1)!;
      flops += 2 * x.reduce((a, d) => a * d, 1) * n;
    }
    return { [`${tag}_matmulnbits_share`]: round(mnb / all, 3), [`${tag}_matmulnbits_gflops`]: round(flops / mnb / 1e3, 1) };
  };
  // Runs: warm-up, prefill 128, eight 16-token prompts, the 8-row decode step.
  const out = { ...share(runs[1], 'prefill_128'), ...share(runs.at(-1)!, 'decode_8') };
  await m.runner.release();
  return out;
}

function child(kind: string, extra: string[]): Record<string, unknown> {
  const stdout = execFileSync(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, '--child', kind, ...extra],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 24 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

async function main(): Promise<void> {
  const childKind = flag('child');
  if (childKind) {
    const file = flag('file')!;
    const result = childKind === 'llama' ? { ...(await llamaCppSpeeds(file, { threads, decodeTokens, gpu: false })), peak_rss_mb: maxRssMb() }
      : childKind === 'hearth-profile' ? await hearthProfileChild(flag('home')!)
      : await hearthChild(file, flag('home')!, childKind === 'hearth-cold' ? 'cold' : 'warm');
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  const { writeGgufModel } = await import('../src/synthetic-models/tiny-gguf.js');
  const { shapeConfig } = await import('../src/synthetic-models/tiny-model.js');
  const specs = (flag('specs') ?? '1b:Q4_0,1b:Q4_K,1b:Q8_0,8b:Q4_K:4').split(',');
  mkdirSync(dir, { recursive: true });
  const results: Record<string, unknown>[] = [];
  for (const spec of specs) {
    const [shape, type, layers] = spec.split(':');
    const file = join(dir, `${shape}-${type}${layers ? `-L${layers}` : ''}.gguf`);
    const result: Record<string, unknown> = { spec, machine: machineLabel(), speed_probe_ms: speedProbe(), threads };
    if (!existsSync(file)) {
      const t = performance.now();
      writeGgufModel(file, { config: shapeConfig(shape as never, { layers: layers ? Number(layers) : undefined }), type: type as never, seed: 1 });
      result.generate_s = round((performance.now() - t) / 1000, 1);
    }
    result.gguf_bytes = statSync(file).size;
    const home = join(dir, `home-${shape}-${type}-${layers ?? ''}`);
    // Interleaved: llama.cpp, Hearth (cold), Hearth (warm), llama.cpp again; the peer's figures are the better of its two runs.
    const l1 = child('llama', ['--file', file]);
    const cold = child('hearth-cold', ['--file', file, '--home', home]);
    const warm = child('hearth-warm', ['--file', file, '--home', home]);
    const l2 = child('llama', ['--file', file]);
    const profile = child('hearth-profile', ['--file', file, '--home', home]);
    const best = (k: string, lower = false) => (lower ? Math.min : Math.max)(l1[k] as number, l2[k] as number);
    const peer: Record<string, number> = {};
    for (const k of ['prefill_128_tok_s', 'prefill_512_tok_s', 'decode_1_tok_s', 'decode_8_tok_s']) peer[k] = best(k);
    peer.load_s = best('load_s', true);
    peer.peak_rss_mb = best('peak_rss_mb', true);
    const hearth: Record<string, unknown> = { ...cold, ...warm, cold_peak_rss_mb: cold.peak_rss_mb, ...profile };
    const ratio: Record<string, number> = {};
    for (const k of ['prefill_128_tok_s', 'prefill_512_tok_s', 'decode_1_tok_s', 'decode_8_tok_s']) ratio[k] = round((warm[k] as number) / peer[k], 2);
    ratio.disk_stored_vs_gguf = round((cold.stored_bytes as number) / (result.gguf_bytes as number), 3);
    ratio.disk_with_cache_vs_gguf = round(((cold.stored_bytes as number) + (warm.cache_bytes as number)) / (result.gguf_bytes as number), 2);
    ratio.warm_load_vs_peer = round((warm.warm_load_s as number) / peer.load_s, 2);
    ratio.cold_load_vs_peer = round((cold.cold_load_s as number) / peer.load_s, 2);
    // The bound: Hearth's prefill with every node but MatMulNBits free, against llama.cpp.
    ratio.prefill_128_bound_if_only_matmulnbits = round((warm.prefill_128_tok_s as number) / (profile.prefill_128_matmulnbits_share as number) / peer.prefill_128_tok_s, 2);
    ratio.decode_8_bound_if_only_matmulnbits = round((warm.decode_8_tok_s as number) / (profile.decode_8_matmulnbits_share as number) / peer.decode_8_tok_s, 2);
    // llama.cpp's whole prefill as an effective rate (2 FLOPs per weight per token), to set beside MatMulNBits' rate.
    peer.prefill_128_effective_gflops = round(2 * (cold.weight_elements as number) * peer.prefill_128_tok_s / 1e9, 1);
    Object.assign(result, { hearth, llama_cpp: { ...peer, runs: [l1, l2] }, ratio, speed_probe_after_ms: speedProbe() });
    process.stdout.write(JSON.stringify(result) + '\n');
    results.push(result);
  }
}

await main();
