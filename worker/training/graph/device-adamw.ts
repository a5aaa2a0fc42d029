// AdamW for the graph engine's adapters where the engine computes: gradient accumulation, the global norm,
// clipping and the update are ONNX Runtime graphs over DeviceTensors, so the adapters, their gradients and the
// moments stay on the device (GPU memory on webgpu:0) from the job's start to its checkpoint. Per optimizer step
// the host reads one number (the gradients' sum of squares, for grad_norm and clipping) and sends four scalars.
//
// Why not TF.js's AdamW (optimizer.ts) here: the adapters' gradients would come down every micro-batch and the
// adapters go up every step (a 0.5B model at rank 8: 4.4M values, 35 MB a step), and the update runs on TF.js's
// single wasm thread: 65–75 ms a step for those 4.4M values (clip 17–20, AdamW 30–33, the copies in and out), on
// a GPU about a whole PyTorch step. Here it is a few elementwise graphs on the engine's device.
//
// Same arithmetic as optimizer.ts (adamwUpdate, clipByGlobalNorm) in float32:
//   g ← g · min(1, maxNorm / (‖g‖ + 1e-6));  m ← β1 m + (1 − β1) g;  v ← β2 v + (1 − β2) g²
//   p ← p − lr · ((m / c1) / (√(v / c2) + ε) + wd · p),  c1 = 1 − β1^t, c2 = 1 − β2^t
// The TF.js variables of the LoRA adapters are the job's record: read once when the optimizer starts and written
// back (readBack) before a checkpoint is written; moments come and go through the same tensors as AdamW's.
import * as tf from '@tensorflow/tfjs-core';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import type { AdamWConfig, AdamWMoments } from '../optimizer.js';
import { DeviceReader, DeviceTensor, DeviceUploader, GraphSession, type Providers, type TransferCounter } from './graph-session.js';

/** One adapter tensor: its TF.js variable and where the engine's layer graph reads it. */
export interface AdapterSlot { variable: tf.Variable; layer: number; input: string }

export class DeviceAdamW {
  private stepCount = 0;
  private params: DeviceTensor[];
  private m: DeviceTensor[];
  private v: DeviceTensor[];
  /** The step's summed gradients so far (null before its first micro-batch). */
  private accumulated: DeviceTensor[] | null = null;
  /** Names the adapters' current values (a new object after every update): the engine's adapter version. */
  private versionToken: object = {};
  private readonly uploader: DeviceUploader;
  private readonly reader: DeviceReader;
  private readonly sessions: { add: GraphSession; sumSquares: GraphSession; update: GraphSession };

  constructor(readonly slots: AdapterSlot[], readonly config: AdamWConfig, providers: Providers, counter: TransferCounter) {
    if (slots.length === 0) throw new Error('DeviceAdamW: no adapters');
    this.uploader = new DeviceUploader(providers, counter);
    this.reader = new DeviceReader(providers, counter);
    const dims = slots.map((s) => s.variable.shape as number[]);
    const load = (g: GraphBuilder, name: string, deviceOutputs: string[]) => GraphSession.load(g.toModelBytes(name), { providers, counter, deviceOutputs });
    this.sessions = {
      add: load(addGraph(dims), 'hearth_grad_add', dims.map((_, i) => `out.${i}`)),
      sumSquares: load(sumSquaresGraph(dims), 'hearth_grad_sum_squares', []),
      update: load(updateGraph(dims, config), 'hearth_adamw', dims.flatMap((_, i) => [`p_out.${i}`, `m_out.${i}`, `v_out.${i}`])),
    };
    // The adapters go up once (counted: the job's only upload of them); fresh moments are zeros made here.
    this.params = this.upload(slots.map((s) => s.variable.dataSync() as Float32Array), true);
    const zeros = () => this.upload(dims.map((d) => new Float32Array(d[0] * d[1])), false);
    this.m = zeros();
    this.v = zeros();
  }

  /**
   * The scalar the training loop's tape differentiates (GraphLoraModel's device op takes it as its input): the
   * adapters' gradients go to `accumulate`, never into TF.js, and the anchor's own gradient is zero.
   */
  readonly anchor = tf.tidy(() => tf.variable(tf.scalar(0), true));

  /** The TF.js variables, in the order exportMoments / restoreMoments use (adapter-moments.ts maps them to PEFT names). */
  get variables(): tf.Variable[] { return this.slots.map((s) => s.variable); }

  get steps(): number { return this.stepCount; }

  /** The adapters' current values on the device: a version (new after each update) and, per layer, by graph input. */
  adapters(numLayers: number): { version: object; perLayer: Record<string, DeviceTensor>[] } {
    const perLayer: Record<string, DeviceTensor>[] = Array.from({ length: numLayers }, () => ({}));
    this.slots.forEach((s, i) => (perLayer[s.layer][s.input] = this.params[i]));
    return { version: this.versionToken, perLayer };
  }

  /** Add one micro-batch's gradients (by slot order) to the step's sum; takes ownership of them. */
  accumulate(grads: DeviceTensor[]): void {
    if (grads.length !== this.slots.length) throw new Error(`DeviceAdamW: ${grads.length} gradients for ${this.slots.length} adapters`);
    if (this.accumulated === null) { this.accumulated = grads; return; }
    const out = this.sessions.add.run(Object.fromEntries(grads.flatMap((g, i) => [[`a.${i}`, this.accumulated![i]], [`b.${i}`, g]])));
    for (const t of [...this.accumulated, ...grads]) t.dispose();
    this.accumulated = grads.map((_, i) => out.device(`out.${i}`));
  }

  /**
   * Clip the summed gradients to `maxGradNorm` (≤ 0: no clipping) and apply one AdamW update. Returns the
   * gradients' global norm before clipping. Throws, changing nothing, when it is not finite.
   */
  step(learningRate: number, maxGradNorm: number): { gradNorm: number } {
    const grads = this.accumulated;
    if (grads === null) throw new Error('DeviceAdamW: a step without gradients');
    this.accumulated = null;
    try {
      const sumSquares = this.sessions.sumSquares.run(Object.fromEntries(grads.map((g, i) => [`g.${i}`, g]))).host('sum_squares').data[0];
      const norm = Math.sqrt(sumSquares);
      if (!Number.isFinite(norm)) throw new Error(`gradient norm is ${norm}; training diverged`);
      const clip = maxGradNorm > 0 && norm > maxGradNorm ? maxGradNorm / (norm + 1e-6) : 1;
      const t = this.stepCount + 1;
      const { beta1, beta2 } = this.config;
      const feeds: Record<string, DeviceTensor | { data: number }> = {
        lr: { data: learningRate }, c1: { data: 1 - Math.pow(beta1, t) }, c2: { data: 1 - Math.pow(beta2, t) }, clip: { data: clip },
      };
      grads.forEach((g, i) => Object.assign(feeds, { [`p.${i}`]: this.params[i], [`g.${i}`]: g, [`m.${i}`]: this.m[i], [`v.${i}`]: this.v[i] }));
      const out = this.sessions.update.run(feeds);
      for (const x of [...this.params, ...this.m, ...this.v]) x.dispose();
      this.params = grads.map((_, i) => out.device(`p_out.${i}`));
      this.m = grads.map((_, i) => out.device(`m_out.${i}`));
      this.v = grads.map((_, i) => out.device(`v_out.${i}`));
      this.stepCount = t;
      this.versionToken = {};
      return { gradNorm: norm };
    } finally {
      for (const g of grads) g.dispose();
    }
  }

  /** Drop a step's gradients without applying them (a failed micro-batch). */
  discardGradients(): void {
    for (const g of this.accumulated ?? []) g.dispose();
    this.accumulated = null;
  }

  /** Write the adapters' current values into their TF.js variables (before a checkpoint reads them). */
  readBack(): void {
    const values = this.reader.read(this.params);
    tf.tidy(() => this.slots.forEach((s, i) => s.variable.assign(tf.tensor(values[i], s.variable.shape))));
  }

  /** The moments and step count (optimizer.ts's AdamWMoments, in `variables` order). */
  exportMoments(): AdamWMoments {
    return { step: this.stepCount, m: this.reader.read(this.m), v: this.reader.read(this.v) };
  }

  /** Continue from moments an earlier job exported (same adapters, same order). */
  restoreMoments(state: AdamWMoments): void {
    if (!Number.isInteger(state.step) || state.step < 0) throw new Error(`AdamW: step ${state.step} is not a count`);
    if (state.m.length !== this.slots.length || state.v.length !== this.slots.length) {
      throw new Error(`AdamW: moments for ${state.m.length}/${state.v.length} variables, not ${this.slots.length}`);
    }
    this.slots.forEach((s, i) => {
      if (state.m[i].length !== s.variable.size || state.v[i].length !== s.variable.size) throw new Error(`AdamW: moments of variable ${i} have the wrong size`);
    });
    const m = this.upload(state.m, false);
    const v = this.upload(state.v, false);
    for (const x of [...this.m, ...this.v]) x.dispose();
    this.m = m;
    this.v = v;
    this.stepCount = state.step;
  }

  dispose(): void {
    this.discardGradients();
    this.anchor.dispose();
    for (const x of [...this.params, ...this.m, ...this.v]) x.dispose();
    for (const s of Object.values(this.sessions)) s.dispose();
    this.uploader.dispose();
    this.reader.dispose();
  }

  private upload(values: Float32Array[], counted: boolean): DeviceTensor[] {
    const up = this.uploader.upload(Object.fromEntries(values.map((data, i) => [String(i), { data, dims: this.slots[i].variable.shape as number[] }])), counted);
    return values.map((_, i) => up[String(i)]);
  }

}

/** out.i = a.i + b.i. */
function addGraph(dims: number[][]): GraphBuilder {
  const g = new GraphBuilder();
  dims.forEach((d, i) => {
    g.node('Add', [g.input(`a.${i}`, DataType.FLOAT, d), g.input(`b.${i}`, DataType.FLOAT, d)], { outputs: [`out.${i}`] });
    g.output(`out.${i}`, DataType.FLOAT, d);
  });
  return g;
}

/**
 * sum_squares = Σ_i Σ g.i² (a scalar). Added in a chain of Adds rather than one Sum: ONNX Runtime's WebGPU provider
 * has no Sum kernel, and running it on the CPU downloads every partial sum separately (a profile showed it).
 */
function sumSquaresGraph(dims: number[][]): GraphBuilder {
  const g = new GraphBuilder();
  const parts = dims.map((d, i) => g.op('ReduceSumSquare', [g.input(`g.${i}`, DataType.FLOAT, d)], { keepdims: 0 }));
  const total = parts.slice(1).reduce((acc, part) => g.op('Add', [acc, part]), parts[0]);
  g.node('Identity', [total], { outputs: ['sum_squares'] });
  g.output('sum_squares', DataType.FLOAT, []);
  return g;
}

/** One AdamW update of every adapter (the header's formulas); lr, c1, c2 and clip are scalar inputs. */
function updateGraph(dims: number[][], config: AdamWConfig): GraphBuilder {
  const g = new GraphBuilder();
  const [lr, c1, c2, clip] = ['lr', 'c1', 'c2', 'clip'].map((n) => g.input(n, DataType.FLOAT, []));
  const { beta1, beta2, epsilon, weightDecay } = config;
  const b1 = g.scalarFloat(beta1), b1c = g.scalarFloat(1 - beta1), b2 = g.scalarFloat(beta2), b2c = g.scalarFloat(1 - beta2);
  const eps = g.scalarFloat(epsilon), wd = g.scalarFloat(weightDecay);
  dims.forEach((d, i) => {
    const [p, grad, m, v] = ['p', 'g', 'm', 'v'].map((n) => g.input(`${n}.${i}`, DataType.FLOAT, d));
    const clipped = g.op('Mul', [grad, clip]);
    const [pOut, mOut, vOut] = ['p', 'm', 'v'].map((n) => `${n}_out.${i}`);
    g.node('Add', [g.op('Mul', [m, b1]), g.op('Mul', [clipped, b1c])], { outputs: [mOut] });
    g.node('Add', [g.op('Mul', [v, b2]), g.op('Mul', [g.op('Mul', [clipped, clipped]), b2c])], { outputs: [vOut] });
    let update = g.op('Div', [g.op('Div', [mOut, c1]), g.op('Add', [g.op('Sqrt', [g.op('Div', [vOut, c2])]), eps])]);
    if (weightDecay !== 0) update = g.op('Add', [update, g.op('Mul', [p, wd])]);
    g.node('Sub', [p, g.op('Mul', [update, lr])], { outputs: [pOut] });
    for (const out of [pOut, mOut, vOut]) g.output(out, DataType.FLOAT, d);
  });
  return g;
}
