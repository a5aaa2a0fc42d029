// A training job from JSON + folders, as the training worker runs it: a generated tiny model folder,
// RL from trajectory groups (sampled token ids as token_id:N), continuing from the last checkpoint,
// SFT from train.jsonl, and the adapters served by the inference runtime.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeTinyModel, shapeConfig } from '../../src/synthetic-models/tiny-model.js';
import { writeGgufModel } from '../../src/synthetic-models/tiny-gguf.js';
import { importModel, modelDir as storeModelDir } from '../../src/models/model-store.js';
import * as hfModel from '../../src/runtime/hf-model.js';
import { loadModel, loadTokenizer } from '../../src/runtime/load-model.js';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
import { runTrainingJob } from '../../worker/training/job.js';
import type { TrainingEvent } from '../../worker/training/loop.js';
import type { TrajectoryGroupJson } from '../../worker/training/rl-data.js';
import { rlSettingsFromExperimentalConfig } from '../../src/protocol/rl-settings.js';

// readModelWeights (the whole base dequantized to float32) and openModelWeights (config + a lazy source), counted:
// the job must read the base the way its engine needs it.
const reads = vi.hoisted(() => ({ float: 0, opened: 0 }));
vi.mock('../../src/runtime/hf-model.js', async (importOriginal) => {
  const orig = await importOriginal<typeof hfModel>();
  return {
    ...orig,
    readModelWeights: (...a: Parameters<typeof orig.readModelWeights>) => { reads.float++; return orig.readModelWeights(...a); },
    openModelWeights: (...a: Parameters<typeof orig.openModelWeights>) => { reads.opened++; return orig.openModelWeights(...a); },
  };
});
beforeEach(() => { reads.float = 0; reads.opened = 0; });

const root = mkdtempSync(join(tmpdir(), 'hearth-job-'));
const modelDir = join(root, 'model');
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(() => {
  makeTinyModel({ dir: modelDir, size: 'tiny', seed: 3 });
});

/** Trajectory groups whose choices carry the token ids the tokenizer gives the answers. */
async function groups(): Promise<TrajectoryGroupJson[]> {
  const tokenizer = loadTokenizer(modelDir);
  const imEnd = tokenizer.tokenToId('<|im_end|>')!;
  const choice = async (text: string) => {
    const ids = [...(await tokenizer.encode(text, { addSpecialTokens: false })), imEnd];
    return {
      finish_reason: 'stop',
      index: 0,
      logprobs: { content: ids.map((id) => ({ token: `token_id:${id}`, bytes: [], logprob: -2, top_logprobs: [] })), refusal: null },
      message: { content: text, role: 'assistant', tool_calls: null },
    };
  };
  const trajectory = async (q: string, a: string, reward: number) => ({
    messages_and_choices: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: q }, await choice(a)],
    reward,
  });
  return [
    { trajectories: [await trajectory('Capital of France?', 'Paris', 1), await trajectory('Capital of France?', 'Rome', 0)] },
    { trajectories: [await trajectory('2+2?', '4', 1), await trajectory('2+2?', '5', 0), await trajectory('2+2?', 'four', 0.5)] },
  ];
}

const adapterB = async (dir: string) => {
  const c = await readCheckpoint(dir);
  if (c.kind !== 'lora') throw new Error('expected LoRA');
  return c.tensors.get('base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight')!.data;
};
const norm = (x: Float32Array) => Math.sqrt(x.reduce((a, v) => a + v * v, 0));

describe('runTrainingJob', () => {
  it('RL: trains from trajectory groups, then continues from its checkpoint; inference serves the adapter', async () => {
    const events: TrainingEvent[] = [];
    const step1 = join(root, 'ckpt', 'step-1');
    await runTrainingJob(
      { kind: 'rl', modelDir, baseModelName: 'tiny', resumeFrom: null, checkpointDir: step1, trajectoryGroups: await groups(), settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-3 }) },
      (e) => void events.push(e),
      { log: () => {} },
    );
    expect(events.map((e) => e.type)).toEqual(['training_started', 'gradient_step']);
    // "four" earns the group's mean reward: advantage 0, so it is not trained on (as in ART); num_trajectories
    // counts every trajectory submitted, ART's data/step_num_trajectories (issue #20, W5).
    expect(events[1].data).toMatchObject({ num_groups_submitted: 2, num_groups_trainable: 2, num_trajectories: 5 });
    const b1 = await adapterB(step1);
    expect(norm(b1)).toBeGreaterThan(0);
    expect(reads).toEqual({ float: 0, opened: 1 }); // LoRA without dropout: the graph engine over the stored base

    // A second job with a negligible learning rate continues from step 1: its adapter stays at step 1's.
    const step2 = join(root, 'ckpt', 'step-2');
    await runTrainingJob(
      { kind: 'rl', modelDir, baseModelName: 'tiny', resumeFrom: step1, checkpointDir: step2, trajectoryGroups: await groups(), settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-12 }) },
      () => {},
      { log: () => {} },
    );
    const b2 = await adapterB(step2);
    const diff = norm(b2.map((v, i) => v - b1[i]));
    expect(diff).toBeLessThan(1e-6 * norm(b1) + 1e-9);

    // The inference runtime loads the checkpoint and it changes the model's output.
    const model = await loadModel(modelDir, { lora: true, intraOpThreads: 1 });
    const adapter = model.loadAdapter(step1);
    const prompt = [5, 9, 14, 20];
    const [base, adapted] = await model.runner.forward([null, adapter].map((a) => ({ tokens: prompt, kv: model.runner.newSequence(), adapter: a })));
    expect(Math.max(...base.map((v, i) => Math.abs(v - adapted[i])))).toBeGreaterThan(1e-4);
    await model.runner.release();
  });

  it('SFT: trains on train.jsonl with per-batch learning rates', async () => {
    const rows = [
      { messages: [{ role: 'user', content: 'Say hi.' }, { role: 'assistant', content: 'Hi!' }] },
      { messages: [{ role: 'user', content: 'Say bye.' }, { role: 'assistant', content: 'Bye!' }] },
      { messages: [{ role: 'user', content: 'Count to three.' }, { role: 'assistant', content: '1, 2, 3.' }] },
    ];
    const events: TrainingEvent[] = [];
    const result = await runTrainingJob(
      { kind: 'sft', modelDir, baseModelName: 'tiny', resumeFrom: null, checkpointDir: join(root, 'sft', 'step-1'), trainJsonl: rows.map((r) => JSON.stringify(r)).join('\n'), config: { batch_size: 2, learning_rate: [1e-3, 5e-4] } },
      (e) => void events.push(e),
      { log: () => {} },
    );
    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: 2 } });
    expect(events.slice(1).map((e) => (e.data as Record<string, number>).learning_rate)).toEqual([1e-3, 5e-4]);
    expect(result.steps).toBe(2);
  });

  it('SFT on a GGUF (Q4_K) model folder: the graph engine trains over the stored blocks, no float32 copy of the base is made, inference serves the adapter', async () => {
    // hidden and intermediate sizes multiples of 256, so every projection stays in Q4_K blocks (MatMulNBits).
    const config = { ...shapeConfig('tiny'), hiddenSize: 256, intermediateSize: 512, numHeads: 4, numKvHeads: 2, headDim: 64, numLayers: 2 };
    const file = join(root, 'q4k.gguf');
    writeGgufModel(file, { config, type: 'Q4_K', seed: 5 });
    const home = join(root, 'home');
    await importModel(home, file, { id: 'test/q4k', ignoreMemory: true });
    const dir = storeModelDir(home, 'test/q4k');
    const rows = [
      { messages: [{ role: 'user', content: 'Say hi.' }, { role: 'assistant', content: 'Hi there, friend!' }] },
      { messages: [{ role: 'user', content: 'Count to three.' }, { role: 'assistant', content: '1, 2, 3.' }] },
    ];
    const logs: string[] = [];
    const ckpt = join(root, 'gguf-sft', 'step-1');
    const result = await runTrainingJob(
      { kind: 'sft', modelDir: dir, baseModelName: 'test/q4k', resumeFrom: null, checkpointDir: ckpt, trainJsonl: rows.map((r) => JSON.stringify(r)).join('\n'), config: { batch_size: 2, learning_rate: 1e-2 } },
      () => {},
      { log: (l) => logs.push(l) },
    );
    expect(result.engine.name).toBe('graph');
    expect(result.engine.hostDeviceBytes).toBeGreaterThan(0);
    expect(reads).toEqual({ float: 0, opened: 1 });
    expect(logs.join('\n')).toMatch(/engine: ONNX Runtime graphs on cpu/);
    expect(norm(await adapterB(ckpt))).toBeGreaterThan(0);

    const model = await loadModel(dir, { lora: true, intraOpThreads: 1 });
    const adapter = model.loadAdapter(ckpt);
    const prompt = [5, 9, 14, 20];
    const [base, adapted] = await model.runner.forward([null, adapter].map((a) => ({ tokens: prompt, kv: model.runner.newSequence(), adapter: a })));
    expect(Math.max(...base.map((v, i) => Math.abs(v - adapted[i])))).toBeGreaterThan(1e-4);
    await model.runner.release();
  }, 120_000);

  it('LoRA with dropout trains on TF.js from the float32 base; continuing its checkpoint stays there whatever the request says', async () => {
    const rows = [{ messages: [{ role: 'user', content: 'Say hi.' }, { role: 'assistant', content: 'Hi!' }] }];
    const trainJsonl = rows.map((r) => JSON.stringify(r)).join('\n');
    const step1 = join(root, 'dropout', 'step-1');
    const first = await runTrainingJob(
      { kind: 'sft', modelDir, baseModelName: 'tiny', resumeFrom: null, checkpointDir: step1, trainJsonl, lora: { dropout: 0.1 } },
      () => {},
      { log: () => {} },
    );
    expect(first.engine.name).toBe('tfjs');
    expect(reads).toEqual({ float: 1, opened: 0 });
    // The checkpoint's own LoRA config (dropout 0.1) decides, not the request's dropout 0.
    const second = await runTrainingJob(
      { kind: 'sft', modelDir, baseModelName: 'tiny', resumeFrom: step1, checkpointDir: join(root, 'dropout', 'step-2'), trainJsonl, lora: { dropout: 0 } },
      () => {},
      { log: () => {} },
    );
    expect(second.engine.name).toBe('tfjs');
    expect(reads).toEqual({ float: 2, opened: 0 });
  }, 120_000);
});
