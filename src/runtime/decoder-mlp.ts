// The decoder layer's MLP: SwiGLU, silu(x·W_gate) · (x·W_up) · W_down, with one fused gate|up projection.
import type { ModelConfig } from './model-config.js';
import type { GraphBuilder } from './onnx-proto.js';
import type { WeightSource } from './weight-source.js';
import type { Linear } from './decoder-linear.js';
import type { WithLora } from './decoder-lora.js';
import { concat } from './decoder-weights.js';

/** Layer `i`'s MLP of the normed hidden state `input`: its output, before the residual add. */
export function swigluMlp(g: GraphBuilder, config: ModelConfig, weights: WeightSource, i: number, input: string, linear: Linear, withLora: WithLora): string {
  const { hiddenSize: D, intermediateSize: F } = config;
  const p = `model.layers.${i}.`;
  const w = (name: string) => weights.get(name)!.f32();
  const wgu = () => concat([w(p + 'mlp.gate_proj.weight'), w(p + 'mlp.up_proj.weight')]);
  const gu = withLora(i, 'gate_up', input, linear(p + 'mlp.gate_up_proj.weight', input, wgu, 2 * F, D, [p + 'mlp.gate_proj.weight', p + 'mlp.up_proj.weight']));
  const [gate, up] = g.node('Split', [gu, g.int64s([F, F])], { outputs: 2, attrs: { axis: -1 } });
  const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
  return withLora(i, 'down', act, linear(p + 'mlp.down_proj.weight', act, () => w(p + 'mlp.down_proj.weight'), D, F, [p + 'mlp.down_proj.weight']));
}
