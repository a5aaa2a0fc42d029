// Per-row LoRA in runner graphs (GraphOptions.lora; the factors come from lora.ts): each batch row adds its own
// adapter's (x·A)·B to a projection. One graph input per projection group holds every layer's factors.
import type { ModelConfig } from './model-config.js';
import { DataType, type GraphBuilder } from './onnx-proto.js';

export type LoraGroup = 'qkv' | 'o' | 'gate_up' | 'down';

/** Adds layer `layer`'s LoRA term for `group` to the projection `y` of `input`. */
export type WithLora = (layer: number, group: LoraGroup, input: string, y: string) => string;

/** y + (x·A)·B per batch row, when the graph takes LoRA inputs (`lora`); y itself otherwise. `hp`: the graph's head size. */
export function loraAdder(g: GraphBuilder, config: ModelConfig, hp: number, lora: boolean): WithLora {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, intermediateSize: F } = config;
  const loraDims: Record<LoraGroup, readonly [number, number]> = { qkv: [D, (H + 2 * KV) * hp], o: [H * hp, D], gate_up: [D, 2 * F], down: [F, D] };
  return (layer, group, input, y) => {
    if (!lora) return y;
    const [inDim, outDim] = loraDims[group];
    const aAll = g.input(`lora.${group}.a`, DataType.FLOAT, [config.numLayers, 'batch_size', inDim, `lora_rank_${group}`]);
    const bAll = g.input(`lora.${group}.b`, DataType.FLOAT, [config.numLayers, 'batch_size', `lora_rank_${group}`, outDim]);
    const index = g.int64s([layer], [], `lora_layer_${layer}`);
    const a = g.op('Gather', [aAll, index]), b = g.op('Gather', [bAll, index]);
    return g.op('Add', [y, g.op('MatMul', [g.op('MatMul', [input, a]), b])]);
  };
}
