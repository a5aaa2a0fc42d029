// One training graph loaded into ONNX Runtime, run synchronously (the engine runs inside TF.js's custom-gradient
// functions, which are synchronous) through onnxruntime-node's native binding, as ort-compute.ts does. Counts the
// bytes each run hands over and gets back: on a GPU these cross between host and device, on the CPU they show
// what would.
import * as ort from 'onnxruntime-node';
import { newNativeSession, trainingThreads, type NativeSession } from '../ort-compute.js';


type Providers = ort.InferenceSession.ExecutionProviderConfig[];

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

export interface GraphSessionOptions {
  threads?: number;
  /**
   * ONNX Runtime's memory arena for the session's intermediate tensors. With it a run reuses memory it has touched
   * (a 20M RL step: 2.2 s; without, 4.3 s: every large tensor is a fresh mmap, page-faulted in), but every session
   * keeps its own arena at its peak for good, so an engine of L + 1 sessions holds L + 1 peaks (graph-engine.ts
   * decides from the memory there is). Default off.
   */
  arena?: boolean;
  providers?: ort.InferenceSession.ExecutionProviderConfig[];
  counter?: TransferCounter;
}

export class GraphSession {
  private constructor(private readonly session: NativeSession, private readonly counter: TransferCounter | null) {}

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
   * CPU arena (opts.arena, off unless the engine can afford it): each of the numLayers + 1 sessions keeps its own
   * arena at its peak, so a step's transients are held once per layer: a 0.25B Q4_K model's RSS grew 3.7 → 7.0 GB
   * over two steps with it, and stayed at 1.1 GB (peak 1.4 GB) without it. Without it each large tensor is a fresh
   * mmap, page-faulted in: a 20M RL step took 4.3 s instead of 2.2 s (same minute).
   */
  static load(model: Uint8Array, opts: GraphSessionOptions = {}): GraphSession {
    const asked = opts.providers ?? ['cpu'];
    if (asked.every((p) => providerName(p) === 'cpu')) return GraphSession.loadWith(model, asked, opts);
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
    const session = newNativeSession();
    session.loadModel(model.buffer as ArrayBuffer, model.byteOffset, model.byteLength, {
      executionProviders: providers,
      logSeverityLevel: 3,
      intraOpNumThreads: opts.threads ?? trainingThreads(),
      interOpNumThreads: 1,
      executionMode: 'sequential',
      enableCpuMemArena: opts.arena ?? false,
      graphOptimizationLevel: 'all',
      extra: { session: { intra_op: { allow_spinning: '0' }, disable_prepacking: '1' }, optimization: { disable_specified_optimizers: 'ConstantFolding' } },
      // Developer tool, as for inference sessions: ORT's per-node timing (JSON files under this prefix).
      ...(process.env.HEARTH_ORT_PROFILE ? { enableProfiling: true, profileFilePrefix: process.env.HEARTH_ORT_PROFILE } : {}),
    });
    return new GraphSession(session, opts.counter ?? null);
  }

  /** Run with `feeds` (typed arrays with their dims; booleans and numbers as scalars); returns every output. */
  run(feeds: Record<string, { data: Feed; dims?: number[] }>): Record<string, Output> {
    const tensors: Record<string, ort.Tensor> = {};
    let sent = 0;
    for (const [name, { data, dims }] of Object.entries(feeds)) {
      if (typeof data === 'boolean') tensors[name] = new ort.Tensor('bool', new Uint8Array([data ? 1 : 0]), []);
      else if (typeof data === 'number') tensors[name] = new ort.Tensor('float32', new Float32Array([data]), []);
      else tensors[name] = new ort.Tensor(data instanceof BigInt64Array ? 'int64' : 'float32', data, dims ?? [data.length]);
      sent += typeof data === 'object' ? data.byteLength : 4;
    }
    const fetches = Object.fromEntries(this.session.outputMetadata.map((m) => [m.name, null]));
    const results = this.session.run(tensors, fetches, {});
    const out: Record<string, Output> = {};
    let received = 0;
    for (const [name, r] of Object.entries(results)) {
      out[name] = { data: r.data as Float32Array, dims: r.dims };
      received += r.data.byteLength;
    }
    if (this.counter) { this.counter.toDevice += sent; this.counter.fromDevice += received; }
    return out;
  }

  dispose(): void {
    if (process.env.HEARTH_ORT_PROFILE) this.session.endProfiling();
    this.session.dispose();
  }
}
