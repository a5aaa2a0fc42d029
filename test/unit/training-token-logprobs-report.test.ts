// A measuring job's per-token logprobs (return_token_logprobs, docs/art.md "Token logprobs"): the worker's report
// holds, for each measured input row, log p(ids[t + 1] | ids[..t]) at the weights the job measures at, NaN where not
// trained; checked here against a log-softmax of the model's full logits computed apart (float64 in JS), one
// sequence at a time, at a trained checkpoint's weights (so a report at the base weights would fail), for SFT and RL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
import { buildMicroBatch, type TrainSequence } from '../../worker/training/data.js';
import { buildTrainingModel, runRl, runSft, type TrainingEvent, type TrainingModelSpec } from '../../worker/training/loop.js';
import { rlDataFromTokenSequences } from '../../worker/training/rl-token-data.js';
import { tokenizeSftRows } from '../../worker/training/sft-data.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { decodeTokenLogprobs, type TokenLogprobsReport } from '../../src/protocol/token-logprobs.js';
import { rlSettingsFromExperimentalConfig } from '../../src/protocol/rl-settings.js';
import { toyTokenizer } from '../helpers/toy-chat-tokenizer.js';
import { randomIds, tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-token-logprobs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

const cfg = tinyConfig({ hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16 });
const base: TrainingModelSpec = { config: cfg, weights: randomWeights(cfg, 7), baseModelName: 'tiny', mode: 'lora', lora: { rank: 4 } };

/** Token rows as a native run sends them: row 1 has no trained target (dropped by the trainer, so rows ≠ indices). */
const rows = [
  { token_ids: randomIds(20, cfg.vocabSize, 1), mask: (t: number) => (t >= 8 ? 1 : 0) },
  { token_ids: randomIds(9, cfg.vocabSize, 2), mask: () => 0 },
  { token_ids: randomIds(14, cfg.vocabSize, 3), mask: (t: number) => (t >= 4 && t !== 9 ? 1 : 0) },
].map((r) => ({ token_ids: r.token_ids, loss_mask: r.token_ids.map((_, t) => r.mask(t)) }));

/** log p(ids[t + 1] | ids[..t]) for every t, from the model's full logits, log-softmax in float64. */
function independentLogprobs(spec: TrainingModelSpec, ids: number[]): number[] {
  const model = buildTrainingModel(spec, 5);
  try {
    const mb = buildMicroBatch([{ ids, lossMask: ids.map(() => 1) }], [0]);
    expect(Array.from(mb.targets)).toEqual(ids.slice(1)); // rows are the positions 0..T-2, in order
    const logits = tf.tidy(() => model.logits(model.hidden(mb.batch, false)));
    const values = logits.arraySync() as number[][];
    logits.dispose();
    return values.map((row, t) => {
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0));
      return row[ids[t + 1]] - lse;
    });
  } finally {
    model.dispose();
  }
}

function reported(events: TrainingEvent[]): Map<number, Float32Array> {
  const steps = events.filter((e) => e.type === 'gradient_step');
  expect(steps).toHaveLength(1);
  const report = (steps[0] as { tokenLogprobs?: TokenLogprobsReport }).tokenLogprobs;
  expect(report).toBeDefined();
  return decodeTokenLogprobs(report!);
}

/** Every reported value equals the independent one within 1e-4 where trained, NaN elsewhere; untrained rows absent. */
function expectAligned(spec: TrainingModelSpec, byRow: Map<number, Float32Array>): void {
  expect([...byRow.keys()]).toEqual([0, 2]);
  for (const [row, values] of byRow) {
    const { token_ids: ids, loss_mask: mask } = rows[row];
    expect(values.length).toBe(ids.length - 1);
    const expected = independentLogprobs(spec, ids);
    values.forEach((v, t) => {
      if (mask[t + 1]) expect(Math.abs(v - expected[t]), `row ${row} position ${t}`).toBeLessThan(1e-4);
      else expect(v, `row ${row} position ${t} is not trained`).toBeNaN();
    });
  }
}

describe('token logprobs of a measuring job', () => {
  let trained: TrainingModelSpec;
  beforeAll(async () => {
    // A trained checkpoint: its LoRA B is nonzero, so its logprobs differ from the base model's.
    const sequences: TrainSequence[] = rows.map((r) => ({ ids: r.token_ids, lossMask: r.loss_mask }));
    await runSft({ sequences: [sequences[0], sequences[2]], batchSize: 2, learningRate: 5e-2 }, { model: base, checkpointDir: join(root, 'step1'), seed: 5, log: () => {} }, () => {});
    trained = { ...base, resumeFrom: await readCheckpoint(join(root, 'step1')) };
  });

  it('SFT (forwardOnly): every trained target at the measured weights, by input row, NaN elsewhere', async () => {
    const { sequences } = await tokenizeSftRows(rows, toyTokenizer);
    expect(sequences.map((s) => s.row)).toEqual([0, 2]);
    const events: TrainingEvent[] = [];
    await runSft({ sequences, batchSize: 'auto', learningRate: 0, forwardOnly: true, returnTokenLogprobs: true }, { model: trained, checkpointDir: join(root, 'sft'), seed: 5, log: () => {} }, (e) => void events.push(e));
    const byRow = reported(events);
    expectAligned(trained, byRow);
    // The weights matter: the base model's logprobs are not these.
    const atBase = independentLogprobs(base, rows[0].token_ids);
    expect(Math.max(...Array.from(byRow.get(0)!).map((v, t) => (rows[0].loss_mask[t + 1] ? Math.abs(v - atBase[t]) : 0)))).toBeGreaterThan(1e-3);
    // The measured loss is the mean NLL of the reported values.
    const trainedValues = [...byRow.values()].flatMap((v) => Array.from(v).filter((x) => !Number.isNaN(x)));
    const loss = (events.find((e) => e.type === 'gradient_step')!.data as Record<string, number>).loss;
    expect(Math.abs(loss + trainedValues.reduce((a, v) => a + v, 0) / trainedValues.length)).toBeLessThan(1e-4);
  });

  it('RL over client token sequences (forwardOnly): the same, by input row', async () => {
    const data = rlDataFromTokenSequences(rows.map((r) => ({
      ...r, logprobs: r.token_ids.map((_, t) => (r.loss_mask[t] ? -1 : 0)), advantages: r.loss_mask.map((m, t) => (m ? (t % 2 ? 1 : -0.5) : 0)), weights: r.loss_mask.map(() => 1),
    })));
    const events: TrainingEvent[] = [];
    const settings = rlSettingsFromExperimentalConfig({ learning_rate: 1e-2 });
    await runRl({ data, settings, forwardOnly: true, returnTokenLogprobs: true }, { model: trained, checkpointDir: join(root, 'rl'), seed: 5, log: () => {} }, (e) => void events.push(e));
    expectAligned(trained, reported(events));
  });

  it('without the flag nothing is reported', async () => {
    const { sequences } = await tokenizeSftRows(rows, toyTokenizer);
    const events: TrainingEvent[] = [];
    await runSft({ sequences, batchSize: 'auto', learningRate: 0, forwardOnly: true }, { model: trained, checkpointDir: join(root, 'plain'), seed: 5, log: () => {} }, (e) => void events.push(e));
    expect(events.some((e) => 'tokenLogprobs' in e)).toBe(false);
  });
});
