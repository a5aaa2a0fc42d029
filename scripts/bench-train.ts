// Training throughput on a ~20M-parameter Llama config with random weights (no model files needed):
// SFT tokens/s for full fine-tuning and LoRA, and the time of one RL step over 8 groups x 4
// trajectories. Prints JSON. Run: npx tsx scripts/bench-train.ts [--steps 4] [--peak-gflops 125]
//
// FLOP accounting (per trained token):
//   full  = 6 * N                 (N = all parameters; the usual 6N rule, which overstates models
//                                  with a large embedding table, since lookups cost nothing)
//   LoRA  = 4 * N_matmul + 6 * N_lora   (forward 2N plus input gradients 2N through frozen weights,
//                                  no weight gradients; tfjs skips dW of frozen variables)
// Attention's T^2 term is left out of both. "fraction_of_peak" divides by --peak-gflops, by default
// 125 GFLOP/s: the whole-VM FP32 peak measured with OpenBLAS sgemm (shared/notes/tfjs-training-notes.md).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../worker/runtime/model-config.js';
import { initTrainingBackend } from '../worker/training/backend.js';
import type { TrainSequence } from '../worker/training/data.js';
import { loraModulePaths, projectionShape, DEFAULT_LORA_CONFIG } from '../worker/training/lora.js';
import { runRl, runSft, type TrainingEvent } from '../worker/training/loop.js';
import type { RlData } from '../worker/training/rl-data.js';
import { countParameters, mulberry32, randomWeights } from '../worker/training/tensor-utils.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const steps = arg('steps', 4);
const peakGflops = arg('peak-gflops', 125);

/** stories15M-like body with a 32k vocabulary (as in the training notes' "20m" config). */
const config: ModelConfig = {
  architecture: 'llama',
  vocabSize: 32000,
  hiddenSize: 288,
  intermediateSize: 768,
  numLayers: 6,
  numHeads: 6,
  numKvHeads: 2,
  headDim: 48,
  maxPositionEmbeddings: 2048,
  rmsNormEps: 1e-5,
  ropeTheta: 10000,
  ropeScaling: null,
  tieWordEmbeddings: false,
  attentionBias: false,
  qkNorm: false,
  bosTokenId: 1,
  eosTokenIds: [2],
  padTokenId: null,
};

const totalParams = countParameters(config);
const embeddingParams = config.vocabSize * config.hiddenSize;
const matmulParams = totalParams - embeddingParams; // lm_head + projections (+ tiny norms)
const loraParams = loraModulePaths(config, DEFAULT_LORA_CONFIG.targetModules).reduce((acc, { target }) => {
  const [i, o] = projectionShape(config, target);
  return acc + DEFAULT_LORA_CONFIG.rank * (i + o);
}, 0);

const random = mulberry32(42);
const randomSequence = (length: number, promptLength: number): TrainSequence => {
  const ids = Array.from({ length }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
  return { ids, lossMask: ids.map((_, i) => (i >= promptLength ? 1 : 0)) };
};

const root = mkdtempSync(join(tmpdir(), 'hearth-bench-train-'));
const weights = randomWeights(config, 1);

/** Average tokens/s of the gradient steps after the first (warm-up) one. */
function throughput(events: TrainingEvent[]): { tokensPerSecond: number; secondsPerStep: number } {
  const measured = events.filter((e) => e.type === 'gradient_step').slice(1).map((e) => e.data);
  const tokens = measured.reduce((a, d) => a + (d.num_tokens ?? d.train_tokens), 0);
  const seconds = measured.reduce((a, d) => a + (d.num_tokens ?? d.train_tokens) / d.tokens_per_second, 0);
  return { tokensPerSecond: tokens / seconds, secondsPerStep: seconds / measured.length };
}

async function sft(mode: 'full' | 'lora') {
  // 4 sequences x 129 tokens = 512 trained positions per optimizer step, one micro-batch.
  const sequences = Array.from({ length: 4 * (steps + 1) }, () => randomSequence(129, 1));
  const events: TrainingEvent[] = [];
  await runSft(
    { sequences, batchSize: 4, learningRate: 1e-4 },
    { model: { config, weights, baseModelName: 'bench-20m', mode }, checkpointDir: join(root, `sft-${mode}`), microBatchTokens: 512, log: () => {} },
    (e) => void events.push(e),
  );
  const { tokensPerSecond, secondsPerStep } = throughput(events);
  const flopsPerToken = mode === 'full' ? 6 * totalParams : 4 * matmulParams + 6 * loraParams;
  const gflops = (flopsPerToken * tokensPerSecond) / 1e9;
  return {
    mode,
    tokens_per_step: 512,
    tokens_per_second: Math.round(tokensPerSecond),
    seconds_per_step: Number(secondsPerStep.toFixed(3)),
    flop_per_token: flopsPerToken,
    achieved_gflops: Number(gflops.toFixed(2)),
    fraction_of_peak: Number((gflops / peakGflops).toFixed(4)),
  };
}

async function rlStep() {
  // 8 groups x 4 trajectories, each a 64-token prompt + 64-token sampled completion.
  const sequences: RlData['sequences'] = [];
  const groupRewards: number[][] = [];
  for (let g = 0; g < 8; g++) {
    groupRewards.push([1, 0, 0.5, 0]);
    for (let t = 0; t < 4; t++) {
      const s = randomSequence(128, 64);
      sequences.push({ ...s, logprobs: s.ids.map((_, i) => (i >= 64 ? -3 : NaN)), trajectory: g * 4 + t, group: g });
    }
  }
  const data: RlData = { sequences, groupRewards, numTrajectories: 32, numExceptions: 0, numChoicesWithoutLogprobs: 0 };
  const events: TrainingEvent[] = [];
  const started = performance.now();
  await runRl(
    { data, experimentalConfig: { learning_rate: 1e-5 } },
    { model: { config, weights, baseModelName: 'bench-20m', mode: 'lora' }, checkpointDir: join(root, 'rl'), log: () => {} },
    (e) => void events.push(e),
  );
  const total = (performance.now() - started) / 1000;
  const step = events.find((e) => e.type === 'gradient_step')!.data;
  return {
    groups: 8,
    trajectories_per_group: 4,
    tokens: step.train_tokens,
    gradient_steps: events.filter((e) => e.type === 'gradient_step').length,
    step_seconds: Number((step.train_tokens / step.tokens_per_second).toFixed(3)),
    job_seconds_including_model_setup_and_checkpoint: Number(total.toFixed(3)),
    tokens_per_second: Math.round(step.tokens_per_second),
  };
}

/** Plain GEMM speed on this backend for a square and two model-shaped products (best of 3). */
function gemmGflops(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [m, k, n] of [[1024, 1024, 1024], [512, 288, 768], [512, 288, 32000]]) {
    const a = tf.randomNormal([m, k]);
    const b = tf.randomNormal([k, n]);
    let best = Infinity;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      tf.matMul(a, b).dispose(); // kernels run synchronously on wasm
      best = Math.min(best, performance.now() - t0);
    }
    tf.dispose([a, b]);
    out[`${m}x${k}x${n}`] = Number(((2 * m * k * n) / (best / 1000) / 1e9).toFixed(1));
  }
  return out;
}

/** Progress on stderr, so stdout stays one JSON document. */
async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
  process.stderr.write(`bench-train: ${name}...\n`);
  return run();
}

try {
  const backend = await initTrainingBackend({ log: () => {} });
  const result = {
    date: new Date().toISOString(),
    backend: { name: backend.name, simd: backend.simd, threads: backend.threads },
    model: { ...config, parameters: totalParams, embedding_parameters: embeddingParams, lora_parameters: loraParams },
    peak_gflops_reference: peakGflops,
    gemm_gflops: gemmGflops(),
    sft_full: await phase('SFT full', () => sft('full')),
    sft_lora: await phase('SFT LoRA', () => sft('lora')),
    rl_step: await phase('RL step', rlStep),
    peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  rmSync(root, { recursive: true, force: true });
}
