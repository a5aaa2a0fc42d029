// Adam's state beside a LoRA checkpoint (`optimizer.safetensors`), so that a native run's next optim_step continues
// the same AdamW instead of starting a fresh one (docs/art.md "Optimizer"). One safetensors file:
//   exp_avg.<adapter tensor name>     first moment, same name suffix, shape and (PEFT) layout as the adapter tensor
//   exp_avg_sq.<adapter tensor name>  second moment
//   __metadata__ {optimizer_format, step, sha256}: step = updates applied so far (bias correction goes on from it); sha256 =
//   of the data section, so a damaged file is refused instead of silently steering the next update.
// A file with step 0 holds no tensors: fresh moments (what a load_state without its optimizer leaves).
// Pure (no TF.js): the API reads it too, to check a saved state before it restores it.
import crypto from 'node:crypto';
import type { Weights } from './model-config.js';
import { decodeSafetensors, encodeSafetensors } from './safetensors.js';

export const OPTIMIZER_STATE_FILE = 'optimizer.safetensors';
export const OPTIMIZER_STATE_FORMAT = 'hearth-adamw/1';
const M = 'exp_avg.';
const V = 'exp_avg_sq.';

/** Moments keyed by the adapter tensor they belong to. */
export interface OptimizerState {
  step: number;
  m: Weights;
  v: Weights;
}

export const freshOptimizerState = (): OptimizerState => ({ step: 0, m: new Map(), v: new Map() });

function dataSection(bytes: Buffer): Buffer {
  return bytes.subarray(8 + Number(bytes.readBigUInt64LE(0)));
}

export function encodeOptimizerState(state: OptimizerState): Buffer {
  if (!Number.isInteger(state.step) || state.step < 0) throw new Error(`optimizer state: step ${state.step} is not a count`);
  const tensors: Weights = new Map();
  for (const [name, t] of state.m) tensors.set(M + name, t);
  for (const [name, t] of state.v) tensors.set(V + name, t);
  const unsigned = encodeSafetensors(tensors);
  const sha256 = crypto.createHash('sha256').update(dataSection(unsigned)).digest('hex');
  return encodeSafetensors(tensors, { optimizer_format: OPTIMIZER_STATE_FORMAT, step: String(state.step), sha256 });
}

/**
 * Read and verify an optimizer state file. `adapter` (the checkpoint's adapter tensors) is what the moments must
 * cover, name for name and shape for shape, unless the state is fresh (step 0). Throws naming what is wrong.
 */
export function decodeOptimizerState(bytes: Buffer, adapter?: Weights): OptimizerState {
  let tensors: Weights;
  let metadata: Record<string, string>;
  try {
    ({ tensors, metadata } = decodeSafetensors(bytes));
  } catch (err) {
    throw new Error(`optimizer state is unreadable: ${(err as Error).message}`);
  }
  if (metadata.optimizer_format !== OPTIMIZER_STATE_FORMAT) throw new Error(`optimizer state has format ${JSON.stringify(metadata.optimizer_format)}, not ${OPTIMIZER_STATE_FORMAT}`);
  const sha256 = crypto.createHash('sha256').update(dataSection(bytes)).digest('hex');
  if (sha256 !== metadata.sha256) throw new Error('optimizer state is damaged: its data does not match its sha256');
  const step = Number(metadata.step);
  if (!Number.isInteger(step) || step < 0) throw new Error(`optimizer state has step ${JSON.stringify(metadata.step)}`);
  const state: OptimizerState = { step, m: new Map(), v: new Map() };
  for (const [name, t] of tensors) {
    if (name.startsWith(V)) state.v.set(name.slice(V.length), t);
    else if (name.startsWith(M)) state.m.set(name.slice(M.length), t);
    else throw new Error(`optimizer state holds an unknown tensor ${name}`);
  }
  if (step === 0) {
    if (tensors.size > 0) throw new Error('optimizer state at step 0 must hold no moments');
    return state;
  }
  if (adapter) {
    for (const [name, t] of adapter) {
      for (const [which, moments] of [['exp_avg', state.m], ['exp_avg_sq', state.v]] as const) {
        const moment = moments.get(name);
        if (!moment) throw new Error(`optimizer state has no ${which} for ${name}`);
        if (moment.shape.join(',') !== t.shape.join(',')) throw new Error(`optimizer state's ${which} of ${name} has shape [${moment.shape}], not [${t.shape}]`);
      }
    }
    if (state.m.size !== adapter.size || state.v.size !== adapter.size) throw new Error('optimizer state holds moments for tensors the adapter does not have');
  }
  return state;
}
