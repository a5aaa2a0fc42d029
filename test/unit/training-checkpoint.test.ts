// PEFT adapter checkpoints: names, layout, round trip, atomic folder.
import * as tf from '@tensorflow/tfjs-core';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { readCheckpoint, writeCheckpoint } from '../../worker/training/checkpoint.js';
import { DEFAULT_LORA_CONFIG, LoraAdapters } from '../../worker/training/lora.js';
import { LlamaModel } from '../../worker/training/model.js';
import { decodeSafetensors, encodeSafetensors } from '../../src/runtime/safetensors.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-ckpt-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});

describe('checkpoints', () => {
  it('safetensors: header layout and byte-exact round trip', () => {
    const tensors = new Map([
      ['b', { shape: [2], data: Float32Array.from([1.5, -2]) }],
      ['a', { shape: [1, 3], data: Float32Array.from([0.25, 3, 4]) }],
    ]);
    const bytes = encodeSafetensors(tensors);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    expect((8 + headerLength) % 8).toBe(0);
    const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString());
    expect(header.a).toEqual({ dtype: 'F32', shape: [1, 3], data_offsets: [0, 12] });
    expect(header.b).toEqual({ dtype: 'F32', shape: [2], data_offsets: [12, 20] });
    const back = decodeSafetensors(bytes).tensors;
    expect(Array.from(back.get('a')!.data)).toEqual([0.25, 3, 4]);
    expect(Array.from(back.get('b')!.data)).toEqual([1.5, -2]);
  });

  it('writes a PEFT adapter and reads it back into identical adapters', async () => {
    const cfg = tinyConfig();
    const lora = LoraAdapters.create(cfg, { ...DEFAULT_LORA_CONFIG, rank: 4, alpha: 8 }, 3);
    // Make B non-zero so the round trip checks both matrices and their orientation.
    for (const b of lora.bT.values()) b.assign(tf.randomNormal(b.shape, 0, 0.1, 'float32', 9));
    const dir = join(root, 'model-1', 'step-1');
    await writeCheckpoint(dir, { kind: 'lora', lora: lora.config, tensors: lora.toPeftTensors(), baseModel: 'tiny-llama' });

    expect(readdirSync(dir).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    expect(readdirSync(join(root, 'model-1'))).toEqual(['step-1']); // no temp folder left behind
    const config = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    expect(config).toMatchObject({ peft_type: 'LORA', task_type: 'CAUSAL_LM', r: 4, lora_alpha: 8, base_model_name_or_path: 'tiny-llama' });
    expect(config.target_modules).toEqual(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']);

    const { tensors } = decodeSafetensors(readFileSync(join(dir, 'adapter_model.safetensors')));
    expect(tensors.size).toBe(2 * 7 * cfg.numLayers);
    // PEFT layout: lora_A [r, in], lora_B [out, r]; k_proj out = kv heads * head dim = 64.
    expect(tensors.get('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight')!.shape).toEqual([4, 128]);
    expect(tensors.get('base_model.model.model.layers.3.self_attn.k_proj.lora_B.weight')!.shape).toEqual([64, 4]);
    expect(tensors.get('base_model.model.model.layers.2.mlp.down_proj.lora_A.weight')!.shape).toEqual([4, 344]);

    const read = await readCheckpoint(dir);
    if (read.kind !== 'lora') throw new Error('expected a LoRA checkpoint');
    expect(read.lora).toEqual(lora.config);
    const again = LoraAdapters.fromPeftTensors(cfg, read.lora, read.tensors);
    for (const [path, a] of lora.aT) {
      expect(Array.from(again.aT.get(path)!.dataSync())).toEqual(Array.from(a.dataSync()));
      expect(Array.from(again.bT.get(path)!.dataSync())).toEqual(Array.from(lora.bT.get(path)!.dataSync()));
    }
    // The adapted model computes the same logits before and after the round trip.
    const model = LlamaModel.fromWeights(cfg, randomWeights(cfg, 1), { trainable: false });
    const batch = { rows: 1, length: 5, inputIds: Int32Array.from([3, 9, 4, 7, 1]), positions: Int32Array.from([0, 1, 2, 3, 4]), segmentIds: new Int32Array(5).fill(1) };
    model.lora = lora;
    const before = model.forward(batch).dataSync();
    model.lora = again;
    const after = model.forward(batch).dataSync();
    expect(Array.from(after)).toEqual(Array.from(before));
    model.dispose();
    lora.dispose();
  });

  it('refuses to overwrite an existing checkpoint folder', async () => {
    const dir = join(root, 'model-2', 'step-1');
    const contents = { kind: 'full' as const, weights: new Map([['x', { shape: [1], data: Float32Array.from([1]) }]]) };
    await writeCheckpoint(dir, contents);
    await expect(writeCheckpoint(dir, contents)).rejects.toThrow(/already exists/);
    const read = await readCheckpoint(dir);
    expect(read.kind).toBe('full');
  });
});
