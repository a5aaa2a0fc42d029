// Training throughput, Hearth against PyTorch on the same model, shapes, optimizer and threads, in
// one run. Prints one JSON document (progress on stderr).
//
//   npx tsx scripts/bench-train.ts [--phases gemm,sft_full,sft_lora,rl_step,qwen05b_lora]
//        [--steps 3] [--steps-05b 2] [--length-05b 512] [--threads <cores>] [--repeat 1] [--no-torch] [--reference]
//        [--device cpu|cuda:N|webgpu:0]   (a GPU: the frozen base's products on it, as a training worker does)
//
// --reference also runs Hearth's reference path (HEARTH_TRAIN_GEMM=xnnpack: the wasm backend's own
// GEMMs and the unfused LM head, what the trainer ran before the ONNX Runtime path) in each round.
//
// Phases (each measured in its own process, Hearth then PyTorch, so peak RSS is per phase):
//   gemm          wasm XNNPACK vs ONNX Runtime GEMM at the trainer's shapes (Hearth only)
//   sft_full      20M config (vocab 32000, d 288, FFN 768, 6 layers, 6/2 heads, untied), 4 x 128 tokens
//   sft_lora      the same, LoRA r 8 on q,k,v,o,gate,up,down
//   rl_step       one RL step, 8 groups x 4 trajectories of 64 + 64 tokens (4,064 tokens), LoRA
//   qwen05b_lora  Qwen2.5-0.5B dimensions (vocab 151,936, tied, q/k/v bias), LoRA, 1 x 512 tokens
// The PyTorch peer (scripts/bench-train-torch.py) runs when some python3 imports torch (Debian:
// apt-get install python3-torch libopenblas0-openmp); the OpenMP OpenBLAS is put on
// LD_LIBRARY_PATH when present. Both sides get the same thread count and neither spins: Hearth's
// ONNX Runtime pools have spinning off, and OMP_WAIT_POLICY=PASSIVE is set for PyTorch unless given
// (on a shared 2-core box spinning OpenMP threads slowed PyTorch 3x: 15.7 vs 45 tok/s).
// On a shared machine absolute numbers drift minute to minute; the same-run ratios are the result.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../src/runtime/model-config.js';
import { initTrainingBackend } from '../worker/training/backend.js';
import type { TrainSequence } from '../worker/training/data.js';
import { runRl, runSft, type TrainingEvent } from '../worker/training/loop.js';
import { setOnnxRuntimeCompute } from '../worker/training/ort-kernels.js';
import { DeviceFrozenProducts } from '../worker/training/device-products.js';
import { setFrozenProductsDevice } from '../worker/training/frozen-linear.js';
import { executionProvidersFor } from '../src/runtime/runner.js';
import { parseDevice } from '../src/domain/device-name.js';
import type { RlData } from '../worker/training/rl-data.js';
import { countParameters, mulberry32, randomWeights } from '../worker/training/tensor-utils.js';
import { machineLabel, speedProbe } from './machine.js';
import { rlSettingsFromExperimentalConfig } from '../src/protocol/rl-settings.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const PHASES = ['gemm', 'sft_full', 'sft_lora', 'rl_step', 'qwen05b_lora'] as const;
type Phase = (typeof PHASES)[number];

/** stories15M-like body with a 32k vocabulary (the training notes' "20m" config). */
const config20m: ModelConfig = {
  architecture: 'llama', vocabSize: 32000, hiddenSize: 288, intermediateSize: 768, numLayers: 6, numHeads: 6, numKvHeads: 2,
  headDim: 48, maxPositionEmbeddings: 2048, rmsNormEps: 1e-5, ropeTheta: 10000, ropeScaling: null, tieWordEmbeddings: false,
  attentionBias: false, qkNorm: false, bosTokenId: 1, eosTokenIds: [2], padTokenId: null,
};
/** Qwen2.5-0.5B's dimensions (494M parameters), random weights. */
const configQwen05b: ModelConfig = {
  architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2,
  headDim: 64, maxPositionEmbeddings: 32768, rmsNormEps: 1e-6, ropeTheta: 1000000, ropeScaling: null, tieWordEmbeddings: true,
  attentionBias: true, qkNorm: false, bosTokenId: 151643, eosTokenIds: [151645], padTokenId: null,
};

interface PhaseSetup {
  config: ModelConfig;
  mode: 'full' | 'lora';
  rows: number;
  length: number;
  steps: number;
}
function setupOf(phase: Phase): PhaseSetup {
  const steps = Number(arg('steps', '3'));
  if (phase === 'qwen05b_lora') return { config: configQwen05b, mode: 'lora', rows: 1, length: Number(arg('length-05b', '512')), steps: Number(arg('steps-05b', '2')) };
  return { config: config20m, mode: phase === 'sft_full' ? 'full' : 'lora', rows: 4, length: 128, steps };
}

// ---------------------------------------------------------------- child: one Hearth phase

/** Tokens/s over the gradient steps after the first (warm-up) one. */
function throughput(events: TrainingEvent[]): { tokensPerSecond: number; secondsPerStep: number } {
  const measured = events.filter((e) => e.type === 'gradient_step').slice(1).map((e) => e.data);
  const tokens = measured.reduce((a, d) => a + (d.num_tokens ?? d.train_tokens), 0);
  const seconds = measured.reduce((a, d) => a + (d.num_tokens ?? d.train_tokens) / d.tokens_per_second, 0);
  return { tokensPerSecond: tokens / seconds, secondsPerStep: seconds / measured.length };
}

async function hearthSft(setup: PhaseSetup, root: string) {
  const random = mulberry32(42);
  const { config, rows, length, steps } = setup;
  const sequence = (): TrainSequence => {
    const ids = Array.from({ length: length + 1 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
    return { ids, lossMask: ids.map((_, i) => (i >= 1 ? 1 : 0)) };
  };
  const events: TrainingEvent[] = [];
  await runSft(
    { sequences: Array.from({ length: rows * (steps + 1) }, sequence), batchSize: rows, learningRate: 1e-4 },
    { model: { config, weights: randomWeights(config, 1), baseModelName: 'bench', mode: setup.mode }, checkpointDir: join(root, 'ckpt'), microBatchTokens: rows * length, log: () => {} },
    (e) => void events.push(e),
  );
  const { tokensPerSecond, secondsPerStep } = throughput(events);
  return { tokens_per_second: Math.round(tokensPerSecond * 10) / 10, seconds_per_step: Number(secondsPerStep.toFixed(3)) };
}

async function hearthRl(root: string) {
  const random = mulberry32(42);
  const config = config20m;
  const sequences: RlData['sequences'] = [];
  const groupRewards: number[][] = [];
  for (let g = 0; g < 8; g++) {
    groupRewards.push([1, 0, 0.5, 0]);
    for (let t = 0; t < 4; t++) {
      const ids = Array.from({ length: 128 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
      sequences.push({ ids, lossMask: ids.map((_, i) => (i >= 64 ? 1 : 0)), logprobs: ids.map((_, i) => (i >= 64 ? -3 : NaN)), trajectory: g * 4 + t, group: g });
    }
  }
  const data: RlData = { sequences, groupRewards, numTrajectories: 32, numExceptions: 0, numChoicesWithoutLogprobs: 0 };
  const events: TrainingEvent[] = [];
  await runRl(
    { data, settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-5 }) },
    { model: { config, weights: randomWeights(config, 1), baseModelName: 'bench', mode: 'lora' }, checkpointDir: join(root, 'ckpt'), log: () => {} },
    (e) => void events.push(e),
  );
  const step = events.find((e) => e.type === 'gradient_step')!.data;
  return { tokens: step.num_tokens, tokens_per_second: Math.round(step.tokens_per_second * 10) / 10, seconds_per_step: Number((step.num_tokens / step.tokens_per_second).toFixed(3)) };
}

/** GFLOP/s of one GEMM shape (best of 3) with the GEMMs on ONNX Runtime or on wasm XNNPACK. */
function gemmGflops(): Record<string, { xnnpack: number; onnxruntime: number }> {
  const out: Record<string, { xnnpack: number; onnxruntime: number }> = {};
  for (const [m, k, n] of [[1024, 1024, 1024], [512, 288, 768], [512, 768, 288], [512, 32000, 288], [512, 288, 32000], [512, 896, 4864]]) {
    const a = tf.randomNormal([m, k]);
    const b = tf.randomNormal([k, n]);
    const speed = (ort: boolean) => {
      setOnnxRuntimeCompute(ort);
      let best = Infinity;
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        tf.matMul(a, b).dispose(); // kernels run synchronously on wasm
        best = Math.min(best, performance.now() - t0);
      }
      return Number(((2 * m * k * n) / (best / 1000) / 1e9).toFixed(1));
    };
    out[`${m}x${k}x${n}`] = { xnnpack: speed(false), onnxruntime: speed(true) };
    tf.dispose([a, b]);
  }
  return out;
}

async function runHearthPhase(phase: Phase): Promise<unknown> {
  const backend = await initTrainingBackend({ log: () => {} });
  const device = arg('device', 'cpu');
  const products = device === 'cpu' ? null : new DeviceFrozenProducts(device, executionProvidersFor(parseDevice(device)));
  setFrozenProductsDevice(products);
  const root = mkdtempSync(join(os.tmpdir(), 'hearth-bench-train-'));
  try {
    const result = phase === 'gemm' ? gemmGflops() : phase === 'rl_step' ? await hearthRl(root) : await hearthSft(setupOf(phase), root);
    // The wasm heap never shrinks: its size now is its peak (the 4 GB wasm32 cap is what LoRA on large models must stay under).
    const heap = backend.name === 'wasm' ? (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.length : 0;
    return { ...(result as object), device, ...(products ? { device_resident_mb: Math.round(products.residentBytes / 2 ** 20) } : {}), backend: backend.reason, peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024), wasm_heap_mb: Math.round(heap / 2 ** 20) };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- parent: phases, peer, ratios

const here = fileURLToPath(new URL('.', import.meta.url));
const OPENBLAS_OPENMP = '/usr/lib/x86_64-linux-gnu/openblas-openmp';

function torchEnv(threads: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: String(threads), OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY ?? 'PASSIVE' };
  if (!env.LD_LIBRARY_PATH && existsSync(OPENBLAS_OPENMP)) env.LD_LIBRARY_PATH = OPENBLAS_OPENMP;
  return env;
}

/** A python3 that imports torch, or null. */
function findTorchPython(threads: number): string | null {
  for (const python of [process.env.HEARTH_BENCH_PYTHON, 'python3', '/usr/bin/python3']) {
    if (!python) continue;
    const r = spawnSync(python, ['-c', 'import torch'], { env: torchEnv(threads), stdio: 'ignore' });
    if (r.status === 0) return python;
  }
  return null;
}

/** The last line of a child's stdout, parsed. */
function runChild(command: string, args: string[], env: NodeJS.ProcessEnv): Record<string, unknown> {
  const stdout = execFileSync(command, args, { env, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 }).toString().trim();
  return JSON.parse(stdout.slice(stdout.lastIndexOf('\n{') + 1)) as Record<string, unknown>;
}

function loadAverage(): number {
  return Number(os.loadavg()[0].toFixed(2));
}

async function main(): Promise<void> {
  const child = arg('phase', '');
  if (child) {
    console.log(JSON.stringify(await runHearthPhase(child as Phase)));
    return;
  }
  const phases = arg('phases', PHASES.join(',')).split(',') as Phase[];
  for (const p of phases) if (!PHASES.includes(p)) throw new Error(`unknown phase ${p} (phases: ${PHASES.join(', ')})`);
  const threads = Number(arg('threads', String(os.availableParallelism())));
  const repeat = Number(arg('repeat', '1'));
  const python = process.argv.includes('--no-torch') ? null : findTorchPython(threads);
  const hearthEnv = { ...process.env, HEARTH_TRAIN_THREADS: String(threads) };
  const results: Record<string, unknown> = {};
  for (const phase of phases) {
    const runs: Array<{ hearth: Record<string, unknown>; hearth_reference?: Record<string, unknown>; pytorch: Record<string, unknown> | null; ratio: number | null; load_average: number }> = [];
    for (let r = 0; r < (phase === 'gemm' ? 1 : repeat); r++) {
      const load = loadAverage();
      process.stderr.write(`bench-train: ${phase} (Hearth${python && phase !== 'gemm' ? ', then PyTorch' : ''}), load average ${load}...\n`);
      const hearth = runChild(process.execPath, [...process.execArgv, join(here, 'bench-train.ts'), '--phase', phase, ...process.argv.slice(2)], hearthEnv);
      let pytorch: Record<string, unknown> | null = null;
      if (python && phase !== 'gemm') {
        const s = setupOf(phase);
        const spec = { config: s.config, phase: phase === 'qwen05b_lora' ? 'sft_lora' : phase, steps: s.steps, rows: s.rows, length: s.length, threads };
        pytorch = runChild(python, [join(here, 'bench-train-torch.py'), JSON.stringify(spec)], torchEnv(threads));
      }
      const ratio = pytorch ? Number(((hearth.tokens_per_second as number) / (pytorch.tokens_per_second as number)).toFixed(3)) : null;
      const run: (typeof runs)[number] = { hearth, pytorch, ratio, load_average: load };
      if (process.argv.includes('--reference') && phase !== 'gemm') {
        run.hearth_reference = runChild(process.execPath, [...process.execArgv, join(here, 'bench-train.ts'), '--phase', phase, ...process.argv.slice(2)], { ...hearthEnv, HEARTH_TRAIN_GEMM: 'xnnpack' });
      }
      runs.push(run);
    }
    results[phase] = phase === 'gemm' ? runs[0].hearth : runs.length === 1 ? runs[0] : { runs, ratios: runs.map((r) => r.ratio) };
  }
  const summary = Object.fromEntries(
    Object.entries(results)
      .filter(([p]) => p !== 'gemm')
      .map(([p, r]) => {
        const rs = 'runs' in (r as object) ? (r as { runs: typeof r[] }).runs : [r];
        return [p, rs.map((x) => {
          type Side = { tokens_per_second: number; peak_rss_mb: number };
          const run = x as { hearth: Side; hearth_reference?: Side; pytorch: Side | null; ratio: number | null };
          const reference = run.hearth_reference ? `; reference path ${run.hearth_reference.tokens_per_second} tok/s (${run.hearth_reference.peak_rss_mb} MB)` : '';
          return `Hearth ${run.hearth.tokens_per_second} tok/s (${run.hearth.peak_rss_mb} MB) vs PyTorch ${run.pytorch?.tokens_per_second ?? '-'} tok/s (${run.pytorch?.peak_rss_mb ?? '-'} MB): ${run.ratio ?? 'no peer'}${reference}`;
        })];
      }),
  );
  console.log(JSON.stringify({
    date: new Date().toISOString(),
    machine: machineLabel(),
    speed_probe_ms: speedProbe(),
    threads,
    pytorch: python ?? 'not installed (apt-get install python3-torch libopenblas0-openmp)',
    parameters: { '20m': countParameters(config20m), qwen05b: countParameters(configQwen05b) },
    results,
    summary,
  }, null, 2));
}

await main();
