// One training graph loaded into ONNX Runtime, run synchronously (the engine runs inside TF.js's custom-gradient
// functions, which are synchronous) through onnxruntime-node's native binding, as ort-compute.ts does.
//
// Residency: outputs named in `deviceOutputs` stay where the session computed them (a DeviceTensor) and are fed
// back to later runs by reference. On webgpu:0 that is GPU memory (preferredOutputLocation 'gpu-buffer', the
// binding's IO binding, as src/runtime/resident-kv.ts does for the KV cache); on the CPU it is the same host
// tensor, so the engine's dataflow is one on every device. onnxruntime-node 1.30 binds device memory for WebGPU
// only: on CUDA the outputs come back to the host and are sent again (outputsCrossToHost; the counter counts it).
//
// The TransferCounter counts what crosses: host arrays handed to a run or uploaded, and host outputs read back;
// DeviceTensors fed back are not counted, except on CUDA, where they are host tensors sent again by every run. On
// a GPU these bytes cross between host and device; on the CPU they show what would on one that keeps outputs.
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from '../../../src/runtime/onnx-proto.js';
import { newNativeSession, trainingThreads, type NativeSession } from '../ort-compute.js';
import { computeProgressed } from '../../../src/runtime/compute-progress.js';
import { throwIfComputeCancelled } from '../../../src/runtime/compute-cancel.js';


/** ONNX Runtime's execution providers for a session, in order of preference. */
export type Providers = ort.InferenceSession.ExecutionProviderConfig[];

/** Where the graphs run: set once by the training worker for its device (default the CPU). */
let configured: { device: string; providers: Providers } = { device: 'cpu', providers: ['cpu'] };
let fallbackLog: (line: string) => void = (line) => process.stderr.write(`${line}\n`);

/**
 * Provider lists ONNX Runtime failed to load a training graph with in this process, and its error. ORT 1.30 does
 * not fall back by itself: a provider whose library is missing (CUDA without its libraries), unknown, or without a
 * device (WebGPU without an adapter) fails the session's creation. The first failure is logged and remembered; every
 * later graph of the process then loads on the CPU directly (one line per process, not one per layer).
 */
const failedProviders = new Map<string, string>();
const providersKey = (list: Providers) => JSON.stringify(list);
const providerName = (p: Providers[number]) => (typeof p === 'string' ? p : p.name);

/** `log` gets the one line a device that fails to load says (default stderr). */
export function setTrainingProviders(device: string, list: Providers, log?: (line: string) => void): void {
  configured = { device, providers: list };
  if (log) fallbackLog = log;
}

/**
 * Where the graphs run: the device set, or the CPU (with what failed) once loading on that device failed in this
 * process, so that what the engine reports is where it really trained.
 */
export function trainingProviders(): { device: string; providers: Providers; fellBackFrom?: { device: string; error: string } } {
  const error = failedProviders.get(providersKey(configured.providers));
  return error === undefined ? configured : { device: 'cpu', providers: ['cpu'], fellBackFrom: { device: configured.device, error } };
}

/** Host↔device traffic of the engine's runs (inputs handed to ORT, outputs read back), in bytes. */
export class TransferCounter {
  toDevice = 0;
  fromDevice = 0;
  reset(): void { this.toDevice = 0; this.fromDevice = 0; }
  get total(): number { return this.toDevice + this.fromDevice; }
}

export type Feed = Float32Array | BigInt64Array | boolean | number;
export interface Output { data: Float32Array; dims: number[] }
/** A host value for a run: a typed array with its dims, or a scalar (bool or float). */
export interface HostFeed { data: Feed; dims?: number[] }

/**
 * A tensor a run left where it was computed (GPU memory on webgpu:0, host memory on the CPU), to feed to later
 * runs of any session of the engine. GPU memory is freed by `dispose` (ORT does not collect it), host memory by
 * the garbage collector.
 */
export class DeviceTensor {
  private released = false;
  constructor(readonly tensor: ort.Tensor) {}
  get dims(): readonly number[] { return this.tensor.dims; }
  /** 'gpu-buffer' where it lives in GPU memory, 'cpu' on the host. */
  get location(): string { return this.tensor.location; }
  dispose(): void {
    if (this.released) return;
    this.released = true;
    if (this.tensor.location === 'gpu-buffer') this.tensor.dispose();
  }
}

/** A run's outputs: host arrays (read back, counted) and DeviceTensors (left on the device). */
export class RunOutputs {
  constructor(private readonly values: Record<string, Output | DeviceTensor>) {}
  host(name: string): Output {
    const v = this.values[name];
    if (!v || v instanceof DeviceTensor) throw new Error(`output ${name} is not a host output`);
    return v;
  }
  device(name: string): DeviceTensor {
    const v = this.values[name];
    if (!(v instanceof DeviceTensor)) throw new Error(`output ${name} is not a device output`);
    return v;
  }
}

export interface GraphSessionOptions {
  threads?: number;
  /**
   * ONNX Runtime's memory arena for the session's intermediate tensors. With it a run reuses memory it has touched
   * (a 20M RL step: 2.2 s; without, 4.3 s: every large tensor is a fresh mmap, page-faulted in), but every session
   * keeps its own arena at its peak for good, so an engine holds every layer's peak and the head's
   * (graph-engine.ts's arenasAffordable decides from the memory there is). Default off.
   */
  arena?: boolean;
  providers?: ort.InferenceSession.ExecutionProviderConfig[];
  counter?: TransferCounter;
  /** Outputs left on the device as DeviceTensors (the rest come back to the host). */
  deviceOutputs?: string[];
}

/**
 * Whether these providers run the graphs on WebGPU: the one device where a session can leave outputs in device
 * memory (the binding's IO binding), and whose kernels the head graph is built for (head-graph.ts).
 */
export const onWebGpu = (providers: Providers) => providerName(providers[0]) === 'webgpu';

/** Whether these providers are the CPU's alone (the graphs may then use CPU-only kernels: frozen-matrix.ts). */
export const cpuOnly = (providers: Providers) => providers.every((p) => providerName(p) === 'cpu');

/**
 * Whether a session on these providers computes on a GPU but hands every output back in host memory (CUDA:
 * onnxruntime-node 1.30 binds device outputs for WebGPU only), so that a DeviceTensor is a host tensor the next
 * run sends up again: every such output and feed crosses, and the counter counts each.
 */
export const outputsCrossToHost = (providers: Providers) => !cpuOnly(providers) && !onWebGpu(providers);

export class GraphSession {
  private readonly deviceOutputs: Set<string>;

  private constructor(private readonly session: NativeSession, private readonly counter: TransferCounter | null, deviceOutputs: string[], readonly providers: Providers) {
    this.deviceOutputs = new Set(deviceOutputs);
  }

  /** Whether device outputs live in GPU memory (else they are host tensors: the CPU, or a provider without IO binding). */
  get resident(): boolean { return onWebGpu(this.providers); }

  /**
   * Loads on `opts.providers` (default the CPU); where ONNX Runtime cannot (see failedProviders), on the CPU.
   * Prepacking off: MatMul/Gemm would otherwise keep a packed copy of every float weight beside the initializer
   * (twice the base's memory); MLAS packs the operand per call instead, which costs O(N·K) against the
   * product's O(M·N·K).
   *
   * Constant folding off: it would run every block-stored matrix's dequantization (Cast/Div/Floor over
   * initializers only) at load and keep the float32 result as a new initializer in each If branch: a 0.25B Q4_K
   * model's graphs held 5.6 GB instead of 0.8 GB (scripts/measure-train-memory.ts), and loading took 14–30 s
   * instead of 3.4 s. The other level-'all' rewrites stay.
   * CPU arena (opts.arena, off unless the engine can afford it): each of the engine's sessions keeps its own
   * arena at its peak, so a step's transients are held once per layer: a 0.25B Q4_K model's RSS grew 3.7 → 7.0 GB
   * over two steps with it, and stayed at 1.1 GB (peak 1.4 GB) without it. Without it each large tensor is a fresh
   * mmap, page-faulted in: a 20M RL step took 4.3 s instead of 2.2 s (same minute).
   * Memory patterns off: a run's planned tensors then take one block sized for the whole plan, which the arena
   * keeps: the 20M RL engine held 2.16 GB with them and 1.41 GB without, at the same speed (forward 459 / 437 ms,
   * backward 242 / 225 ms).
   */
  static load(model: Uint8Array, opts: GraphSessionOptions = {}): GraphSession {
    const asked = opts.providers ?? ['cpu'];
    if (cpuOnly(asked)) return GraphSession.loadWith(model, asked, opts);
    const key = providersKey(asked);
    if (!failedProviders.has(key)) {
      try {
        return GraphSession.loadWith(model, asked, opts);
      } catch (err) {
        const error = (err as Error).message.split('\n')[0].slice(0, 300);
        failedProviders.set(key, error);
        const device = key === providersKey(configured.providers) ? configured.device : asked.map(providerName).join(', ');
        fallbackLog(`[training] device ${device}: ONNX Runtime cannot load the training graphs there (${error}); training continues on the CPU`);
      }
    }
    return GraphSession.loadWith(model, ['cpu'], opts);
  }

  private static loadWith(model: Uint8Array, providers: Providers, opts: GraphSessionOptions): GraphSession {
    throwIfComputeCancelled(); // a cancel heard while the graphs before this one loaded (an 8B job's 33 take ~40 s)
    const session = newNativeSession();
    const deviceOutputs = opts.deviceOutputs ?? [];
    session.loadModel(model.buffer as ArrayBuffer, model.byteOffset, model.byteLength, {
      executionProviders: providers,
      ...(onWebGpu(providers) && deviceOutputs.length > 0 ? { preferredOutputLocation: Object.fromEntries(deviceOutputs.map((o) => [o, 'gpu-buffer' as const])) } : {}),
      logSeverityLevel: 3,
      intraOpNumThreads: opts.threads ?? trainingThreads(),
      interOpNumThreads: 1,
      executionMode: 'sequential',
      enableCpuMemArena: opts.arena ?? false,
      enableMemPattern: false,
      graphOptimizationLevel: 'all',
      extra: { session: { intra_op: { allow_spinning: '0' }, disable_prepacking: '1' }, optimization: { disable_specified_optimizers: 'ConstantFolding' } },
      // Developer tool, as for inference sessions: ORT's per-node timing (JSON files under this prefix).
      ...(process.env.HEARTH_ORT_PROFILE ? { enableProfiling: true, profileFilePrefix: process.env.HEARTH_ORT_PROFILE } : {}),
    });
    computeProgressed(); // an 8B job builds 33 of these before its first step
    return new GraphSession(session, opts.counter ?? null, deviceOutputs, providers);
  }

  /**
   * Run with `feeds`: host values (typed arrays with their dims; booleans and numbers as scalars) or DeviceTensors
   * of earlier runs. Returns every output: those named in deviceOutputs as DeviceTensors, the rest as host arrays.
   */
  run(feeds: Record<string, HostFeed | DeviceTensor>): RunOutputs {
    // A cancel heard by the worker's pulse thread while this thread computes (src/runtime/compute-cancel.ts): the
    // micro-batch stops here, within one run (an 8B layer's backward: ~2 s), not at its end (~90 s).
    throwIfComputeCancelled();
    const tensors: Record<string, ort.Tensor> = {};
    // On CUDA, DeviceTensors are host tensors: sent up again by every run that reads them (outputsCrossToHost).
    const crossing = outputsCrossToHost(this.providers);
    let sent = 0;
    for (const [name, feed] of Object.entries(feeds)) {
      if (feed instanceof DeviceTensor) {
        tensors[name] = feed.tensor;
        if (crossing && feed.location !== 'gpu-buffer') sent += byteLength(feed.tensor);
        continue;
      }
      tensors[name] = hostTensor(feed);
      sent += typeof feed.data === 'object' ? feed.data.byteLength : 4;
    }
    const fetches = Object.fromEntries(this.session.outputMetadata.map((m) => [m.name, null]));
    const results = this.session.run(tensors, fetches, {});
    computeProgressed(); // seconds of a step at 8B: the worker's pulse thread sees it move (worker/pulse.ts)
    const out: Record<string, Output | DeviceTensor> = {};
    let received = 0;
    for (const [name, r] of Object.entries(results)) {
      if (this.deviceOutputs.has(name)) {
        out[name] = new DeviceTensor(r);
        if (crossing && r.location !== 'gpu-buffer') received += byteLength(r);
        continue;
      }
      const data = r.data as Float32Array;
      out[name] = { data, dims: [...r.dims] };
      received += data.byteLength;
    }
    if (this.counter) { this.counter.toDevice += sent; this.counter.fromDevice += received; }
    return new RunOutputs(out);
  }

  dispose(): void {
    if (process.env.HEARTH_ORT_PROFILE) this.session.endProfiling();
    this.session.dispose();
  }
}

const byteLength = (t: ort.Tensor) => (t.data as ArrayBufferView).byteLength;

function hostTensor({ data, dims }: HostFeed): ort.Tensor {
  if (typeof data === 'boolean') return new ort.Tensor('bool', new Uint8Array([data ? 1 : 0]), []);
  if (typeof data === 'number') return new ort.Tensor('float32', new Float32Array([data]), []);
  return new ort.Tensor(data instanceof BigInt64Array ? 'int64' : 'float32', data, dims ?? [data.length]);
}

/**
 * Sessions of Identity graphs (in.i → out.i, float, any shapes of the given ranks), one per list of ranks, built
 * when first asked: what moves tensors between host and device memory. `toDevice`: outputs stay on the device
 * (uploads); else they come back to the host (reads), counted by `counter`.
 */
class IdentitySessions {
  private readonly graphs = new Map<string, GraphSession>();
  constructor(private readonly providers: Providers, private readonly toDevice: boolean, private readonly counter?: TransferCounter) {}

  for(ranks: number[]): GraphSession {
    const key = ranks.join(',');
    let session = this.graphs.get(key);
    if (!session) {
      const g = new GraphBuilder();
      ranks.forEach((rank, i) => {
        const dims = Array.from({ length: rank }, (_, k) => `d${i}_${k}`);
        g.node('Identity', [g.input(`in.${i}`, DataType.FLOAT, dims)], { outputs: [`out.${i}`] });
        g.output(`out.${i}`, DataType.FLOAT, dims);
      });
      const outputs = ranks.map((_, i) => `out.${i}`);
      session = GraphSession.load(g.toModelBytes(this.toDevice ? 'hearth_upload' : 'hearth_read'), { providers: this.providers, threads: 1, ...(this.toDevice ? { deviceOutputs: outputs } : { counter: this.counter }) });
      this.graphs.set(key, session);
    }
    return session;
  }

  dispose(): void {
    for (const s of this.graphs.values()) s.dispose();
  }
}

/**
 * Host arrays put on the device once, to be fed to many runs (a step's adapters, a micro-batch's tables): on a
 * session that binds device memory, through Identity graphs whose outputs stay there; elsewhere the arrays wrapped
 * as they are. Counted once either way.
 */
export class DeviceUploader {
  private readonly sessions: IdentitySessions;
  constructor(private readonly providers: Providers, private readonly counter: TransferCounter) {
    this.sessions = new IdentitySessions(providers, true);
  }

  /** `counted` false: a transfer of loading (as the weights in initializers), not of a step. */
  upload(values: Record<string, { data: Float32Array; dims: number[] }>, counted = true): Record<string, DeviceTensor> {
    const names = Object.keys(values);
    if (counted) for (const name of names) this.counter.toDevice += values[name].data.byteLength;
    if (!onWebGpu(this.providers)) return Object.fromEntries(names.map((n) => [n, new DeviceTensor(hostTensor(values[n]))]));
    const out = this.sessions.for(names.map((n) => values[n].dims.length)).run(Object.fromEntries(names.map((n, i) => [`in.${i}`, values[n]])));
    return Object.fromEntries(names.map((n, i) => [n, out.device(`out.${i}`)]));
  }

  dispose(): void {
    this.sessions.dispose();
  }
}

/**
 * DeviceTensors brought to the host (a step's gradients for TF.js, a device optimizer's adapters and moments
 * before a checkpoint): from GPU memory through Identity graphs whose outputs come back, run synchronously like
 * every other; elsewhere they are host tensors already, copied. Counted as a read, except on CUDA, whose outputs
 * were counted when they came back (outputsCrossToHost).
 */
export class DeviceReader {
  private readonly sessions: IdentitySessions;
  constructor(private readonly providers: Providers, private readonly counter: TransferCounter) {
    this.sessions = new IdentitySessions(providers, false, counter);
  }

  read(tensors: DeviceTensor[]): Float32Array[] {
    if (!onWebGpu(this.providers)) {
      if (!outputsCrossToHost(this.providers)) for (const t of tensors) this.counter.fromDevice += byteLength(t.tensor);
      return tensors.map((t) => Float32Array.from(t.tensor.data as Float32Array));
    }
    const out = this.sessions.for(tensors.map((t) => t.dims.length)).run(Object.fromEntries(tensors.map((t, i) => [`in.${i}`, t])));
    return tensors.map((_, i) => out.host(`out.${i}`).data);
  }

  dispose(): void {
    this.sessions.dispose();
  }
}
