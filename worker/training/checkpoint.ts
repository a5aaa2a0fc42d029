// Checkpoints on disk.
//
// LoRA: a PEFT adapter folder, loadable by `PeftModel.from_pretrained` and by Hearth's inference:
//   adapter_config.json        PEFT LoraConfig
//   adapter_model.safetensors  base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight [r, in], ... lora_B [out, r]
// Full fine-tuning: model.safetensors with Hugging Face tensor names ([out, in] Linear layout).
//
// A checkpoint is written into a temporary sibling folder and renamed into place, so a checkpoint
// folder is either complete or absent (rename within one filesystem is atomic).
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { faultPoint } from '../../src/runtime/fault-points.js';
import type { Weights } from '../../src/runtime/model-config.js';
import { parseLoraTargets, type LoraConfig } from './lora.js';
import { decodeOptimizerState, encodeOptimizerState, OPTIMIZER_STATE_FILE, type OptimizerState } from '../../src/runtime/optimizer-state.js';
import { decodeSafetensors, encodeSafetensors } from '../../src/runtime/safetensors.js';

import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, FULL_WEIGHTS_FILE } from '../../src/runtime/checkpoint-files.js';

export { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, FULL_WEIGHTS_FILE };

export type CheckpointContents =
  // optimizer: AdamW's moments, written beside the adapter (a native run's optim_step; optimizer-state.ts)
  | { kind: 'lora'; lora: LoraConfig; tensors: Weights; baseModel: string; optimizer?: OptimizerState }
  | { kind: 'full'; weights: Weights };

/** PEFT's adapter_config.json for our LoRA settings. */
export function peftAdapterConfig(lora: LoraConfig, baseModel: string): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: lora.rank,
    lora_alpha: lora.alpha,
    lora_dropout: lora.dropout,
    target_modules: [...lora.targetModules],
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    use_rslora: false,
    use_dora: false,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    revision: null,
  };
}

async function writeFileSynced(path: string, data: Buffer | string): Promise<void> {
  const handle = await open(path, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Write `contents` as the checkpoint folder `dir` (which must not exist yet). */
export async function writeCheckpoint(dir: string, contents: CheckpointContents): Promise<void> {
  if (existsSync(dir)) throw new Error(`checkpoint folder ${dir} already exists`);
  await mkdir(dirname(dir), { recursive: true });
  const tmp = join(dirname(dir), `.${basename(dir)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  await mkdir(tmp);
  try {
    if (contents.kind === 'lora') {
      await writeFileSynced(join(tmp, ADAPTER_CONFIG_FILE), `${JSON.stringify(peftAdapterConfig(contents.lora, contents.baseModel), null, 2)}\n`);
      await writeFileSynced(join(tmp, ADAPTER_WEIGHTS_FILE), encodeSafetensors(contents.tensors));
      if (contents.optimizer) await writeFileSynced(join(tmp, OPTIMIZER_STATE_FILE), encodeOptimizerState(contents.optimizer));
    } else {
      await writeFileSynced(join(tmp, FULL_WEIGHTS_FILE), encodeSafetensors(contents.weights));
    }
    await faultPoint('checkpoint-before-rename');
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  await faultPoint('checkpoint-after-rename');
}

/** The optimizer state beside a LoRA checkpoint, verified against its adapter; null when it has none (start fresh). */
export async function readOptimizerState(dir: string): Promise<OptimizerState | null> {
  if (!existsSync(join(dir, OPTIMIZER_STATE_FILE))) return null;
  const adapter = decodeSafetensors(await readFile(join(dir, ADAPTER_WEIGHTS_FILE))).tensors;
  return decodeOptimizerState(await readFile(join(dir, OPTIMIZER_STATE_FILE)), adapter);
}

/** Read a checkpoint folder written by writeCheckpoint (or a PEFT LoRA adapter with list target_modules). */
export async function readCheckpoint(dir: string): Promise<CheckpointContents> {
  if (existsSync(join(dir, ADAPTER_CONFIG_FILE))) {
    const cfg = JSON.parse(await readFile(join(dir, ADAPTER_CONFIG_FILE), 'utf8')) as Record<string, unknown>;
    if (cfg.peft_type !== 'LORA') throw new Error(`adapter in ${dir} has peft_type ${String(cfg.peft_type)}; only LORA is supported`);
    if (!Array.isArray(cfg.target_modules)) throw new Error(`adapter in ${dir}: target_modules must be a list of module names`);
    if (cfg.use_dora || cfg.use_rslora) throw new Error(`adapter in ${dir} uses DoRA/rsLoRA, which is not supported`);
    const lora: LoraConfig = {
      rank: Number(cfg.r),
      alpha: Number(cfg.lora_alpha),
      dropout: Number(cfg.lora_dropout ?? 0),
      targetModules: parseLoraTargets(cfg.target_modules as string[]),
    };
    const { tensors } = decodeSafetensors(await readFile(join(dir, ADAPTER_WEIGHTS_FILE)));
    return { kind: 'lora', lora, tensors, baseModel: String(cfg.base_model_name_or_path ?? '') };
  }
  if (existsSync(join(dir, FULL_WEIGHTS_FILE))) {
    return { kind: 'full', weights: decodeSafetensors(await readFile(join(dir, FULL_WEIGHTS_FILE))).tensors };
  }
  throw new Error(`${dir} holds neither ${ADAPTER_CONFIG_FILE} nor ${FULL_WEIGHTS_FILE}`);
}
