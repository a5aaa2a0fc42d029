// Whole jobs on the graph engine against the same jobs on the TF.js engine (HEARTH_TRAIN_ENGINE=tfjs): SFT,
// and RL with every policy loss the trainer has (CISPO, PPO-clip, sequence-level
// importance sampling with truncation, negative-advantage caps, ratio masking, Kimi K2's tau, the k3 KL to the
// base) over several optimizer steps with gradient accumulation. Each step's loss and gradient norm, and the
// adapters written, agree (fp32 summation order: ~1e-6; see the tolerances below); a wrong backward moves them O(1).
// Per-token weights of both signs are test/unit/training-graph-engine.test.ts's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { rlSettingsFromExperimentalConfig } from '../../src/protocol/rl-settings.js';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
import type { TrainSequence } from '../../worker/training/data.js';
import { runRl, runSft, type TrainingEvent, type TrainingResult } from '../../worker/training/loop.js';
import { GraphEngine } from '../../worker/training/graph/graph-engine.js';
import type { RlData } from '../../worker/training/rl-data.js';
import { mulberry32, randomWeights } from '../../worker/training/tensor-utils.js';
import { relL2, tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-graph-jobs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
}, 180_000);
afterEach(() => {
  delete process.env.HEARTH_TRAIN_ENGINE;
});

const config = tinyConfig({ architecture: 'qwen2', attentionBias: true, vocabSize: 400, hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16 });
const weights = randomWeights(config, 7);
let jobCounter = 0;

async function onEngine(engine: 'graph' | 'tfjs', run: (dir: string) => Promise<TrainingResult>) {
  process.env.HEARTH_TRAIN_ENGINE = engine;
  const dir = join(root, `job-${jobCounter++}`);
  const result = await run(dir);
  expect(result.engine.name).toBe(engine);
  const checkpoint = await readCheckpoint(dir);
  if (checkpoint.kind !== 'lora') throw new Error('expected a LoRA checkpoint');
  return { result, tensors: checkpoint.tensors };
}

function expectSameJobs(graph: Awaited<ReturnType<typeof onEngine>> & { events: TrainingEvent[] }, tfjs: Awaited<ReturnType<typeof onEngine>> & { events: TrainingEvent[] }) {
  const steps = (events: TrainingEvent[]) => events.filter((e) => e.type === 'gradient_step').map((e) => e.data);
  const [g, t] = [steps(graph.events), steps(tfjs.events)];
  expect(g.length).toBe(t.length);
  expect(g.length).toBeGreaterThan(1);
  g.forEach((step, i) => {
    for (const key of ['loss', 'grad_norm', 'policy_loss', 'entropy', 'kl_policy_ref']) {
      if (!(key in t[i])) continue;
      expect(Math.abs(step[key] - t[i][key]), `step ${i} ${key}: ${step[key]} vs ${t[i][key]}`).toBeLessThanOrEqual(1e-4 * Math.max(1e-3, Math.abs(t[i][key])));
    }
  });
  expect(graph.tensors.size).toBe(tfjs.tensors.size);
  // The adapters after several AdamW steps: Adam's early steps move each element by about lr · sign(gradient), so an
  // element whose gradient is near zero can step either way on rounding alone; 1e-3 still fails any wrong backward.
  for (const [name, t] of tfjs.tensors) expect(relL2(graph.tensors.get(name)!.data, t.data), name).toBeLessThan(1e-3);
  // A steady step moves inputs, scalars, logprobs and entropies: less than the adapters, which cross once per job
  // (up at the start, down for the checkpoint) with the optimizer on the device.
  const adapterBytes = [...graph.tensors.values()].reduce((a, x) => a + x.data.byteLength, 0);
  expect(graph.result.engine.lastStepHostDeviceBytes).toBeGreaterThan(0);
  expect(graph.result.engine.lastStepHostDeviceBytes).toBeLessThan(adapterBytes);
  expect(graph.result.engine.hostDeviceBytes).toBeGreaterThan(2 * adapterBytes);
}

describe('jobs on the graph engine equal the TF.js engine', () => {
  it('SFT with gradient accumulation', async () => {
    const random = mulberry32(3);
    const sequences: TrainSequence[] = [30, 21, 17, 26].map((n) => {
      const ids = Array.from({ length: n }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
      return { ids, lossMask: ids.map((_, i) => (i >= 3 ? 1 : 0)) };
    });
    const run = (engine: 'graph' | 'tfjs') => {
      const events: TrainingEvent[] = [];
      return onEngine(engine, (dir) => runSft({ sequences, batchSize: 2, learningRate: 3e-3 }, { model: { config, weights, baseModelName: 't', mode: 'lora' }, checkpointDir: dir, microBatchTokens: 32, seed: 4 }, (e) => void events.push(e))).then((r) => ({ ...r, events }));
    };
    expectSameJobs(await run('graph'), await run('tfjs'));
  }, 120_000);

  const rlData = (): RlData => {
    const random = mulberry32(5);
    const sequences: RlData['sequences'] = [];
    const groupRewards: number[][] = [];
    for (let g = 0; g < 3; g++) {
      groupRewards.push([1, 0, 0.25, 0.8]);
      for (let t = 0; t < 4; t++) {
        const n = 14 + ((g * 4 + t) % 5) * 3;
        const ids = Array.from({ length: n }, () => 3 + Math.floor(random() * (config.vocabSize - 3)));
        sequences.push({ ids, lossMask: ids.map((_, i) => (i >= 6 ? 1 : 0)), logprobs: ids.map((_, i) => (i >= 6 ? -5 - random() * 2 : NaN)), trajectory: g * 4 + t, group: g });
      }
    }
    return { sequences, groupRewards, numTrajectories: 12, numExceptions: 0, numChoicesWithoutLogprobs: 0 };
  };

  const losses: [string, Record<string, unknown>][] = [
    ['CISPO', { loss_fn: 'cispo' }],
    ['PPO-clip', { loss_fn: 'ppo', epsilon: 0.1 }],
    ['sequence-level importance sampling, truncated, negative advantages capped', { loss_fn: 'ppo', importance_sampling_level: 'sequence', truncated_importance_sampling: 1.5, max_negative_advantage_importance_sampling_weight: 0.5 }],
    ['ratio mask and Kimi K2 tau', { loss_fn: 'cispo', mask_prob_ratio: true, kimi_k2_tau: 0.3 }],
    ['k3 KL to the base', { loss_fn: 'cispo', kl_penalty_coef: 0.2 }],
  ];
  for (const [name, experimental] of losses) {
    it(`RL: ${name}`, async () => {
      const settings = rlSettingsFromExperimentalConfig({ learning_rate: 5e-3, packed_sequence_length: 80, ...experimental });
      const run = (engine: 'graph' | 'tfjs') => {
        const events: TrainingEvent[] = [];
        return onEngine(engine, (dir) => runRl({ data: rlData(), settings }, { model: { config, weights, baseModelName: 't', mode: 'lora' }, checkpointDir: dir, microBatchTokens: 48, seed: 4 }, (e) => void events.push(e))).then((r) => ({ ...r, events }));
      };
      expectSameJobs(await run('graph'), await run('tfjs'));
    }, 120_000);
  }

  it('RL measured, not trained (forward_backward): the same loss, and no forward keeps anything for a backward', async () => {
    const settings = rlSettingsFromExperimentalConfig({ learning_rate: 5e-3, packed_sequence_length: 80, loss_fn: 'cispo' });
    const forward = vi.spyOn(GraphEngine.prototype, 'forward');
    try {
      const measure = async (engine: 'graph' | 'tfjs') => {
        process.env.HEARTH_TRAIN_ENGINE = engine;
        const events: TrainingEvent[] = [];
        const result = await runRl({ data: rlData(), settings, forwardOnly: true }, { model: { config, weights, baseModelName: 't', mode: 'lora' }, checkpointDir: join(root, `measure-${jobCounter++}`), microBatchTokens: 48, seed: 4 }, (e) => void events.push(e));
        expect(result.engine.name).toBe(engine);
        return events.find((e) => e.type === 'gradient_step')!.data;
      };
      const [graph, tfjs] = [await measure('graph'), await measure('tfjs')];
      expect(Math.abs(graph.loss - tfjs.loss)).toBeLessThanOrEqual(1e-4 * Math.max(1e-3, Math.abs(tfjs.loss)));
      expect(forward.mock.calls.length).toBeGreaterThan(0);
      for (const call of forward.mock.calls) expect(call[4]).toBe(false); // backwardFollows
    } finally {
      forward.mockRestore();
    }
  }, 120_000);
});
