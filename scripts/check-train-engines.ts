// The graph engine's gradients against the TF.js engine's at the benchmark shapes (issue #41's bar: within 1e-4
// relative L2 on the 20M and 0.5B shapes, for SFT and each RL loss). The unit tests check small shapes
// (test/unit/training-graph-engine.test.ts, training-graph-jobs.test.ts); these shapes take minutes and GBs.
//
//   npx tsx scripts/check-train-engines.ts [--shapes 20m,qwen05b] [--tokens 256]
//
// Per shape: one micro-batch of packed sequences, LoRA r 8 on all seven projections with random B (a zero B hides
// A's gradient), and for each loss (SFT's weighted NLL; CISPO, PPO-clip, sequence-level IS, k3 KL) the loss and
// every adapter gradient on both engines. Prints JSON: the worst relative L2 per loss.
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../src/runtime/model-config.js';
import { weightsSource } from '../src/runtime/weight-source.js';
import { defaultPolicyLossConfig, type PolicyLossConfig } from '../src/protocol/policy-loss.js';
import { initTrainingBackend } from '../worker/training/backend.js';
import { buildMicroBatch, trainedPositions } from '../worker/training/data.js';
import { GraphLoraModel } from '../worker/training/graph/graph-model.js';
import { buildTrainingModel } from '../worker/training/loop.js';
import { LoraAdapters } from '../worker/training/lora.js';
import { policyLoss, weightedNll } from '../worker/training/losses.js';
import { logprobsAt, type TrainingModel } from '../worker/training/token-logprobs.js';
import { mulberry32, randomWeights, relL2 } from '../worker/training/tensor-utils.js';
import { machineLabel } from './machine.js';

const arg = (name: string, fallback: string) => { const i = process.argv.indexOf(`--${name}`); return i >= 0 ? process.argv[i + 1] : fallback; };

const SHAPES: Record<string, ModelConfig> = {
  '20m': {
    architecture: 'llama', vocabSize: 32000, hiddenSize: 288, intermediateSize: 768, numLayers: 6, numHeads: 6, numKvHeads: 2,
    headDim: 48, maxPositionEmbeddings: 2048, rmsNormEps: 1e-5, ropeTheta: 10000, ropeScaling: null, tieWordEmbeddings: false,
    attentionBias: false, qkNorm: false, bosTokenId: 1, eosTokenIds: [2], padTokenId: null,
  },
  qwen05b: {
    architecture: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2,
    headDim: 64, maxPositionEmbeddings: 32768, rmsNormEps: 1e-6, ropeTheta: 1000000, ropeScaling: null, tieWordEmbeddings: true,
    attentionBias: true, qkNorm: false, bosTokenId: 151643, eosTokenIds: [151645], padTokenId: null,
  },
};

const LOSSES: [string, PolicyLossConfig | null][] = [
  ['sft_nll', null],
  ['cispo', defaultPolicyLossConfig('cispo')],
  ['ppo_clip', defaultPolicyLossConfig('ppo')],
  ['sequence_is_truncated', { ...defaultPolicyLossConfig('ppo'), importanceSamplingLevel: 'sequence', truncatedImportanceSampling: 1.5 }],
  ['k3_kl', { ...defaultPolicyLossConfig('cispo'), klPenaltyCoef: 0.1 }],
];

await initTrainingBackend({ log: () => {} });
const tokens = Number(arg('tokens', '256'));
const out: Record<string, unknown> = { date: new Date().toISOString(), machine: machineLabel(), tokens };
for (const shape of arg('shapes', '20m,qwen05b').split(',')) {
  const config = SHAPES[shape];
  const weights = randomWeights(config, 1);
  const random = mulberry32(7);
  // Three sequences in rows of the longest: tokens/2, tokens/4, tokens/4 positions.
  const lengths = [tokens / 2, tokens / 4, tokens / 4].map((n) => n + 1);
  const sequences = lengths.map((n) => {
    const ids = Array.from({ length: n }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
    return { ids, lossMask: ids.map((_, i) => (i >= 8 ? 1 : 0)), logprobs: ids.map((_, i) => (i >= 8 ? -12 + random() : NaN)), advantage: 1 };
  });
  const mb = buildMicroBatch(sequences, sequences.map((_, i) => i));
  const at = trainedPositions(mb);
  const n = at.index.length;
  const w = Float32Array.from({ length: n }, (_, j) => ((j % 5) - 2) / n);
  const advantages = Float32Array.from({ length: n }, (_, j) => (j % 3) - 1);
  const ref = Float32Array.from({ length: n }, () => -11 + random());
  const lora = LoraAdapters.create(config, { rank: 8, alpha: 16, dropout: 0, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }, 5);
  lora.variables().forEach((v, i) => v.assign(tf.randomNormal(v.shape, 0, 0.02, 'float32', 9 + i)));
  const measure = (model: TrainingModel) => LOSSES.map(([, cfg]) => {
    const { value, grads } = tf.variableGrads(() => {
      const logp = logprobsAt(model, mb, at, true);
      if (!cfg) return weightedNll(logp, w);
      return policyLoss(logp, { oldLogprobs: at.oldLogprobs, advantages, weights: Float32Array.from({ length: n }, () => 1 / n), sequenceIndex: at.sequenceIndex, numSequences: sequences.length, refLogprobs: ref }, cfg).loss;
    }, lora.variables());
    const r = { loss: value.dataSync()[0], grads: lora.variables().map((v) => Float32Array.from(grads[v.name].dataSync() as Float32Array)) };
    tf.dispose([value, ...Object.values(grads)]);
    return r;
  });
  const started = performance.now();
  const graph = GraphLoraModel.build(config, weightsSource(weights), lora);
  const onGraph = measure(graph);
  graph.engine.dispose();
  const tfjs = buildTrainingModel({ config, weights, baseModelName: 'check', mode: 'lora', recompute: 'never' });
  tfjs.lora!.dispose();
  tfjs.lora = lora;
  const onTfjs = measure(tfjs);
  out[shape] = Object.fromEntries(LOSSES.map(([name], i) => [name, {
    loss_rel: Math.abs(onGraph[i].loss - onTfjs[i].loss) / Math.abs(onTfjs[i].loss),
    worst_gradient_rel_l2: Math.max(...onTfjs[i].grads.map((g, k) => relL2(onGraph[i].grads[k], g))),
  }]));
  (out[shape] as Record<string, unknown>).seconds = Math.round((performance.now() - started) / 1000);
  process.stderr.write(`check-train-engines: ${shape} done\n`);
}
console.log(JSON.stringify(out, null, 1));
