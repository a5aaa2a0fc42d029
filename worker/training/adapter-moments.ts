// AdamW's moments of a LoRA model ↔ the optimizer state file's tensors (optimizer-state.ts): the trainer keeps the
// adapters transposed (A^T [in, r], B^T [r, out]); the file keeps each moment in its adapter tensor's PEFT name and
// layout, so it can be checked against adapter_model.safetensors name for name and shape for shape.
import type { LoraAdapters } from './lora.js';
import type { AdamW } from './optimizer.js';

/** What carries moments: TF.js's AdamW or the graph engine's on the device (graph/device-adamw.ts). */
export type MomentsCarrier = Pick<AdamW, 'variables' | 'exportMoments' | 'restoreMoments'>;
import type { OptimizerState } from '../../src/runtime/optimizer-state.js';
import { transpose2d } from './tensor-utils.js';

interface Slot {
  name: string;
  index: number;
  /** Internal [rows, cols]; the file holds [cols, rows]. */
  rows: number;
  cols: number;
}

/** Where each adapter tensor sits among the optimizer's variables; every variable must be an adapter's. */
function slots(lora: LoraAdapters, optimizer: MomentsCarrier): Slot[] {
  const out: Slot[] = [];
  const add = (name: string, v: { shape: number[] }) => {
    const index = optimizer.variables.indexOf(v as never);
    if (index < 0) throw new Error(`optimizer state: ${name} is not among the optimizer's variables`);
    out.push({ name, index, rows: v.shape[0], cols: v.shape[1] });
  };
  for (const [path, a] of lora.aT) {
    add(`base_model.model.${path}.lora_A.weight`, a);
    add(`base_model.model.${path}.lora_B.weight`, lora.bT.get(path)!);
  }
  if (out.length !== optimizer.variables.length) throw new Error('optimizer state is only carried for LoRA training (the optimizer has variables that are not adapters)');
  return out;
}

export function adapterMoments(lora: LoraAdapters, optimizer: MomentsCarrier): OptimizerState {
  const { step, m, v } = optimizer.exportMoments();
  const state: OptimizerState = { step, m: new Map(), v: new Map() };
  for (const s of slots(lora, optimizer)) {
    state.m.set(s.name, { shape: [s.cols, s.rows], data: transpose2d(m[s.index], s.rows, s.cols) });
    state.v.set(s.name, { shape: [s.cols, s.rows], data: transpose2d(v[s.index], s.rows, s.cols) });
  }
  return state;
}

/** Continue `optimizer` from a saved state (a fresh one, step 0, leaves it as it is). */
export function restoreAdapterMoments(lora: LoraAdapters, optimizer: MomentsCarrier, state: OptimizerState): void {
  if (state.step === 0) return;
  const all = slots(lora, optimizer);
  const m: Float32Array[] = new Array(all.length);
  const v: Float32Array[] = new Array(all.length);
  for (const s of all) {
    const sm = state.m.get(s.name);
    const sv = state.v.get(s.name);
    if (!sm || !sv) throw new Error(`optimizer state has no moments for ${s.name}`);
    if (sm.data.length !== s.rows * s.cols || sv.data.length !== s.rows * s.cols) throw new Error(`optimizer state's moments of ${s.name} have the wrong size`);
    m[s.index] = transpose2d(sm.data, s.cols, s.rows);
    v[s.index] = transpose2d(sv.data, s.cols, s.rows);
  }
  optimizer.restoreMoments({ step: state.step, m, v });
}
