// The LoRA training engine on ONNX Runtime graphs: one that makes a micro-batch's inputs on the device
// (inputs-graph.ts: embeddings, mask, RoPE tables), a graph per decoder layer (layer-graph.ts) and one for the last
// norm + LM head + log-softmax (head-graph.ts), built over the frozen base as the model file stores it.
//
// A micro-batch's forward runs the inputs graph, the layers in order (keeping each layer's input) and the head at
// the trained rows: per-token logprobs and entropies. Its backward takes dLoss/dlogprob per trained row and runs
// the head, then the layers in reverse (each recomputing its forward, or reading what its forward saved), giving
// every adapter's gradient. The loss between the two is the caller's (loop.ts keeps TF.js's losses over the
// logprob vector), so every loss the trainer knows works unchanged.
//
// Residency (graph-session.ts): activations, saved tensors, the mask and tables, the adapters and their gradients
// stay where the sessions compute (GPU memory on webgpu:0) and are fed from run to run by reference. What crosses
// from the host per micro-batch is token and segment ids, the RoPE tables, the trained rows with their targets,
// dLoss/dlogp and scalars; what comes back is each trained row's logprob and entropy. The adapters come from a
// device optimizer (useAdapters, device-adamw.ts: a job's), or go up once per version (AdapterSet); gradients stay
// for that optimizer (backwardOnDevice) or come to the host (backward). TransferCounter counts exactly that.
import type { ModelConfig } from '../../../src/runtime/model-config.js';
import type { SourceTensor, WeightSource } from '../../../src/runtime/weight-source.js';
import { nbitsLayout, repackGgml, type NBitsWeights } from '../../../src/runtime/gguf-repack.js';
import type { TokenBatch } from '../model.js';
import type { LoraTarget } from '../lora.js';
import { ropeTables } from '../rope.js';
import type { FrozenMatrixData } from './frozen-matrix.js';
import { buildLayerGraph, loraGradOutput, loraInput, savedTensors, type LayerWeights } from './layer-graph.js';
import { freemem, totalmem } from 'node:os';
import { holdFreedMemory } from './freed-memory.js';
import { buildHeadGraph } from './head-graph.js';
import { buildInputsGraph, INPUTS_GRAPH_OUTPUTS } from './inputs-graph.js';
import { cpuOnly, DeviceReader, DeviceTensor, DeviceUploader, GraphSession, onWebGpu, outputsCrossToHost, TransferCounter, type GraphSessionOptions, type HostFeed, type Providers } from './graph-session.js';

/** One adapted projection's factors in lora.ts's layout: A transposed [in, r], B transposed [r, out]. */
export interface AdapterFactors { a: Float32Array; b: Float32Array; inDim: number; outDim: number; rank: number }

/**
 * A step's adapters, by module path. `version` names their values: the engine puts them on the device once per
 * version (the caller gives a new one when the optimizer changed them) and reads `factors` only then.
 */
export interface AdapterSet { version: object; factors: () => Map<string, AdapterFactors> }

/** The trained rows of a micro-batch: flattened token index (distinct) and the target there. */
export interface TrainedRows { index: Int32Array; targets: Int32Array }

/** What a forward keeps for its backward (on the device); `release` frees what the backward did not. */
export interface ForwardState {
  batch: TokenBatch;
  rows: TrainedRows;
  /** The inputs graph's outputs: mask, cos and sin (x is layerInputs[0]); null once released. */
  inputs: { mask: DeviceTensor; cos: DeviceTensor; sin: DeviceTensor } | null;
  /** Each layer's input [M, d]; the last entry is the last layer's output. */
  layerInputs: (DeviceTensor | null)[];
  /** Each layer's saved activations (by savedTensors name), or null where its backward recomputes them. */
  layerSaved: (Map<string, DeviceTensor> | null)[];
  /** Each trained row's expected row of the LM head under its softmax [n, d] (head-graph.ts), for the backward. */
  headExpected: DeviceTensor | null;
  scale: number;
  /** The adapters' version the forward ran with (its backward must use the same). */
  adapterVersion: object;
}

/** A source tensor as a training graph reads it: its ggml blocks repacked where MatMulNBits has a form, else float32. */
export function frozenData(t: SourceTensor): FrozenMatrixData {
  const [N, K] = t.shape;
  const layout = t.ggml ? nbitsLayout(t.ggml.type) : null;
  if (t.ggml && layout && K % 256 === 0) {
    const { type, bytes } = t.ggml;
    // Repacked once: the head's vocabulary chunks each ask for their rows of it.
    let repacked: NBitsWeights | null = null;
    return { kind: 'nbits', N, K, weights: () => (repacked ??= repackGgml(type, bytes(), N, K)) };
  }
  return { kind: 'float', N, K, data: () => t.f32() };
}

/** Module path of an adapted projection: `model.layers.3.self_attn.q_proj`. */
export function projectionPath(layer: number, target: LoraTarget): string {
  const parent = target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn';
  return `model.layers.${layer}.${parent}.${target}`;
}

/** Where a step's saved activations would live, for their budget (savedActivationBudget). */
export type SavedActivationsPlace =
  /** Host memory: the CPU's sessions, whose outputs are the host tensors the next run reads. */
  | { kind: 'host' }
  /** GPU memory the outputs stay in (webgpu:0, IO binding); `free`: what the job's plan leaves of it, when known. */
  | { kind: 'device'; free?: number }
  /**
   * A GPU whose outputs the binding brings back to the host (CUDA: onnxruntime-node 1.30 binds device outputs for
   * WebGPU only): a saved tensor would cross down after the forward and up again for the backward, about 80 MB a
   * layer for the 0.5B at 512 tokens (2 GB a micro-batch over 24 layers, ~0.2 s over PCIe), while recomputing a
   * layer's forward there is ~15 GFLOP (well under a millisecond of a datacenter GPU's matrix units). So nothing is
   * saved and each layer's backward recomputes its forward; only the layers' inputs and outputs cross.
   */
  | { kind: 'crossing' };

/**
 * Bytes of saved activations a step may keep: HEARTH_TRAIN_SAVED_BYTES, or a quarter of the machine's memory, and
 * never more than what is free now less a reserve for the step's transients (memory-plan.ts checks a job against
 * what it needs without saving anything, so saving only ever uses what is left), nor, on a GPU that keeps them,
 * than its free memory less the same reserve; nothing where they would cross to the host and back (see
 * SavedActivationsPlace). Layers are saved in order while their activations fit; the rest recompute their forward.
 */
export function savedActivationBudget(env: Record<string, string | undefined> = process.env, free = process.availableMemory?.() ?? freemem(), place: SavedActivationsPlace = { kind: 'host' }): number {
  const asked = env.HEARTH_TRAIN_SAVED_BYTES;
  if (asked !== undefined && asked !== '' && Number.isFinite(Number(asked)) && Number(asked) >= 0) return Number(asked);
  if (place.kind === 'crossing') return 0;
  const host = Math.max(0, Math.min(totalmem() / 4, free - SAVED_RESERVE_BYTES));
  return place.kind === 'device' && place.free !== undefined ? Math.min(host, Math.max(0, place.free - SAVED_RESERVE_BYTES)) : host;
}

/** What saving leaves free for the step's transients (a layer's backward, the head's chunks). */
const SAVED_RESERVE_BYTES = 2 * 2 ** 30;

/** Bytes of one layer's saved activations for `rows` × `length` tokens (what savedTensors lists). */
export function layerSavedBytes(config: ModelConfig, rows: number, length: number, rank: number, adapted: number): number {
  const { hiddenSize: D, numHeads: H, numKvHeads: KV, headDim: hd, intermediateSize: F } = config;
  const M = rows * length;
  // h, context, r1 and r2, gate and up, q/k/v, x·A per adapter (layer-graph.ts savedTensors).
  const perToken = D + H * hd + 2 + 2 * F + (H + 2 * KV) * hd + adapted * rank + (config.qkNorm ? (H + KV) * (hd + 1) : 0);
  return 4 * (M * perToken + rows * H * length * length);
}

/** Which of the engine's sessions keep ONNX Runtime's memory arena (graph-session.ts). */
export interface EngineArenas { head: boolean; layers: boolean }

/** The parts of a memory plan (memory-plan.ts) the arenas are decided from. */
export interface ArenaInputs { layerTransient: number; headTransient: number; layerDequantizing: number; headDequantizing: number }

/**
 * Which sessions may keep ONNX Runtime's memory arenas (graph-session.ts: without one every tensor over glibc's
 * 32 MB mmap ceiling is a fresh mapping, page-faulted in), within an eighth of the machine's memory, since each
 * keeps its peak for good: first the head's (one session, headTransient: its vocabulary chunks are a step's
 * largest tensors), then the numLayers layer sessions' (layerTransient each) if they fit beside it.
 * - 20M RL micro-batch of 2,032 tokens: 0.53 + 6 × 0.13 GB, both. Counting the head's peak for every session (the
 *   first rule) came to 3.7 GB and turned them all off: its forward took 570 ms instead of 420.
 * - 0.5B at 1 × 512: the head's 0.14 GB only (24 layer peaks are 4.1 GB). Without it the head's [511, 16,384]
 *   chunks (33.5 MB) were fresh mappings: their Mul, LogSoftmax and Exp took 41, 28 and 13 ms a chunk.
 * - No arena for a session whose peak is mostly dequantized weights: those float copies are made again each run
 *   whatever holds them, and an arena would keep them for good. The 8B Q4_K's head (1.33 GB planned, 1.34 of it
 *   its Q6_K chunks dequantized) raised bench:train's 8B step from 11.1 to 13.5 GiB peak RSS, at no gain (142 s
 *   with it, 134 s without, in the same hour).
 */
export function arenasAffordable(numLayers: number, plan: ArenaInputs, total = totalmem()): EngineArenas {
  const budget = total / 8;
  const worthIt = (transient: number, dequantizing: number) => dequantizing < transient / 2;
  const head = worthIt(plan.headTransient, plan.headDequantizing) && plan.headTransient <= budget;
  const layers = worthIt(plan.layerTransient, plan.layerDequantizing) && (head ? plan.headTransient : 0) + numLayers * plan.layerTransient <= budget;
  return { head, layers };
}

export interface GraphEngineOptions extends Omit<GraphSessionOptions, 'arena'> {
  /** Which sessions keep a memory arena (arenasAffordable; default none). */
  arenas?: EngineArenas;
  /** On a GPU that keeps outputs (webgpu:0): its memory the job's plan leaves free, which saved activations may use. */
  deviceFreeForSaving?: number;

  /** Called as each graph is built and loaded (`layer 3/32`). */
  onProgress?: (what: string) => void;
}

export class GraphEngine {
  readonly transfers: TransferCounter;
  private readonly inputs: GraphSession;
  private readonly layers: GraphSession[] = [];
  private readonly head: GraphSession;
  private readonly uploader: DeviceUploader;
  /** The token embeddings the inputs graph is fed (a float table), or null when they are its initializer. */
  private readonly embeddingTable: DeviceTensor | null;
  private readonly saved: { name: string; rank: number }[];
  /**
   * The adapters on the device: their version and, per layer, the graph inputs (lora.<target>.a / .b); `owned`
   * when the engine uploaded them (and frees them), not when a device optimizer handed them in (useAdapters).
   */
  private adapters: { version: object; perLayer: Record<string, DeviceTensor>[]; owned: boolean } | null = null;
  /** Brings gradients to the host for backward (TF.js's tape); backwardOnDevice leaves them where they are. */
  private readonly reader: DeviceReader;
  /** Where saved activations would live (savedActivationBudget), from where the sessions really loaded. */
  readonly savedActivationsPlace: SavedActivationsPlace;

  /** Freed memory kept for reuse while the engine lives (freed-memory.ts), or why not. */
  readonly freedMemory: { held: boolean; reason?: string };
  private readonly releaseFreedMemory: () => void;
  /** What the engine made and must free (sessions, device buffers), in the order made: freed in reverse. */
  private readonly made: { dispose(): void }[] = [];

  constructor(readonly config: ModelConfig, source: WeightSource, readonly targets: readonly LoraTarget[], opts: GraphEngineOptions = {}) {
    if (config.numHeads % config.numKvHeads !== 0) throw new Error(`numHeads ${config.numHeads} is not a multiple of numKvHeads ${config.numKvHeads}`);
    const hold = holdFreedMemory();
    this.freedMemory = { held: hold.held, ...(hold.reason ? { reason: hold.reason } : {}) };
    this.releaseFreedMemory = hold.release;
    this.transfers = opts.counter ?? new TransferCounter();
    this.saved = savedTensors(config, targets);
    const { arenas, deviceFreeForSaving, ...rest } = opts;
    // MatMulNBits for the forward products of block-stored matrices on the CPU (frozen-matrix.ts); GPU providers
    // keep the standard-op dequantization every provider has.
    const onCpu = cpuOnly(opts.providers ?? ['cpu']);
    const sessionOpts = { ...rest, counter: this.transfers, arena: arenas?.layers ?? false };
    const tensor = (name: string) => {
      const t = source.get(name);
      if (!t) throw new Error(`weight ${name} is missing`);
      return t;
    };
    const embedding = frozenData(tensor('model.embed_tokens.weight'));
    // A build that stops (a cancel between two session loads, a load that fails) frees what it made at once: an
    // 8B job's layer sessions hold its weights, which the garbage collector would let go of only some time later.
    const own = <T extends { dispose(): void }>(thing: T): T => { this.made.push(thing); return thing; };
    const load = (graph: Uint8Array, o: Parameters<typeof GraphSession.load>[1]) => own(GraphSession.load(graph, o));
    try {
      this.inputs = load(buildInputsGraph(config, embedding), { ...sessionOpts, deviceOutputs: INPUTS_GRAPH_OUTPUTS });
      this.uploader = own(new DeviceUploader(this.inputs.providers, this.transfers));
      this.reader = own(new DeviceReader(this.inputs.providers, this.transfers));
      // A float table is fed to the inputs graph: the base's own array on the CPU, one copy on the device.
      this.embeddingTable = embedding.kind === 'float' ? own(this.uploader.upload({ table: { data: embedding.data(), dims: [embedding.N, embedding.K] } }, false).table) : null;
      const gradOutputs = targets.flatMap((t) => [loraGradOutput(t, 'a'), loraGradOutput(t, 'b')]);
      const layerDeviceOutputs = ['out', ...this.saved.map(({ name }) => `saved_out.${name}`), ...gradOutputs];
      for (let l = 0; l < config.numLayers; l++) {
        const prefix = `model.layers.${l}.`;
        const weights: LayerWeights = { matrices: new Map(), vectors: new Map() };
        for (const [name, t] of source) {
          if (!name.startsWith(prefix)) continue;
          const local = name.slice(prefix.length);
          if (local.endsWith('_proj.weight')) weights.matrices.set(local.slice(0, -'.weight'.length), frozenData(t));
          else weights.vectors.set(local, t.f32());
        }
        this.layers.push(load(buildLayerGraph(config, weights, targets, { nbitsForward: onCpu }), { ...sessionOpts, deviceOutputs: layerDeviceOutputs }));
        opts.onProgress?.(`layer ${l + 1}/${config.numLayers}`);
      }
      const headName = config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
      this.head = load(buildHeadGraph(config, frozenData(tensor(headName)), tensor('model.norm.weight').f32(), { fusedLogSoftmax: !onWebGpu(opts.providers ?? ['cpu']), nbitsForward: onCpu }),
        { ...sessionOpts, arena: arenas?.head ?? false, deviceOutputs: ['expected_out', 'dx'] });
      opts.onProgress?.('head');
    } catch (err) {
      this.freeMade();
      hold.release();
      throw err;
    }
    // Read from the loaded sessions: a GPU provider that failed to load has fallen back to the CPU.
    this.savedActivationsPlace = outputsCrossToHost(this.head.providers) ? { kind: 'crossing' } : this.head.resident ? { kind: 'device', free: deviceFreeForSaving } : { kind: 'host' };
  }

  /** Where the sessions run (the CPU after a failed load on the device asked for). */
  get providers(): Providers { return this.head.providers; }

  /** Whether activations live in GPU memory between runs (webgpu:0), rather than on the host. */
  get resident(): boolean { return this.head.resident; }

  /** The logprob and entropy of each trained row, and what the backward needs. */
  forward(batch: TokenBatch, rows: TrainedRows, adapters: AdapterSet, scale: number, backwardFollows = true): { logp: Float32Array; entropy: Float32Array; state: ForwardState } {
    const { cos, sinSigned: sin } = ropeTables(this.config, batch.positions);
    const hd = this.config.headDim;
    const M = batch.rows * batch.length;
    const made = this.inputs.run({
      ids: { data: BigInt64Array.from(batch.inputIds, (t) => BigInt(t)), dims: [M] },
      segments: { data: BigInt64Array.from(batch.segmentIds, (t) => BigInt(t)), dims: [batch.rows, batch.length] },
      cos: { data: cos, dims: [M, 1, hd] },
      sin: { data: sin, dims: [M, 1, hd] },
      ...(this.embeddingTable ? { table: this.embeddingTable } : {}),
    });
    const state: ForwardState = {
      batch, rows, inputs: { mask: made.device('mask'), cos: made.device('cos_out'), sin: made.device('sin_out') },
      layerInputs: [made.device('x')], layerSaved: [], headExpected: null, scale, adapterVersion: adapters.version,
    };
    try {
      const onDevice = this.adaptersFor(adapters);
      const perLayer = layerSavedBytes(this.config, batch.rows, batch.length, this.rank(), this.targets.length);
      const budget = backwardFollows ? savedActivationBudget(process.env, undefined, this.savedActivationsPlace) : 0;
      for (let l = 0; l < this.layers.length; l++) {
        const save = perLayer * (l + 1) <= budget;
        const out = this.layers[l].run(this.layerFeeds(state, onDevice[l], state.layerInputs[l]!, null, save ? 'save' : null));
        state.layerInputs.push(out.device('out'));
        state.layerSaved.push(save ? new Map(this.saved.map(({ name }) => [name, out.device(`saved_out.${name}`)])) : null);
        for (const { name } of this.saved) if (!save) out.device(`saved_out.${name}`).dispose(); // empties
        for (const t of this.targets) for (const f of ['a', 'b'] as const) out.device(loraGradOutput(t, f)).dispose(); // empties
        // A forward without a backward keeps nothing of the layers before.
        if (!backwardFollows) { state.layerInputs[l]!.dispose(); state.layerInputs[l] = null; }
      }
      // The head's expected rows ([n, d]: a backward's whole need of the head) whenever a backward follows.
      const head = this.head.run(this.headFeeds(state, false, backwardFollows, null));
      head.device('dx').dispose(); // empty in a forward
      state.headExpected = head.device('expected_out');
      const result = { logp: head.host('logp').data, entropy: head.host('entropy').data, state };
      if (!backwardFollows) this.release(state);
      return result;
    } catch (err) {
      this.release(state);
      throw err;
    }
  }

  /** Every adapter's gradient ([in, r] and [r, out], by module path) from dLoss/dlogprob of each trained row. */
  backward(state: ForwardState, dlogp: Float32Array): Map<string, { a: Float32Array; b: Float32Array }> {
    const grads = new Map<string, { a: Float32Array; b: Float32Array }>();
    this.backwardWith(state, dlogp, (layer, onDevice) => {
      // One read per layer, its device copies freed at once.
      const values = this.reader.read(onDevice.flatMap(({ a, b }) => [a, b]));
      for (const { a, b } of onDevice) { a.dispose(); b.dispose(); }
      this.targets.forEach((target, i) => grads.set(projectionPath(layer, target), { a: values[2 * i], b: values[2 * i + 1] }));
    });
    return grads;
  }

  /** The same gradients left on the device, for a device optimizer (device-adamw.ts) to accumulate and apply. */
  backwardOnDevice(state: ForwardState, dlogp: Float32Array): Map<string, { a: DeviceTensor; b: DeviceTensor }> {
    const grads = new Map<string, { a: DeviceTensor; b: DeviceTensor }>();
    try {
      this.backwardWith(state, dlogp, (layer, onDevice) => this.targets.forEach((target, i) => grads.set(projectionPath(layer, target), onDevice[i])));
    } catch (err) {
      for (const g of grads.values()) { g.a.dispose(); g.b.dispose(); }
      throw err;
    }
    return grads;
  }

  /** The backward from the head down; `take` gets each layer's adapter gradients (targets' order) as they come. */
  private backwardWith(state: ForwardState, dlogp: Float32Array, take: (layer: number, grads: { a: DeviceTensor; b: DeviceTensor }[]) => void): void {
    try {
      if (this.adapters?.version !== state.adapterVersion) throw new Error('the adapters changed between a forward and its backward');
      const onDevice = this.adapters.perLayer;
      const head = this.head.run(this.headFeeds(state, true, false, dlogp));
      let dy = head.device('dx');
      this.disposeHeadState(state);
      for (let l = this.layers.length - 1; l >= 0; l--) {
        const saved = state.layerSaved[l];
        const out = this.layers[l].run(this.layerFeeds(state, onDevice[l], state.layerInputs[l]!, dy, saved));
        // Read: let them go before the next layer's backward.
        dy.dispose();
        state.layerInputs[l + 1]?.dispose();
        state.layerInputs[l + 1] = null;
        for (const t of saved?.values() ?? []) t.dispose();
        state.layerSaved[l] = null;
        for (const { name } of this.saved) out.device(`saved_out.${name}`).dispose(); // empties in a backward
        dy = out.device('out');
        take(l, this.targets.map((target) => ({ a: out.device(loraGradOutput(target, 'a')), b: out.device(loraGradOutput(target, 'b')) })));
      }
      dy.dispose(); // the embeddings' gradient: the base is frozen
    } finally {
      this.release(state);
    }
  }

  /** Free what a forward kept on the device (after its backward, or when none follows). */
  release(state: ForwardState): void {
    for (const t of state.layerInputs) t?.dispose();
    state.layerInputs = [];
    for (const m of state.layerSaved) for (const t of m?.values() ?? []) t.dispose();
    state.layerSaved = [];
    this.disposeHeadState(state);
    for (const t of Object.values(state.inputs ?? {})) t.dispose();
    state.inputs = null;
  }

  private disposeHeadState(state: ForwardState): void {
    state.headExpected?.dispose();
    state.headExpected = null;
  }

  /**
   * Adapters already on the device (a device optimizer's parameters, per layer by graph input name), under
   * `version`: the engine reads them until another version comes, and does not free them.
   */
  useAdapters(version: object, perLayer: Record<string, DeviceTensor>[]): void {
    if (perLayer.length !== this.layers.length) throw new Error(`adapters for ${perLayer.length} layers, not ${this.layers.length}`);
    if (this.adapters?.version === version) return;
    this.disposeAdapters();
    this.adapters = { version, perLayer, owned: false };
  }

  /** The adapters on the device for `set`'s version: uploaded once per version, the previous version freed. */
  private adaptersFor(set: AdapterSet): Record<string, DeviceTensor>[] {
    if (this.adapters?.version === set.version) return this.adapters.perLayer;
    this.disposeAdapters();
    const factors = set.factors();
    const perLayer: Record<string, DeviceTensor>[] = [];
    for (let l = 0; l < this.layers.length; l++) {
      const values: Record<string, { data: Float32Array; dims: number[] }> = {};
      for (const target of this.targets) {
        const f = factors.get(projectionPath(l, target));
        if (!f) throw new Error(`no adapter for ${projectionPath(l, target)}`);
        values[loraInput(target, 'a')] = { data: f.a, dims: [f.inDim, f.rank] };
        values[loraInput(target, 'b')] = { data: f.b, dims: [f.rank, f.outDim] };
      }
      perLayer.push(this.uploader.upload(values));
    }
    this.adapters = { version: set.version, perLayer, owned: true };
    return perLayer;
  }

  /** The adapters' rank (from the first uploaded A: [in, r]). */
  private rank(): number {
    const first = this.adapters?.perLayer[0]?.[loraInput(this.targets[0], 'a')];
    return first ? first.dims[1] : 0;
  }

  private disposeAdapters(): void {
    if (this.adapters?.owned) for (const layer of this.adapters.perLayer) for (const t of Object.values(layer)) t.dispose();
    this.adapters = null;
  }

  private headFeeds(state: ForwardState, backward: boolean, save: boolean, dlogp: Float32Array | null): Record<string, HostFeed | DeviceTensor> {
    const { rows } = state;
    const n = rows.index.length;
    if (backward && !state.headExpected) throw new Error('this forward kept nothing for a backward');
    return {
      x: state.layerInputs[state.layerInputs.length - 1]!,
      rows: { data: BigInt64Array.from(rows.index, (i) => BigInt(i)) },
      targets: { data: BigInt64Array.from(rows.targets, (t) => BigInt(t)) },
      backward: { data: backward },
      save: { data: save },
      dlogp: dlogp ? { data: dlogp, dims: [n, 1] } : { data: new Float32Array(0), dims: [0, 1] },
      expected: backward ? state.headExpected! : { data: new Float32Array(0), dims: [0, this.config.hiddenSize] },
    };
  }

  /**
   * One layer's feeds. `saved`: 'save' asks a forward to return its activations; a map gives them to a backward;
   * null runs the forward alone or the backward with the forward recomputed.
   */
  private layerFeeds(state: ForwardState, adapters: Record<string, DeviceTensor>, x: DeviceTensor, dy: DeviceTensor | null, saved: 'save' | Map<string, DeviceTensor> | null): Record<string, HostFeed | DeviceTensor> {
    const { batch } = state;
    const D = this.config.hiddenSize;
    if (!state.inputs) throw new Error('this forward state was released');
    const feeds: Record<string, HostFeed | DeviceTensor> = {
      x,
      bt: { data: new BigInt64Array([BigInt(batch.rows), BigInt(batch.length)]) },
      cos: state.inputs.cos,
      sin: state.inputs.sin,
      mask: state.inputs.mask,
      lora_scale: { data: state.scale },
      backward: { data: dy !== null },
      dy: dy ?? { data: new Float32Array(0), dims: [0, D] },
      save: { data: saved !== null },
      ...adapters,
    };
    for (const { name, rank } of this.saved) {
      const given = saved instanceof Map ? saved.get(name)! : null;
      feeds[`saved.${name}`] = given ?? { data: new Float32Array(0), dims: Array.from({ length: rank }, () => 0) };
    }
    return feeds;
  }

  dispose(): void {
    this.disposeAdapters();
    this.freeMade();
    this.releaseFreedMemory(); // after the sessions: their memory is free by now, and malloc_trim gives it back
  }

  /** Frees what the engine made, latest first (a buffer before the uploader that made it). */
  private freeMade(): void {
    for (const thing of this.made.splice(0).reverse()) thing.dispose();
  }
}
