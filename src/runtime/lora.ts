// LoRA adapters at inference, without merging: the decoder graph (built with `lora: true`) takes per
// batch row low-rank factors for each projection group, so one session serves the base model and any
// number of adapters in the same batch. A PEFT adapter (adapter_config.json + adapter_model.safetensors)
// is converted once into the graph's fused layout:
//   qkv:     a = [A_q^T | A_k^T | A_v^T]  [D, rq+rk+rv],  b = blockdiag(B_q^T, B_k^T, B_v^T) [r, (H+2KV)·hp]
//   o:       a = A_o^T [H·hp, r],  b = B_o^T [r, D]
//   gate_up: a = [A_g^T | A_u^T] [D, rg+ru],  b = blockdiag(B_g^T, B_u^T) [r, 2F]
//   down:    a = A_d^T [F, r],  b = B_d^T [r, D]
// with the scale (alpha/r, or alpha/sqrt(r) for rsLoRA) folded into b, and the same head padding and
// query pre-scaling as the base weights.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelConfig } from './model-config.js';
import { readSafetensorsHeader, readTensors } from './safetensors.js';
import { cacheHeadDim, padHeads, transpose, type AttentionKind } from './llama-graph.js';

export type LoraGroup = 'qkv' | 'o' | 'gate_up' | 'down';
export const LORA_GROUPS: LoraGroup[] = ['qkv', 'o', 'gate_up', 'down'];

export interface LoraGroupWeights {
  rank: number;
  /** Per layer: a [in, rank] and b [rank, out], row-major (zeros for layers the adapter skips). */
  a: Float32Array[];
  b: Float32Array[];
}

export interface LoraAdapter {
  /** Where it came from (for logs). */
  name: string;
  groups: Record<LoraGroup, LoraGroupWeights>;
}

type Module = 'q_proj' | 'k_proj' | 'v_proj' | 'o_proj' | 'gate_proj' | 'up_proj' | 'down_proj';
const GROUP_MODULES: Record<LoraGroup, Module[]> = {
  qkv: ['q_proj', 'k_proj', 'v_proj'], o: ['o_proj'], gate_up: ['gate_proj', 'up_proj'], down: ['down_proj'],
};
const NAME = /(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_(A|B)(?:\.default)?\.weight$/;

export interface PeftFactors {
  /** Scale applied to B·A. */
  scale: number;
  /** `${layer}.${module}` → A [r, in], B [out, r]. */
  factors: Map<string, { A: Float32Array; B: Float32Array; r: number }>;
}

/** Read a PEFT LoRA checkpoint folder; refuses features Hearth does not serve, naming them. */
export function readPeftAdapter(dir: string): PeftFactors {
  const cfgPath = join(dir, 'adapter_config.json');
  if (!existsSync(cfgPath)) throw new Error(`no adapter_config.json in ${dir}`);
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  if (cfg.peft_type && cfg.peft_type !== 'LORA') throw new Error(`unsupported adapter type ${cfg.peft_type} (supported: LORA)`);
  for (const k of ['rank_pattern', 'alpha_pattern']) if (cfg[k] && Object.keys(cfg[k]).length > 0) throw new Error(`unsupported LoRA option ${k}`);
  if (cfg.fan_in_fan_out) throw new Error('unsupported LoRA option fan_in_fan_out');
  if (cfg.bias && cfg.bias !== 'none') throw new Error(`unsupported LoRA bias "${cfg.bias}"`);
  if (cfg.modules_to_save && cfg.modules_to_save.length > 0) throw new Error(`unsupported LoRA modules_to_save ${JSON.stringify(cfg.modules_to_save)}`);
  if (cfg.use_dora) throw new Error('unsupported LoRA option use_dora');
  const r = cfg.r as number;
  const alpha = (cfg.lora_alpha as number | undefined) ?? r;
  const scale = cfg.use_rslora ? alpha / Math.sqrt(r) : alpha / r;
  const file = join(dir, 'adapter_model.safetensors');
  if (!existsSync(file)) throw new Error(`no adapter_model.safetensors in ${dir}`);
  const entries = readSafetensorsHeader(file);
  for (const e of entries) if (!NAME.test(e.name)) throw new Error(`unsupported tensor ${e.name} in LoRA adapter (supported: lora_A/lora_B of q/k/v/o/gate/up/down projections)`);
  const weights = readTensors(entries);
  const factors = new Map<string, { A: Float32Array; B: Float32Array; r: number }>();
  for (const [name, t] of weights) {
    const [, layer, module, which] = NAME.exec(name)!;
    if (which !== 'A') continue;
    const bName = name.replace(/lora_A/, 'lora_B');
    const B = weights.get(bName);
    if (!B) throw new Error(`LoRA adapter has ${name} but no ${bName}`);
    if (t.shape[0] !== B.shape[1]) throw new Error(`LoRA rank mismatch between ${name} and ${bName}`);
    factors.set(`${layer}.${module}`, { A: t.data, B: B.data, r: t.shape[0] });
  }
  return { scale, factors };
}

/** Convert PEFT factors into the graph's fused per-group layout for one model/attention form. */
export function prepareLoraAdapter(name: string, peft: PeftFactors, config: ModelConfig, attention: AttentionKind): LoraAdapter {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F } = config;
  const hp = cacheHeadDim(config, attention);
  // Per module: input size, output size (before padding), heads for padding, rotary layout.
  const spec: Record<Module, { inDim: number; out: number; heads?: number; rotary?: boolean }> = {
    q_proj: { inDim: D, out: H * hd, heads: H, rotary: true },
    k_proj: { inDim: D, out: KV * hd, heads: KV, rotary: true },
    v_proj: { inDim: D, out: KV * hd, heads: KV, rotary: false },
    o_proj: { inDim: H * hd, out: D },
    gate_proj: { inDim: D, out: F }, up_proj: { inDim: D, out: F }, down_proj: { inDim: F, out: D },
  };
  const paddedOut = (m: Module) => (spec[m].heads ? spec[m].heads! * hp : spec[m].out);
  const paddedIn = (m: Module) => (m === 'o_proj' ? H * hp : spec[m].inDim);
  const groups = {} as Record<LoraGroup, LoraGroupWeights>;
  for (const group of LORA_GROUPS) {
    const modules = GROUP_MODULES[group];
    // Rank of each module = the adapter's rank for it (0 if the adapter never targets it).
    const ranks = modules.map((m) => Math.max(0, ...[...peft.factors.entries()].filter(([k]) => k.endsWith(`.${m}`)).map(([, f]) => f.r)));
    const rank = ranks.reduce((a, b) => a + b, 0);
    const inDim = paddedIn(modules[0]);
    const outTotal = modules.reduce((a, m) => a + paddedOut(m), 0);
    const a: Float32Array[] = [], b: Float32Array[] = [];
    for (let layer = 0; layer < config.numLayers; layer++) {
      const aL = new Float32Array(inDim * rank), bL = new Float32Array(rank * outTotal);
      let rOff = 0, outOff = 0;
      modules.forEach((m, mi) => {
        const f = peft.factors.get(`${layer}.${m}`);
        if (f) {
          const s = spec[m];
          if (f.A.length !== f.r * s.inDim || f.B.length !== s.out * f.r) throw new Error(`LoRA factors for layer ${layer} ${m} do not match the model's shapes`);
          let At = transpose(f.A, f.r, s.inDim); // [in, r]
          if (m === 'o_proj') At = padHeads(At, H, hd, hp, f.r, false);
          for (let i = 0; i < inDim; i++) aL.set(At.subarray(i * f.r, (i + 1) * f.r), i * rank + rOff);
          const Bp = s.heads ? padHeads(f.B, s.heads, hd, hp, f.r, s.rotary!) : f.B; // [outPadded, r]
          const Bt = transpose(Bp, paddedOut(m), f.r); // [r, outPadded]
          for (let j = 0; j < f.r; j++)
            for (let o = 0; o < paddedOut(m); o++) bL[(rOff + j) * outTotal + outOff + o] = Bt[j * paddedOut(m) + o] * peft.scale;
        }
        rOff += ranks[mi];
        outOff += paddedOut(m);
      });
      a.push(aL);
      b.push(bL);
    }
    groups[group] = { rank, a, b };
  }
  return { name, groups };
}

/** Read a PEFT checkpoint folder and prepare it for a loaded model's runner. */
export function loadLoraAdapter(dir: string, config: ModelConfig, attention: AttentionKind): LoraAdapter {
  return prepareLoraAdapter(dir, readPeftAdapter(dir), config, attention);
}

/** Input/output sizes of each group's a/b inputs. */
export function loraGroupDims(config: ModelConfig, attention: AttentionKind): Record<LoraGroup, [number, number]> {
  const hp = cacheHeadDim(config, attention);
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, intermediateSize: F } = config;
  return { qkv: [D, (H + 2 * KV) * hp], o: [H * hp, D], gate_up: [D, 2 * F], down: [F, D] };
}
