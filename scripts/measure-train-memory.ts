// Peak memory of LoRA training on the graph engine against worker/training/graph/memory-plan.ts's estimate: one
// model per process (peak RSS is per process), a few SFT steps through runSft (the job's real path), then the
// measured peak RSS beside the plan's parts. What memory-plan.ts's calibration comment was measured with.
//
//   NODE_OPTIONS=--expose-gc npx tsx scripts/measure-train-memory.ts --model qwen05b|llama04b-q4k|llama04b [--rows 1] [--length 512] [--steps 2]
//
// qwen05b: Qwen2.5-0.5B's shapes, random float weights handed in as `weights` (an HF checkpoint: job.ts).
// llama04b-q4k: a 0.25B llama (d 1024, ffn 2816, 16 layers, vocab 32000, untied) stored as Q4_K blocks, handed in as
// a WeightSource (a GGUF: nothing but the blocks held before the graphs are built). llama04b: the same in float.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { ModelConfig, Weights } from '../src/runtime/model-config.js';
import type { WeightSource } from '../src/runtime/weight-source.js';
import { dequantize, GGML_TYPE } from '../src/runtime/gguf-dequant.js';
import { quantize } from '../src/runtime/gguf-quantize.js';
import type { TrainSequence } from '../worker/training/data.js';
import { runSft, type TrainingModelSpec } from '../worker/training/loop.js';
import { ALL_LORA_TARGETS } from '../worker/training/lora.js';
import { graphMemoryPlan, type PlannedTensor } from '../worker/training/graph/memory-plan.js';
import { expectedWeightShapes, mulberry32, normalSampler, randomWeights } from '../worker/training/tensor-utils.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const base = { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6, ropeTheta: 1e6, ropeScaling: null, qkNorm: false, bosTokenId: 1, eosTokenIds: [2], padTokenId: null };
const qwen05b: ModelConfig = { ...base, architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, tieWordEmbeddings: true, attentionBias: true };
const llama04b: ModelConfig = { ...base, architecture: 'llama', vocabSize: 32000, hiddenSize: 1024, intermediateSize: 2816, numLayers: 16, numHeads: 16, numKvHeads: 4, headDim: 64, tieWordEmbeddings: false, attentionBias: false };

/** Every matrix in `type`'s blocks, quantized 64 rows at a time (no whole float copy is ever made: it would stay in RSS). */
function blockSource(config: ModelConfig, type: number): WeightSource {
  const normal = normalSampler(mulberry32(1));
  const source: WeightSource = new Map();
  for (const [name, shape] of expectedWeightShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (shape.length !== 2) {
      const values = new Float32Array(n).fill(name.endsWith('norm.weight') ? 1 : 0);
      source.set(name, { shape, f32: () => values });
      continue;
    }
    const [N, K] = shape;
    const rowBytes = quantize(type, new Float32Array(K)).length;
    const bytes = new Uint8Array(N * rowBytes);
    const chunk = new Float32Array(64 * K);
    for (let r = 0; r < N; r += 64) {
      const rows = Math.min(64, N - r);
      for (let i = 0; i < rows * K; i++) chunk[i] = normal() * 0.02;
      bytes.set(quantize(type, chunk.subarray(0, rows * K)), r * rowBytes);
    }
    source.set(name, { shape, f32: () => dequantize(type, bytes, n), ggml: { type, bytes: () => bytes } });
  }
  return source;
}

const which = arg('model', 'qwen05b');
const rows = Number(arg('rows', '1'));
const length = Number(arg('length', '512'));
const steps = Number(arg('steps', '2'));
const config = which === 'qwen05b' ? qwen05b : llama04b;
const rssBefore = process.memoryUsage().rss;
let weights: Weights | undefined;
let source: WeightSource | undefined;
if (which === 'llama04b-q4k') source = blockSource(config, GGML_TYPE.Q4_K);
else weights = randomWeights(config, 1);
const tensors = new Map<string, PlannedTensor>();
if (source) for (const [name, t] of source) tensors.set(name, { shape: t.shape, ggmlType: t.ggml?.type });
else for (const [name, t] of weights!) tensors.set(name, { shape: t.shape });
const plan = graphMemoryPlan({ config, tensors, floatBaseHeld: !!weights, lora: { rank: 8, targets: ALL_LORA_TARGETS }, microBatch: { rows, length } });
(globalThis as { gc?: () => void }).gc?.(); // run with NODE_OPTIONS=--expose-gc: the float values the blocks were made from are garbage
const rssLoaded = process.memoryUsage().rss;

const random = mulberry32(42);
const sequence = (): TrainSequence => {
  const ids = Array.from({ length: length + 1 }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
  return { ids, lossMask: ids.map((_, i) => (i >= 1 ? 1 : 0)) };
};
const rssAtStep: number[] = [];
let rssBuilt = 0, peakBuilt = 0;
const secondsPerStep: number[] = [];
const root = mkdtempSync(join(os.tmpdir(), 'hearth-mem-'));
const model: TrainingModelSpec = { config, ...(weights ? { weights } : { source }), baseModelName: 'measure', mode: 'lora' };
const started = performance.now();
await runSft(
  { sequences: Array.from({ length: rows * steps }, sequence), batchSize: rows, learningRate: 1e-4 },
  { model, checkpointDir: join(root, 'ckpt'), microBatchTokens: rows * length, log: (l) => { if (l.includes('graphs built')) { rssBuilt = process.memoryUsage().rss; peakBuilt = process.resourceUsage().maxRSS * 1024; } console.error(l); } },
  (e) => { if (e.type === 'gradient_step') { rssAtStep.push(process.memoryUsage().rss); secondsPerStep.push(Number((e.data.num_tokens / e.data.tokens_per_second).toFixed(1))); } },
);
rmSync(root, { recursive: true, force: true });
const peak = process.resourceUsage().maxRSS * 1024;
const g = (b: number) => Number((b / 1e9).toFixed(2));
console.log(JSON.stringify({
  model: which, rows, length, steps, seconds: Number(((performance.now() - started) / 1000).toFixed(1)), seconds_per_step: secondsPerStep,
  measured: { rss_start_gb: g(rssBefore), rss_base_in_memory_gb: g(rssLoaded), rss_graphs_built_gb: g(rssBuilt), peak_rss_before_steps_gb: g(peakBuilt), rss_after_each_step_gb: rssAtStep.map(g), peak_rss_gb: g(peak) },
  estimated: Object.fromEntries(Object.entries(plan).map(([k, v]) => [k, g(v)])),
  estimated_over_measured: Number((plan.total / peak).toFixed(2)),
}));
