// The graph engine as the training loop sees a model: LoRA adapters as TF.js variables (the job's record: resumed
// from, and written to, checkpoints) and one op, `logprobsAt`, whose value comes from the engine's forward and
// whose gradient (a TF.js custom gradient) from its backward. Between the two sit TF.js's losses over the logprob
// vector: n numbers per micro-batch, so every loss the trainer has works unchanged.
//
// A job's optimizer lives on the device (startDeviceOptimizer, device-adamw.ts): the op then reads the adapters
// there, and its custom gradient hands the adapters' gradients to that optimizer instead of to TF.js. The tape
// differentiates a scalar anchor (the optimizer's), so TF.js never holds an adapter-sized gradient. Without one
// (tests, the GPU check's gradient comparison) the gradients come to the host as TF.js tensors of the variables.
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import type { WeightSource } from '../../../src/runtime/weight-source.js';
import type { MicroBatch } from '../data.js';
import type { LoraAdapters, LoraTarget } from '../lora.js';
import { GraphEngine, projectionPath, type AdapterSet, type ForwardState, type GraphEngineOptions, type TrainedRows } from './graph-engine.js';
import { DeviceAdamW, type AdapterSlot } from './device-adamw.js';
import { loraInput } from './layer-graph.js';
import type { AdamWConfig } from '../optimizer.js';

export class GraphLoraModel {
  private constructor(readonly config: ModelConfig, readonly engine: GraphEngine, public lora: LoraAdapters) {}

  static build(config: ModelConfig, source: WeightSource, lora: LoraAdapters, opts: GraphEngineOptions = {}): GraphLoraModel {
    if (lora.config.dropout > 0) throw new Error('the graph engine trains LoRA without dropout');
    return new GraphLoraModel(config, new GraphEngine(config, source, lora.config.targetModules, opts), lora);
  }

  private version: { ids: object[]; token: object } | null = null;
  /** The job's optimizer on the device, and the adapters it trains (other adapters, a KL reference's, go the TF.js way). */
  private device: { optimizer: DeviceAdamW; lora: LoraAdapters } | null = null;

  /**
   * Train the current adapters with AdamW on the engine's device from now on (device-adamw.ts). The caller owns
   * the optimizer (disposes it before the model); its readBack() brings the adapters' values to their variables.
   */
  startDeviceOptimizer(config: AdamWConfig): DeviceAdamW {
    if (this.device) throw new Error('the model already has a device optimizer');
    const slots: AdapterSlot[] = [];
    for (const { a, b, layer, target } of this.adapterVariables(this.lora)) {
      slots.push({ variable: a, layer, input: loraInput(target, 'a') }, { variable: b, layer, input: loraInput(target, 'b') });
    }
    const optimizer = new DeviceAdamW(slots, config, this.engine.providers, this.engine.transfers);
    this.device = { optimizer, lora: this.lora };
    return optimizer;
  }

  /**
   * The adapters' version for the engine (uploaded once per version): the same token while the variables hold
   * the same TF.js data (an optimizer step assigns new data, so new ids), a new one when any changed.
   */
  private adapterVersion(ids: object[]): object {
    const v = this.version;
    if (v && v.ids.length === ids.length && v.ids.every((id, i) => id === ids[i])) return v.token;
    this.version = { ids, token: {} };
    return this.version.token;
  }

  /** The adapters' variables in the engine's order: per layer, per target, A then B. */
  private adapterVariables(lora: LoraAdapters): { path: string; layer: number; target: LoraTarget; a: tf.Variable; b: tf.Variable }[] {
    const out: { path: string; layer: number; target: LoraTarget; a: tf.Variable; b: tf.Variable }[] = [];
    for (let l = 0; l < this.config.numLayers; l++) {
      for (const target of this.engine.targets) {
        const path = projectionPath(l, target);
        const a = lora.aT.get(path), b = lora.bT.get(path);
        if (!a || !b) throw new Error(`the adapters lack ${path}`);
        out.push({ path, layer: l, target, a, b });
      }
    }
    return out;
  }

  /**
   * log p(target) at the trained rows `at` of a micro-batch, with its gradient to the adapters (when a tape
   * records it; `training` says a backward will follow, so the forward keeps what it needs). `onEntropy` gets
   * each row's entropy.
   */
  logprobsAt(mb: MicroBatch, at: TrainedRows, training: boolean, onEntropy?: (entropy: Float32Array) => void): tf.Tensor1D {
    const lora = this.lora;
    const vars = this.adapterVariables(lora);
    const device = this.device?.lora === lora ? this.device.optimizer : null;
    if (device) {
      // The tape differentiates the optimizer's anchor; the adapters' gradients go to the optimizer.
      return this.engineOp(mb, at, training, onEntropy, [device.anchor], () => {
        const { version, perLayer } = device.adapters(this.config.numLayers);
        this.engine.useAdapters(version, perLayer);
        return { version, factors: () => { throw new Error('the device optimizer holds these adapters'); } };
      }, (state, dlogp) => {
        const grads = this.engine.backwardOnDevice(state, dlogp);
        device.accumulate(vars.flatMap((v) => [grads.get(v.path)!.a, grads.get(v.path)!.b]));
        return [tf.zerosLike(device.anchor)];
      });
    }
    return this.engineOp(mb, at, training, onEntropy, vars.flatMap((v) => [v.a, v.b]), (tensors) => ({
      version: this.adapterVersion(tensors.map((t) => t.dataId)),
      factors: () => new Map(vars.map((v, i) => {
        const [inDim, rank] = v.a.shape as [number, number];
        const outDim = v.b.shape[1] as number;
        return [v.path, { a: tensors[2 * i].dataSync() as Float32Array, b: tensors[2 * i + 1].dataSync() as Float32Array, inDim, outDim, rank }];
      })),
    }), (state, dlogp) => {
      const grads = this.engine.backward(state, dlogp);
      return vars.flatMap((v) => [tf.tensor(grads.get(v.path)!.a, v.a.shape), tf.tensor(grads.get(v.path)!.b, v.b.shape)]);
    });
  }

  /**
   * The engine's forward as a TF.js op of `inputs` (what the tape differentiates): `adapters` gives the engine its
   * adapters for the call's input values, `gradients` turns the backward of dLoss/dlogp into the inputs' gradients.
   */
  private engineOp(mb: MicroBatch, at: TrainedRows, training: boolean, onEntropy: ((entropy: Float32Array) => void) | undefined, inputs: tf.Tensor[],
    adapters: (values: tf.Tensor[]) => AdapterSet, gradients: (state: ForwardState, dlogp: Float32Array) => tf.Tensor[]): tf.Tensor1D {
    const scale = this.lora.enabled ? this.lora.scale : 0;
    const op = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
      const { logp, entropy, state } = this.engine.forward(mb.batch, at, adapters(args.slice(0, inputs.length) as tf.Tensor[]), scale, training);
      onEntropy?.(entropy);
      return { value: tf.tensor1d(logp), gradFunc: (dy: tf.Tensor) => gradients(state, dy.dataSync() as Float32Array) };
    });
    return op(...inputs) as tf.Tensor1D;
  }

  trainableVariables(): tf.Variable[] {
    return this.lora.variables();
  }

  dispose(): void {
    this.engine.dispose();
    this.lora.dispose();
  }
}
