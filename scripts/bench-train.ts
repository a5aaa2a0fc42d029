// Training throughput, Hearth against PyTorch on the same model, shapes, optimizer and threads, in
// one run. Prints one JSON document (progress on stderr).
//
//   npx tsx scripts/bench-train.ts [--phases gemm,sft_full,sft_lora,rl_step,qwen05b_lora] [--engines graph,tfjs]
//        [--steps 3] [--steps-05b 2] [--length-05b 512] [--threads <cores>] [--repeat 1] [--no-torch] [--reference]
//        [--device cpu|cuda:N|webgpu:0]   (a GPU: the frozen base's products on it, as a training worker does)
//   npx tsx scripts/bench-train.ts --phases 8b_q4k_lora [--model-8b <dir with model.gguf>] [--torch-timeout-8b 1500]
//        [--layers-8b N]   (the generated model cut to N layers: memory and time per layer, on a smaller box)
//
// --engines: the Hearth training engines every LoRA phase measures, each in its own child process
// (HEARTH_TRAIN_ENGINE=graph|tfjs; engine-choice.ts): the ONNX Runtime graph engine (worker/training/graph/)
// and the TF.js one. Each run prints ratios graph/tfjs, graph/pytorch and tfjs/pytorch (tokens/s over tokens/s).
// sft_full always runs on TF.js (the graph engine trains LoRA only); 8b_q4k_lora on the graph engine only (TF.js
// would need the 8B base as float32: 32 GB).
//
// --reference also runs Hearth's reference path (HEARTH_TRAIN_ENGINE=tfjs HEARTH_TRAIN_GEMM=xnnpack: the wasm
// backend's own GEMMs and the unfused LM head, what the trainer ran before the ONNX Runtime path) in each round.
//
// Phases (each measured in its own process, Hearth then PyTorch, so peak RSS is per phase):
//   gemm          wasm XNNPACK vs ONNX Runtime GEMM at the trainer's shapes (Hearth only)
//   sft_full      20M config (vocab 32000, d 288, FFN 768, 6 layers, 6/2 heads, untied), 4 x 128 tokens
//   sft_lora      the same, LoRA r 8 on q,k,v,o,gate,up,down
//   rl_step       one RL step, 8 groups x 4 trajectories of 64 + 64 tokens (4,064 tokens), LoRA
//   qwen05b_lora  Qwen2.5-0.5B dimensions (vocab 151,936, tied, q/k/v bias), LoRA, 1 x 512 tokens
//   8b_q4k_lora   (only when asked: not in the default list) Llama-3.1-8B's full depth in Q4_K from the project's
//                 generator (writeGgufParallel: writeGgufModel's bytes, seed 1) in a temp dir removed after (or
//                 --model-8b: a folder holding model.gguf, kept), trained from openModelWeights(dir).source (the
//                 ggml blocks, never a float copy of the base): LoRA r 8 on all seven projections, 1 x 256 tokens,
//                 ONE optimizer step and no warm-up, so its seconds include whatever a first step pays. The
//                 PyTorch peer trains the same step in bf16 on the same dequantized values (Hearth's own
//                 dequantizer streams them to it: exact up to the bf16 rounding); it is skipped, with the reason
//                 printed as pytorch_skipped, when the bf16 base does not fit in free memory or a bf16 GEMM probe
//                 projects the step past 15 minutes, and abandoned after --torch-timeout-8b seconds.
// Other phases' numbers are over the optimizer steps after the first (a warm-up step, not counted).
//
// host_device_bytes_per_optimizer_step: the bytes the graph engine's runs handed to ONNX Runtime and read back
// (TrainingResult.engine.hostDeviceBytes, host<->device traffic on a GPU) over the whole job, divided by the
// job's optimizer steps counting the warm-up step (result.steps); null for the TF.js engine, which does not
// count them. An SFT step here is one micro-batch pass (microBatchTokens = rows x length); rl_step's one
// optimizer step is as many passes as loop.ts's packing and default micro-batch budget make.
// host_device_bytes_last_step: the job's last optimizer step alone (a steady step: without the job's one upload of
// the adapters and the checkpoint's read-back of them and of the moments).
//
// The PyTorch peer (scripts/bench-train-torch.py) runs when some python3 imports torch (Debian:
// apt-get install python3-torch libopenblas0-openmp); the OpenMP OpenBLAS is put on
// LD_LIBRARY_PATH when present. Both sides get the same thread count and neither spins: Hearth's
// ONNX Runtime pools have spinning off, and OMP_WAIT_POLICY=PASSIVE is set for PyTorch unless given
// (on a shared 2-core box spinning OpenMP threads slowed PyTorch 3x: 15.7 vs 45 tok/s).
// On a shared machine absolute numbers drift minute to minute; the same-run ratios are the result.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../src/runtime/model-config.js';
import { GGUF_WEIGHTS_FILE, openModelWeights } from '../src/runtime/hf-model.js';
import { shapeConfig } from '../src/synthetic-models/tiny-model.js';
import { writeGgufParallel } from '../src/synthetic-models/synthetic-files.js';
import { initTrainingBackend } from '../worker/training/backend.js';
import type { TrainSequence } from '../worker/training/data.js';
import { runRl, runSft, type TrainingEvent, type TrainingResult } from '../worker/training/loop.js';
import type { TrainingEngine } from '../worker/training/engine-choice.js';
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

const PHASES = ['gemm', 'sft_full', 'sft_lora', 'rl_step', 'qwen05b_lora', '8b_q4k_lora'] as const;
type Phase = (typeof PHASES)[number];
/** What runs without --phases (8b_q4k_lora takes minutes and ~5 GB of disk: only when asked). */
const DEFAULT_PHASES: Phase[] = ['gemm', 'sft_full', 'sft_lora', 'rl_step', 'qwen05b_lora'];
const ENGINES: readonly TrainingEngine[] = ['graph', 'tfjs'];
/** The engines a phase runs on, of those asked. */
function phaseEngines(phase: Phase, asked: TrainingEngine[]): TrainingEngine[] {
  if (phase === 'gemm' || phase === 'sft_full') return ['tfjs'];
  if (phase === '8b_q4k_lora') return ['graph'];
  return asked;
}
/** The 8B phase: Llama 3.1 8B's shape, every matrix Q4_K, one sequence of this many tokens. */
const TOKENS_8B = 256;

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

/** Which engine trained, and its host<->device bytes per optimizer step (the warm-up step counted; null on TF.js). */
function engineFields(result: TrainingResult) {
  const { name, hostDeviceBytes } = result.engine;
  return {
    engine: name,
    optimizer_steps: result.steps,
    host_device_bytes_total: name === 'graph' ? hostDeviceBytes : null,
    host_device_bytes_per_optimizer_step: name === 'graph' && result.steps > 0 ? Math.round(hostDeviceBytes / result.steps) : null,
    host_device_bytes_last_step: name === 'graph' ? result.engine.lastStepHostDeviceBytes : null,
  };
}

async function hearthSft(setup: PhaseSetup, root: string) {
  const random = mulberry32(42);
  const { config, rows, length, steps } = setup;
  const sequence = (): TrainSequence => {
    const ids = Array.from({ length: length + 1 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
    return { ids, lossMask: ids.map((_, i) => (i >= 1 ? 1 : 0)) };
  };
  const events: TrainingEvent[] = [];
  const result = await runSft(
    { sequences: Array.from({ length: rows * (steps + 1) }, sequence), batchSize: rows, learningRate: 1e-4 },
    { model: { config, weights: randomWeights(config, 1), baseModelName: 'bench', mode: setup.mode }, checkpointDir: join(root, 'ckpt'), microBatchTokens: rows * length, log: () => {} },
    (e) => void events.push(e),
  );
  const { tokensPerSecond, secondsPerStep } = throughput(events);
  return { tokens_per_second: Math.round(tokensPerSecond * 10) / 10, seconds_per_step: Number(secondsPerStep.toFixed(3)), ...engineFields(result) };
}

/**
 * RL steps of 8 groups × 4 trajectories of 64 + 64 tokens (4,064 tokens a step: packed_sequence_length 4,064), a
 * warm-up step and --steps measured ones, as the PyTorch peer runs them (its first step is not timed either: a
 * step measured cold, the first run of every ONNX Runtime session, was 20–40% slower).
 */
async function hearthRl(root: string) {
  const random = mulberry32(42);
  const config = config20m;
  const steps = 1 + Number(arg('steps', '3'));
  const sequences: RlData['sequences'] = [];
  const groupRewards: number[][] = [];
  for (let g = 0; g < 8 * steps; g++) {
    groupRewards.push([1, 0, 0.5, 0]);
    for (let t = 0; t < 4; t++) {
      const ids = Array.from({ length: 128 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
      sequences.push({ ids, lossMask: ids.map((_, i) => (i >= 64 ? 1 : 0)), logprobs: ids.map((_, i) => (i >= 64 ? -3 : NaN)), trajectory: g * 4 + t, group: g });
    }
  }
  const data: RlData = { sequences, groupRewards, numTrajectories: 32 * steps, numExceptions: 0, numChoicesWithoutLogprobs: 0 };
  const events: TrainingEvent[] = [];
  const result = await runRl(
    { data, settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-5, packed_sequence_length: 32 * 127 }) },
    { model: { config, weights: randomWeights(config, 1), baseModelName: 'bench', mode: 'lora' }, checkpointDir: join(root, 'ckpt'), log: () => {} },
    (e) => void events.push(e),
  );
  const measured = events.filter((e) => e.type === 'gradient_step');
  if (measured.length !== steps) throw new Error(`rl_step: ${measured.length} optimizer steps, expected ${steps}`);
  const { tokensPerSecond, secondsPerStep } = throughput(events);
  return { tokens: measured[1].data.num_tokens, tokens_per_second: Math.round(tokensPerSecond * 10) / 10, seconds_per_step: Number(secondsPerStep.toFixed(3)), ...engineFields(result) };
}

/**
 * One LoRA optimizer step (no warm-up) on the 8B Q4_K model folder `dir`, built from its weight source: the
 * graph engine reads the ggml blocks as the file stores them.
 */
async function hearth8b(dir: string, root: string) {
  const started = performance.now();
  const { config, source } = openModelWeights(dir);
  const random = mulberry32(42);
  const ids = Array.from({ length: TOKENS_8B + 1 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
  const events: TrainingEvent[] = [];
  let trainingStarted = NaN;
  const log: string[] = [];
  const result = await runSft(
    { sequences: [{ ids, lossMask: ids.map((_, i) => (i >= 1 ? 1 : 0)) }], batchSize: 1, learningRate: 1e-4 },
    { model: { config, source, baseModelName: 'bench-8b-q4k', mode: 'lora' }, checkpointDir: join(root, 'ckpt'), microBatchTokens: TOKENS_8B, log: (l) => void log.push(l) },
    (e) => {
      if (e.type === 'training_started') trainingStarted = performance.now();
      events.push(e);
    },
  );
  const step = events.find((e) => e.type === 'gradient_step')!.data;
  const seconds = step.num_tokens / step.tokens_per_second;
  return {
    tokens: step.num_tokens, tokens_per_second: Number(step.tokens_per_second.toFixed(2)), seconds_per_step: Number(seconds.toFixed(1)),
    build_seconds: Number(((trainingStarted - started) / 1000).toFixed(1)), wall_seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    loss: Number(step.loss.toFixed(4)), ...engineFields(result), engine_log: log.filter((l) => l.includes('engine')),
  };
}

/**
 * --dump-weights <dir>: every tensor of the model folder as float32 on stdout (Hearth's own dequantizer), each
 * as a JSON line {name, shape, bytes} followed by its little-endian bytes: how the PyTorch peer gets the exact
 * values Hearth trains against without a 32 GB float file.
 */
async function dumpWeights(dir: string): Promise<void> {
  const { source } = openModelWeights(dir);
  const write = (b: Uint8Array) => new Promise<void>((resolve, reject) => process.stdout.write(b, (err) => (err ? reject(err) : resolve())));
  for (const [name, t] of source) {
    const data = t.f32();
    await write(Buffer.from(JSON.stringify({ name, shape: t.shape, bytes: data.byteLength }) + '\n'));
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    for (let at = 0; at < bytes.length; at += 64 << 20) await write(bytes.subarray(at, Math.min(bytes.length, at + (64 << 20))));
  }
  await write(Buffer.from(JSON.stringify({ end: true }) + '\n'));
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
    const result = phase === 'gemm' ? gemmGflops() : phase === 'rl_step' ? await hearthRl(root) : phase === '8b_q4k_lora' ? await hearth8b(arg('model-dir', ''), root) : await hearthSft(setupOf(phase), root);
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
  if (openblasCore?.forced) env.OPENBLAS_CORETYPE = openblasCore.forced;
  return env;
}

/**
 * The OpenBLAS kernel the peer's torch uses, and the one forced when OpenBLAS does not know this CPU. Debian 12's
 * OpenBLAS 0.3.21 takes an Emerald Rapids Xeon (model 207) for a "Prescott" and runs its SSE3 kernels: a 1024²
 * SGEMM on 2 threads at 22–53 GFLOP/s instead of 255–268 with OPENBLAS_CORETYPE=SAPPHIRERAPIDS (2026-11-28), which
 * made PyTorch look 2–3.4× slower than Hearth. Then the closest kernel the CPU's flags allow is forced, and said.
 */
let openblasCore: { detected: string; forced: string | null } | null = null;

/** OpenBLAS's best kernel for these /proc/cpuinfo flags (x86-64), null where the generic one is right. */
function openblasCoreForFlags(flags: ReadonlySet<string>): string | null {
  if (flags.has('amx_tile') && flags.has('avx512_bf16')) return 'SAPPHIRERAPIDS';
  if (flags.has('avx512_bf16')) return 'COOPERLAKE';
  if (flags.has('avx512f') && flags.has('avx512bw')) return 'SKYLAKEX';
  if (flags.has('avx2')) return 'HASWELL';
  return null;
}

function detectOpenblasCore(python: string, threads: number): void {
  const r = spawnSync(python, ['-c', 'import torch; torch.ones(64, 64) @ torch.ones(64, 64)'], { env: { ...torchEnv(threads), OPENBLAS_VERBOSE: '2' }, encoding: 'utf8' });
  const detected = /Core: (\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? 'unknown';
  let forced: string | null = null;
  if (!process.env.OPENBLAS_CORETYPE && /^(Prescott|Core2|Nehalem|Katmai|unknown)$/.test(detected) && existsSync('/proc/cpuinfo')) {
    const flags = new Set((/^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '').trim().split(/\s+/));
    forced = openblasCoreForFlags(flags);
  }
  openblasCore = { detected, forced };
  if (forced) process.stderr.write(`bench-train: OpenBLAS took this CPU for a ${detected}; the PyTorch peer runs with OPENBLAS_CORETYPE=${forced}\n`);
}

/** A python3 that imports torch, or null. */
function findTorchPython(threads: number): string | null {
  for (const python of [process.env.HEARTH_BENCH_PYTHON, 'python3', '/usr/bin/python3']) {
    if (!python) continue;
    const r = spawnSync(python, ['-c', 'import torch'], { env: torchEnv(threads), stdio: 'ignore' });
    if (r.status === 0) {
      detectOpenblasCore(python, threads);
      return python;
    }
  }
  return null;
}

/** The last line of a child's stdout, parsed. */
function runChild(command: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs?: number): Record<string, unknown> {
  const stdout = execFileSync(command, args, { env, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20, ...(timeoutMs ? { timeout: timeoutMs, killSignal: 'SIGKILL' as const } : {}) }).toString().trim();
  return JSON.parse(stdout.slice(stdout.lastIndexOf('\n{') + 1)) as Record<string, unknown>;
}

function loadAverage(): number {
  return Number(os.loadavg()[0].toFixed(2));
}

/** tokens/s over tokens/s, or null when either side is missing. */
function ratioOf(a: Record<string, unknown> | null | undefined, b: Record<string, unknown> | null | undefined): number | null {
  const x = a?.tokens_per_second, y = b?.tokens_per_second;
  return typeof x === 'number' && typeof y === 'number' && y > 0 ? Number((x / y).toFixed(3)) : null;
}

type Side = Record<string, unknown>;
interface PhaseRun {
  /** Hearth, by engine. */
  hearth: Partial<Record<TrainingEngine, Side>>;
  hearth_reference?: Side;
  pytorch: Side | null;
  /** Why the peer did not run (8b_q4k_lora: memory, projected time, timeout). */
  pytorch_skipped?: string;
  /** 'graph/tfjs', 'graph/pytorch', 'tfjs/pytorch': tokens/s over tokens/s, same run. */
  ratios: Record<string, number | null>;
  load_average: number;
  /** 8b_q4k_lora: the generated model file. */
  model?: Record<string, unknown>;
}

/** The 8B Q4_K model folder: given (--model-8b, kept) or generated into `tmp` (the caller removes it). */
async function model8b(tmp: string): Promise<{ dir: string; info: Record<string, unknown> }> {
  const given = arg('model-8b', '');
  if (given) return { dir: given, info: { dir: given, generated: false } };
  const dir = join(tmp, 'model-8b-q4k');
  mkdirSync(dir, { recursive: true });
  const { bavail, bsize } = statfsSync(tmp);
  const free = bavail * bsize;
  if (free < 6e9) throw new Error(`8b_q4k_lora needs ~5 GB free under ${tmp} for the generated GGUF; ${(free / 1e9).toFixed(1)} GB free`);
  process.stderr.write(`bench-train: generating the 8B Q4_K GGUF under ${dir} (${(free / 1e9).toFixed(0)} GB free)...\n`);
  const t0 = performance.now();
  const layers = arg('layers-8b', '');
  const config = shapeConfig('8b', layers ? { layers: Number(layers) } : {});
  const info = await writeGgufParallel(join(dir, GGUF_WEIGHTS_FILE), { config, type: 'Q4_K', seed: 1 }, { threads: os.availableParallelism() });
  return { dir, info: { generated: true, layers: config.numLayers, bytes: info.bytes, seconds: Number(((performance.now() - t0) / 1000).toFixed(1)) } };
}

/** The PyTorch peer of 8b_q4k_lora (bf16, the base streamed from Hearth's dequantizer), or why it did not run. */
function torch8b(python: string, dir: string, config: ModelConfig, threads: number): { pytorch: Side | null; skipped?: string } {
  const timeoutS = Number(arg('torch-timeout-8b', '1500'));
  const weightsCmd = [process.execPath, ...process.execArgv, join(here, 'bench-train.ts'), '--dump-weights', dir];
  const spec = { config, phase: 'sft_lora', steps: 1, warmup: false, rows: 1, length: TOKENS_8B, threads, dtype: 'bfloat16', weights_cmd: weightsCmd, max_projected_seconds: 900 };
  try {
    const out = runChild(python, [join(here, 'bench-train-torch.py'), JSON.stringify(spec)], torchEnv(threads), timeoutS * 1000);
    if (typeof out.skipped === 'string') return { pytorch: null, skipped: out.skipped };
    return { pytorch: out };
  } catch (err) {
    const e = err as { code?: string; signal?: string; message: string };
    return { pytorch: null, skipped: e.code === 'ETIMEDOUT' || e.signal === 'SIGKILL' ? `abandoned after ${timeoutS} s (--torch-timeout-8b)` : `failed: ${e.message.split('\n')[0]}` };
  }
}

async function main(): Promise<void> {
  const child = arg('phase', '');
  if (child) {
    console.log(JSON.stringify(await runHearthPhase(child as Phase)));
    return;
  }
  const dump = arg('dump-weights', '');
  if (dump) {
    await dumpWeights(dump);
    return;
  }
  const phases = arg('phases', DEFAULT_PHASES.join(',')).split(',') as Phase[];
  for (const p of phases) if (!PHASES.includes(p)) throw new Error(`unknown phase ${p} (phases: ${PHASES.join(', ')})`);
  const engines = arg('engines', ENGINES.join(',')).split(',') as TrainingEngine[];
  for (const e of engines) if (!ENGINES.includes(e)) throw new Error(`unknown engine ${e} (engines: ${ENGINES.join(', ')})`);
  const threads = Number(arg('threads', String(os.availableParallelism())));
  const repeat = Number(arg('repeat', '1'));
  const python = process.argv.includes('--no-torch') ? null : findTorchPython(threads);
  const hearthEnv = { ...process.env, HEARTH_TRAIN_THREADS: String(threads) };
  const childArgs = (phase: Phase, extra: string[] = []) => [...process.execArgv, join(here, 'bench-train.ts'), ...process.argv.slice(2), '--phase', phase, ...extra];
  const results: Record<string, unknown> = {};
  for (const phase of phases) {
    const runs: PhaseRun[] = [];
    const tmp = phase === '8b_q4k_lora' ? mkdtempSync(join(os.tmpdir(), 'hearth-bench-8b-')) : null;
    try {
      const model = tmp ? await model8b(tmp) : null;
      for (let r = 0; r < (phase === 'gemm' ? 1 : repeat); r++) {
        const load = loadAverage();
        const run: PhaseRun = { hearth: {}, pytorch: null, ratios: {}, load_average: load, ...(model ? { model: model.info } : {}) };
        for (const engine of phaseEngines(phase, engines)) {
          process.stderr.write(`bench-train: ${phase} (Hearth, ${engine} engine), load average ${loadAverage()}...\n`);
          let side: Side;
          try {
            side = runChild(process.execPath, childArgs(phase, model ? ['--model-dir', model.dir] : []), { ...hearthEnv, HEARTH_TRAIN_ENGINE: engine });
          } catch (err) {
            // A child that dies (the 8B step not fitting, an OOM kill on a shared box) is reported and the run goes
            // on: the other engines, the peer and the other phases still print.
            if (phase === 'gemm') throw err;
            const e = err as { status?: number | null; signal?: string | null };
            side = { engine, error: e.signal === 'SIGKILL' ? 'killed by SIGKILL (the kernel OOM killer, on a box without swap)' : `exited with ${e.status ?? e.signal}` };
            run.hearth[engine] = side;
            continue;
          }
          // The engine that trained, as the job reported it: a phase asked for one engine must not measure the other.
          if (phase !== 'gemm' && side.engine !== engine) throw new Error(`${phase}: asked for the ${engine} engine, the job ran on ${String(side.engine)}`);
          run.hearth[engine] = side;
        }
        if (python && phase !== 'gemm') {
          process.stderr.write(`bench-train: ${phase} (PyTorch), load average ${loadAverage()}...\n`);
          if (model) {
            const { pytorch, skipped } = torch8b(python, model.dir, openModelWeights(model.dir).config, threads);
            run.pytorch = pytorch;
            if (skipped) run.pytorch_skipped = skipped;
          } else {
            const s = setupOf(phase);
            const spec = { config: s.config, phase: phase === 'qwen05b_lora' ? 'sft_lora' : phase, steps: s.steps, rows: s.rows, length: s.length, threads };
            try {
              run.pytorch = runChild(python, [join(here, 'bench-train-torch.py'), JSON.stringify(spec)], torchEnv(threads));
            } catch (err) {
              const e = err as { status?: number | null; signal?: string | null };
              run.pytorch_skipped = `the peer ${e.signal === 'SIGKILL' ? 'was killed by SIGKILL (OOM?)' : `exited with ${e.status ?? e.signal}`}`;
            }
          }
        } else if (phase !== 'gemm') {
          run.pytorch_skipped = 'no python3 imports torch (or --no-torch)';
        }
        if (run.hearth.graph && run.hearth.tfjs) run.ratios['graph/tfjs'] = ratioOf(run.hearth.graph, run.hearth.tfjs);
        for (const engine of ENGINES) if (run.hearth[engine]) run.ratios[`${engine}/pytorch`] = ratioOf(run.hearth[engine], run.pytorch);
        if (process.argv.includes('--reference') && phase !== 'gemm' && phase !== '8b_q4k_lora') {
          run.hearth_reference = runChild(process.execPath, childArgs(phase), { ...hearthEnv, HEARTH_TRAIN_ENGINE: 'tfjs', HEARTH_TRAIN_GEMM: 'xnnpack' });
        }
        runs.push(run);
      }
    } finally {
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    }
    results[phase] = phase === 'gemm' ? runs[0].hearth.tfjs : runs.length === 1 ? runs[0] : { runs, ratios: runs.map((r) => r.ratios) };
  }
  const summary = Object.fromEntries(
    Object.entries(results)
      .filter(([p]) => p !== 'gemm')
      .map(([p, r]) => {
        const rs = 'runs' in (r as object) ? (r as { runs: PhaseRun[] }).runs : [r as PhaseRun];
        return [p, rs.map((run) => {
          const side = (x: Side | null | undefined) => (x ? `${String(x.tokens_per_second)} tok/s (${String(x.peak_rss_mb)} MB)` : '-');
          const hearth = Object.entries(run.hearth).map(([e, x]) => `Hearth ${e} ${side(x)}`).join(', ');
          const ratios = Object.entries(run.ratios).map(([k, v]) => `${k} ${v ?? '-'}`).join(', ');
          const reference = run.hearth_reference ? `; reference path ${side(run.hearth_reference)}` : '';
          return `${hearth} vs PyTorch ${side(run.pytorch)}${run.pytorch_skipped ? ` [${run.pytorch_skipped}]` : ''}: ${ratios || 'no peer'}${reference}`;
        })];
      }),
  );
  console.log(JSON.stringify({
    date: new Date().toISOString(),
    machine: machineLabel(),
    speed_probe_ms: speedProbe(),
    threads,
    engines,
    pytorch: python ?? 'not installed (apt-get install python3-torch libopenblas0-openmp)',
    ...(openblasCore ? { pytorch_openblas_core: openblasCore.forced ? `${openblasCore.forced} (forced: OpenBLAS detected ${openblasCore.detected})` : openblasCore.detected } : {}),
    parameters: { '20m': countParameters(config20m), qwen05b: countParameters(configQwen05b), ...(phases.includes('8b_q4k_lora') ? { '8b': countParameters(shapeConfig('8b')) } : {}) },
    results,
    summary,
  }, null, 2));
}

await main();
