// The training jobs: SFT and RL over already-tokenized sequences.
//
// Both report through `emit`: `training_started {num_sequences}` first (= the number of
// gradient_step events that follow), then one `gradient_step` of plain numbers per optimizer step.
// The checkpoint folder is written (atomically) before the function returns; the caller then
// lists it and emits training_ended. Cancellation is checked between optimizer steps.
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig, Weights } from '../../src/runtime/model-config.js';
import { assertFitsWasmHeap, explainTrainingError } from './capacity.js';
import { countParameters } from './tensor-utils.js';
import { initTrainingBackend, type BackendName, type TrainingBackend } from './backend.js';
import { writeCheckpoint, type CheckpointContents } from './checkpoint.js';
import { microBatches, packSequences, trainableTokens, trainedPositions, validateSequence, type MicroBatch, type TrainSequence } from './data.js';
import { DEFAULT_LORA_CONFIG, LoraAdapters, type LoraConfig } from './lora.js';
import { readAndDispose, sftTokenWeights, weightedNll } from './losses.js';
import { LlamaModel, type LayerRecomputation } from './model.js';
import { chooseTrainingEngine } from './engine-choice.js';
import { GraphLoraModel } from './graph/graph-model.js';
import { DeviceAdamW } from './graph/device-adamw.js';
import { trainingProviders } from './graph/graph-session.js';
import { frozenProductsDevice } from './frozen-linear.js';
import { assertGraphPlanFits, graphMemoryPlan, type GraphMemoryPlan, type PlannedTensor } from './graph/memory-plan.js';
import { arenasAffordable } from './graph/graph-engine.js';
import type { DeviceMemory } from '../../src/runtime/device-memory.js';
import { ComputeCancelledError } from '../../src/runtime/compute-cancel.js';
import { freemem, totalmem } from 'node:os';
import type { TrainingModel } from './token-logprobs.js';
import { weightsSource, type WeightSource } from '../../src/runtime/weight-source.js';
import { onnxRuntimeCompute } from './ort-kernels.js';
import { AdamW, DEFAULT_ADAMW, learningRateAt, type AdamWConfig } from './optimizer.js';
import { adapterMoments, restoreAdapterMoments } from './adapter-moments.js';
import type { OptimizerState } from '../../src/runtime/optimizer-state.js';
import type { RewardStdDevPoint } from '../../src/domain/reward-std-lr.js';
import type { RlData } from './rl-data.js';
import { rlSettingsFromExperimentalConfig, type RlSettings } from '../../src/protocol/rl-settings.js';
import { forEachMicroBatch, optimizerStep } from './train-step.js';
import { klReferenceLogprobs, rlDataMetrics, rlLearningRate, rlMicroBatchLoss, rlTrainSequences } from './rl-step.js';
import { logprobsAt, sequenceLogprobs } from './token-logprobs.js';
import { encodeTokenLogprobs, type TokenLogprobsReport } from '../../src/protocol/token-logprobs.js';

export type TrainingEvent =
  | { type: 'training_started'; data: { num_sequences: number } }
  | { type: 'gradient_step'; data: Record<string, number>; tokenLogprobs?: TokenLogprobsReport };

export type Emit = (event: TrainingEvent) => void | Promise<void>;

/**
 * A step's metrics without NaN or ±Infinity (a diverged loss, a 0 s step's tokens_per_second): JSON writes
 * them as null, and ART's client calls float() on every value of a gradient_step, which aborts its run.
 */
export function finiteMetrics(metrics: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(metrics).filter(([, v]) => Number.isFinite(v)));
}

/** The model a job trains, and where it starts from. */
export interface TrainingModelSpec {
  config: ModelConfig;
  /** Base weights (Hugging Face names and layout), float32. Read from `source` when absent. */
  weights?: Weights;
  /**
   * The base as its file stores it (quantized blocks kept, read tensor by tensor): what the graph engine builds
   * its graphs from. Absent: the float `weights`.
   */
  source?: WeightSource;
  /** Written into adapter_config.json as base_model_name_or_path. */
  baseModelName: string;
  /** 'lora' trains adapters on a frozen base; 'full' trains every weight (small models). */
  mode: 'lora' | 'full';
  /** LoRA settings for a fresh adapter (ignored when resuming from a LoRA checkpoint). */
  lora?: Partial<LoraConfig>;
  /** Continue from a previous checkpoint of this model (e.g. the latest step). */
  resumeFrom?: CheckpointContents | null;
  /** Recompute decoder layers in the backward pass (default auto: when the activations would not fit, model.ts). */
  recompute?: LayerRecomputation;
}

export interface TrainingDeps {
  model: TrainingModelSpec;
  /** Folder of the checkpoint to write; must not exist yet. */
  checkpointDir: string;
  isCancelled?: () => boolean | Promise<boolean>;
  log?: (line: string) => void;
  /** Force a TF.js backend (default: best available, see backend.ts). */
  backend?: BackendName;
  /** Tokens per forward/backward pass (micro-batch); gradients accumulate across them. Default: see defaultMicroBatchTokens. */
  microBatchTokens?: number;
  /** Global-norm gradient clipping; <= 0 disables. Default 1. */
  maxGradNorm?: number;
  weightDecay?: number;
  /** AdamW's betas, epsilon and weight decay (default DEFAULT_ADAMW with `weightDecay`). */
  adamw?: AdamWConfig;
  /**
   * SFT, LoRA: continue AdamW from these moments (null: fresh) and write its moments beside the checkpoint (a native
   * run's optim_step, docs/art.md). Absent: a fresh AdamW whose moments end with the job (preview jobs).
   */
  carryOptimizer?: { from: OptimizerState | null };
  /** Seed of fresh LoRA A matrices. */
  seed?: number;
  /** RL: the checkpoint the KL penalty compares against (ART's kl_penalty_reference_step / lag / path); null = the base. */
  klReference?: CheckpointContents | null;
  /** The GPU's memory when the graph engine runs on one (graph-session.ts setTrainingProviders): its share is checked against it. */
  deviceMemory?: DeviceMemory;
}

export interface TrainingResult {
  checkpointDir: string;
  steps: number;
  backend: TrainingBackend;
  /**
   * The engine that trained (engine-choice.ts), where its graphs ran (the graph engine: the device set for the
   * worker, or cpu after a failed load there; TF.js: its frozen products' device, else cpu) and, for the graph engine,
   * the bytes its runs handed to and read back from ONNX Runtime.
   */
  engine: { name: 'graph' | 'tfjs'; device: string; hostDeviceBytes: number; lastStepHostDeviceBytes: number };
  /** Metrics of the last gradient step (empty if there was none). */
  lastMetrics: Record<string, number>;
}

export interface SftJob {
  sequences: TrainSequence[];
  /** Sequences per optimizer step; "auto" = 2, or sized so a learning-rate list has one entry per batch. */
  batchSize: number | 'auto';
  /** One value, or one per batch (ART's train_sft sends a schedule as a list). */
  learningRate: number | number[];
  /** Schedule for a single learning-rate value (default constant, no warmup). */
  schedule?: { warmupSteps: number; kind: 'constant' | 'cosine'; minRatio?: number };
  /**
   * Measure, do not train: one pass over all sequences at the starting weights reports the loss and token
   * counts an optimizer step on them would use, and no checkpoint is written (a native run's forward_backward,
   * whose gradient its optim_step recomputes from the same inputs and weights: docs/art.md).
   */
  forwardOnly?: boolean;
  /** With forwardOnly: report every trained target's logprob at the measured weights (the gradient_step's tokenLogprobs). */
  returnTokenLogprobs?: boolean;
  /**
   * One optimizer step over every sequence (their gradients accumulated) at `learningRate`, whatever batchSize says:
   * a native run's optim_step applies its batch once (docs/art.md).
   */
  oneOptimizerStep?: boolean;
}

export interface RlJob {
  data: RlData;
  /** experimental_config as parsed by src/protocol/rl-settings.ts (default: ART's defaults). */
  settings?: RlSettings;
  /** The model's `train/reward_std_dev` by step, for scale_learning_rate_by_reward_std_dev. */
  rewardStdDevHistory?: readonly RewardStdDevPoint[];
  /**
   * Measure, do not train: the policy loss each of the job's steps would start from, at the starting weights, summed
   * up in one `gradient_step`; no optimizer step, no checkpoint (a native run's RL forward_backward: docs/art.md).
   */
  forwardOnly?: boolean;
  /** With forwardOnly: report every trained target's logprob at the measured weights (the gradient_step's tokenLogprobs). */
  returnTokenLogprobs?: boolean;
  /**
   * One optimizer step over every packed sequence (their gradients accumulated), instead of one step per packed
   * sequence as ART's preview-era trainer makes: a native run's optim_step applies its batch once (docs/art.md).
   */
  oneOptimizerStep?: boolean;
}

/**
 * Micro-batch size when none is given. TF.js: the [tokens, vocab] logits and their gradient dominate the memory of
 * a step on its 4 GB heap, so keep tokens · vocab near 16M floats (64 MB a copy): 512 tokens at a 32k vocabulary,
 * 128 at 150k, at most 2048. The graph engine has no heap: it keeps one [tokens, vocab] softmax (in vocabulary
 * chunks) per micro-batch, so 64M floats (256 MB): 2,048 tokens at 32k, 441 at 150k, at most 4,096. Larger
 * micro-batches make larger products (an RL step of 32 × 127 tokens runs as two micro-batches instead of eight).
 */
export function defaultMicroBatchTokens(config: ModelConfig, engine: 'graph' | 'tfjs' = 'tfjs'): number {
  if (engine === 'graph') return Math.max(128, Math.min(4096, Math.floor(67_108_864 / config.vocabSize)));
  return Math.max(128, Math.min(2048, Math.floor(16_777_216 / config.vocabSize)));
}

/** The base's float32 weights: given, or read whole from the source (TF.js engine). */
function floatWeights(spec: TrainingModelSpec): Weights {
  if (spec.weights) return spec.weights;
  if (!spec.source) throw new Error('the training model has neither weights nor a weight source');
  return new Map([...spec.source].map(([name, t]) => [name, { shape: t.shape, data: t.f32() }]));
}

/** The job's LoRA adapters: continued from its checkpoint, or fresh. */
function jobAdapters(spec: TrainingModelSpec, seed: number): LoraAdapters {
  const resume = spec.resumeFrom ?? null;
  if (resume?.kind === 'full') throw new Error('cannot continue LoRA training from a full fine-tuning checkpoint');
  return resume?.kind === 'lora'
    ? LoraAdapters.fromPeftTensors(spec.config, resume.lora, resume.tensors)
    : LoraAdapters.create(spec.config, { ...DEFAULT_LORA_CONFIG, ...spec.lora }, seed);
}

/** The LoRA settings a job trains with (its checkpoint's when it continues one). */
function jobLoraConfig(spec: JobEngineInputs): LoraConfig | null {
  if (spec.mode !== 'lora') return null;
  return spec.resumeFrom?.kind === 'lora' ? spec.resumeFrom.lora : { ...DEFAULT_LORA_CONFIG, ...spec.lora };
}

type JobEngineInputs = Pick<TrainingModelSpec, 'mode' | 'lora' | 'resumeFrom'>;

/**
 * The engine a job trains on (engine-choice.ts) from its mode and the LoRA settings it will really use: a
 * continued LoRA checkpoint's own config (its dropout) decides, not the request's. job.ts asks before reading the
 * base, to read it as stored (graph engine) or whole in float32 (TF.js).
 */
export function jobEngine(spec: JobEngineInputs): ReturnType<typeof chooseTrainingEngine> {
  return chooseTrainingEngine({ mode: spec.mode, lora: jobLoraConfig(spec) });
}

/**
 * The model a job trains, on the engine engine-choice.ts picks (one log line says which and why): LoRA on
 * ONNX Runtime graphs over the stored base, or the TF.js decoder.
 */
export function buildJobModel(spec: TrainingModelSpec, seed = 0, log?: (line: string) => void, plan: GraphMemoryPlan | null = null, deviceMemory?: DeviceMemory): TrainingModel {
  const choice = jobEngine(spec);
  if (choice.engine === 'tfjs') {
    log?.(`[training] engine: TF.js (${choice.reason})`);
    return buildTrainingModel(spec, seed);
  }
  const started = performance.now();
  // ONNX Runtime's arenas (no page faults on large tensors, one peak kept per session) where the plan says they fit.
  const arenas = plan !== null ? arenasAffordable(spec.config.numLayers, plan) : { head: false, layers: false };
  // On a GPU that keeps the saved activations: its memory the plan leaves free.
  const deviceFreeForSaving = plan !== null && deviceMemory ? Math.max(0, deviceMemory.freeMiB * 2 ** 20 - plan.runtimeHeld) : undefined;
  const model = GraphLoraModel.build(spec.config, spec.source ?? weightsSource(floatWeights(spec)), jobAdapters(spec, seed), { providers: trainingProviders().providers, arenas, deviceFreeForSaving });
  // Read after the build: a device whose provider failed to load has fallen back to the CPU (graph-session.ts).
  const { device, fellBackFrom } = trainingProviders();
  const recomputes = model.engine.savedActivationsPlace.kind === 'crossing' ? '; every layer recomputes its forward in the backward (this device\'s outputs come back to the host: saving would move them down and up again)' : '';
  // Freed blocks kept for the next run (graph/freed-memory.ts), or each large tensor a fresh mapping, and why.
  const freed = model.engine.freedMemory;
  const heap = freed.held ? '; freed memory kept for reuse' : `; large tensors are fresh mappings (glibc's malloc not tunable here: ${freed.reason})`;
  log?.(`[training] engine: ONNX Runtime graphs on ${device}${fellBackFrom ? ` (${fellBackFrom.device} failed to load)` : ''} (${choice.reason}); ${spec.config.numLayers + 1} graphs built${arenas.layers ? ' (with memory arenas)' : arenas.head ? ' (a memory arena for the head)' : ''} in ${((performance.now() - started) / 1000).toFixed(1)} s${heap}${recomputes}`);
  return model;
}

/** Build the trainable TF.js model (and its adapters) a job starts from. */
export function buildTrainingModel(spec: TrainingModelSpec, seed = 0): LlamaModel {
  const resume = spec.resumeFrom ?? null;
  if (spec.mode === 'full') {
    if (resume?.kind === 'lora') throw new Error('cannot continue full fine-tuning from a LoRA checkpoint');
    const full = LlamaModel.fromWeights(spec.config, resume?.kind === 'full' ? resume.weights : floatWeights(spec), { trainable: true });
    full.recompute = spec.recompute ?? 'auto';
    return full;
  }
  const lora = jobAdapters(spec, seed);
  // On the ONNX Runtime path the frozen base stays outside the wasm heap (frozen-linear.ts).
  const model = LlamaModel.fromWeights(spec.config, floatWeights(spec), { trainable: false, frozenOutsideHeap: onnxRuntimeCompute() });
  model.recompute = spec.recompute ?? 'auto';
  model.lora = lora;
  return model;
}

/**
 * Refuse a job that cannot fit before anything is loaded: the graph engine's memory plan (graph/memory-plan.ts)
 * against the machine's (and the GPU's) memory, or the wasm heap check on the wasm backend. Both size the largest
 * micro-batch as one row of `budget` tokens, or of the longest sequence when it is longer (the worst case of the
 * packing: attention is rows × length²).
 */
function assertFits(spec: TrainingModelSpec, sequences: TrainSequence[], budget: number, backend: TrainingBackend, deviceMemory?: DeviceMemory): GraphMemoryPlan | null {
  const longest = sequences.reduce((a, s) => Math.max(a, s.ids.length - 1), 0);
  const tokens = Math.max(budget, longest);
  // The graph engine's micro-batches are rows as long as their longest sequence (data.ts): at most about
  // budget / longest rows of the longest sequence, whose attention is rows × length².
  const longestRow = Math.max(1, Math.min(tokens, longest));
  if (jobEngine(spec).engine === 'graph') return assertGraphJobFits(spec, { rows: Math.ceil(tokens / longestRow), length: longestRow }, trainingProviders().device, deviceMemory);
  if (backend.name !== 'wasm') return null;
  const frozen = spec.mode === 'lora' && onnxRuntimeCompute() ? 'outside-heap' : 'heap';
  assertFitsWasmHeap(spec.config, spec.mode, { frozen, microBatchTokens: tokens, fusedHead: onnxRuntimeCompute() });
  return null;
}

/** The graph engine's check: the plan from the base's shapes and stored types (nothing read), against what there is. */
export function assertGraphJobFits(
  spec: TrainingModelSpec, microBatch: number | { rows: number; length: number }, device = 'cpu', deviceMemory?: DeviceMemory,
  host: { available: number; total: number } = { available: process.availableMemory?.() ?? freemem(), total: totalmem() },
): GraphMemoryPlan {
  const tensors = new Map<string, PlannedTensor>();
  if (spec.weights) for (const [name, t] of spec.weights) tensors.set(name, { shape: t.shape });
  else if (spec.source) for (const [name, t] of spec.source) tensors.set(name, { shape: t.shape, ggmlType: t.ggml?.type });
  else throw new Error('the training model has neither weights nor a weight source');
  const lora = jobLoraConfig(spec)!;
  const shape = typeof microBatch === 'number' ? { rows: 1, length: microBatch } : microBatch;
  const plan = graphMemoryPlan({ config: spec.config, tensors, floatBaseHeld: !!spec.weights, lora: { rank: lora.rank, targets: lora.targetModules }, microBatch: shape });
  const what = `LoRA training of a ${(countParameters(spec.config) / 1e9).toFixed(1)}B-parameter model on ONNX Runtime graphs (${device}) at ${shape.rows * shape.length} tokens per micro-batch`;
  assertGraphPlanFits(plan, {
    hostAvailable: host.available, hostTotal: host.total, hostAlreadyHeld: plan.floatBase,
    ...(device !== 'cpu' && deviceMemory ? { device: { ...deviceMemory, label: device } } : {}),
  }, what);
  return plan;
}

/**
 * The job's AdamW: on the graph engine's device for its LoRA jobs (graph/device-adamw.ts: adapters, gradients and
 * moments stay there), else TF.js's over the model's variables.
 */
function jobOptimizer(model: TrainingModel, config: AdamWConfig): AdamW | DeviceAdamW {
  return model instanceof GraphLoraModel ? model.startDeviceOptimizer(config) : new AdamW(model.trainableVariables(), config);
}

/** What the job writes: the adapter (with AdamW's moments beside it where the run carries them) or the full weights. */
function checkpointContents(model: TrainingModel, deps: TrainingDeps, optimizer: AdamW | DeviceAdamW): CheckpointContents {
  if (!model.lora) return { kind: 'full', weights: (model as LlamaModel).exportWeights() };
  if (optimizer instanceof DeviceAdamW) optimizer.readBack(); // the adapters' values, from the device to their variables
  const optimizerState = deps.carryOptimizer ? adapterMoments(model.lora, optimizer) : undefined;
  return { kind: 'lora', lora: model.lora.config, tensors: model.lora.toPeftTensors(), baseModel: deps.model.baseModelName, ...(optimizerState ? { optimizer: optimizerState } : {}) };
}

/** The job's AdamW settings: a native run's optim_step gives its own, else the defaults with `weightDecay`. */
function adamwConfig(deps: TrainingDeps): AdamWConfig {
  return deps.adamw ?? { ...DEFAULT_ADAMW, weightDecay: deps.weightDecay ?? 0 };
}

/** A native run's optim_step continues AdamW from the moments its parent version carries (fresh when it has none). */
function continueCarriedMoments(model: TrainingModel, optimizer: AdamW | DeviceAdamW, carry: TrainingDeps['carryOptimizer']): void {
  if (!carry) return;
  if (!model.lora) throw new Error('the optimizer state is only carried for LoRA training');
  if (carry.from) restoreAdapterMoments(model.lora, optimizer, carry.from);
}

/** `lastStepBytes`: what the job's last optimizer step moved (a steady step's traffic, without the job's one-time transfers). */
function engineReport(model: TrainingModel, lastStepBytes = 0): TrainingResult['engine'] {
  return model instanceof GraphLoraModel
    ? { name: 'graph', device: trainingProviders().device, hostDeviceBytes: model.engine.transfers.total, lastStepHostDeviceBytes: lastStepBytes }
    : { name: 'tfjs', device: (model.lora && frozenProductsDevice()?.device) || 'cpu', hostDeviceBytes: 0, lastStepHostDeviceBytes: 0 };
}

/** Host↔device bytes the graph engine has moved so far (0 for TF.js). */
const bytesMoved = (model: TrainingModel) => (model instanceof GraphLoraModel ? model.engine.transfers.total : 0);

/** Free a job's tensors; after a wasm abort this fails too, and must not hide the real error. */
function release(model: TrainingModel, optimizer: AdamW | DeviceAdamW): void {
  try {
    optimizer.dispose();
    model.dispose();
  } catch {
    // the runtime is already broken; the error being thrown says so
  }
}

async function checkCancelled(deps: TrainingDeps): Promise<void> {
  if (deps.isCancelled && (await deps.isCancelled())) throw new ComputeCancelledError();
}

/**
 * Between two micro-batches of a step: let the worker's event loop run (its heartbeats, lock renewals and the cancel
 * that may have arrived while the micro-batch blocked it), then stop if the job was cancelled.
 */
async function betweenMicroBatches(deps: TrainingDeps): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await checkCancelled(deps);
}

/** SFT batches and their learning rates, validated against ART's conventions. */
export function planSftBatches(job: SftJob): { batches: number[][]; learningRates: number[] } {
  const n = job.sequences.length;
  if (n === 0) throw new Error('SFT job has no training sequences');
  if (job.oneOptimizerStep) {
    const lr = Array.isArray(job.learningRate) ? job.learningRate : [job.learningRate];
    if (lr.length !== 1) throw new Error(`one optimizer step takes one learning rate, got ${lr.length}`);
    return { batches: [job.sequences.map((_, i) => i)], learningRates: lr };
  }
  const lrList = Array.isArray(job.learningRate) ? job.learningRate : null;
  let batchSize: number;
  if (job.batchSize === 'auto') batchSize = lrList ? Math.ceil(n / lrList.length) : Math.min(2, n);
  else batchSize = job.batchSize;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`batch_size must be a positive integer, got ${job.batchSize}`);
  const batches: number[][] = [];
  for (let i = 0; i < n; i += batchSize) batches.push(Array.from({ length: Math.min(batchSize, n - i) }, (_, k) => i + k));
  if (lrList) {
    if (lrList.length !== batches.length) {
      throw new Error(`learning_rate has ${lrList.length} values but the data makes ${batches.length} batches of ${batchSize}`);
    }
    return { batches, learningRates: lrList };
  }
  const peak = job.learningRate as number;
  const s = job.schedule ?? { warmupSteps: 0, kind: 'constant' as const };
  const schedule = { peak, warmupSteps: s.warmupSteps, totalSteps: batches.length, kind: s.kind, minRatio: s.minRatio ?? 0 };
  return { batches, learningRates: batches.map((_, i) => learningRateAt(i, schedule)) };
}

export async function runSft(job: SftJob, deps: TrainingDeps, emit: Emit): Promise<TrainingResult> {
  const backend = await initTrainingBackend({ prefer: deps.backend, log: deps.log });
  for (const s of job.sequences) validateSequence(s, deps.model.config.vocabSize);
  if (job.forwardOnly) return measureSft(job, deps, emit, backend);
  const { batches, learningRates } = planSftBatches(job);
  const budget = deps.microBatchTokens ?? defaultMicroBatchTokens(deps.model.config, jobEngine(deps.model).engine);
  const plan = assertFits(deps.model, job.sequences, budget, backend, deps.deviceMemory);
  const model = buildJobModel(deps.model, deps.seed, deps.log, plan, deps.deviceMemory);
  const optimizer = jobOptimizer(model, adamwConfig(deps));
  let lastMetrics: Record<string, number> = {};
  let lastStepBytes = 0;
  try {
    continueCarriedMoments(model, optimizer, deps.carryOptimizer);
    await emit({ type: 'training_started', data: { num_sequences: batches.length } });
    for (let step = 0; step < batches.length; step++) {
      await checkCancelled(deps);
      const started = performance.now();
      const bytesBefore = bytesMoved(model);
      const indices = batches[step];
      const mbs = microBatches(indices.map((i) => job.sequences[i]), indices, budget);
      const trainable = mbs.reduce((a, m) => a + m.numTrainableTokens, 0);
      const tokens = mbs.reduce((a, m) => a + m.numTokens, 0);
      let loss = 0;
      let gradNorm = 0;
      if (trainable > 0) {
        const lossOf = (mb: MicroBatch) => {
          const at = trainedPositions(mb);
          return weightedNll(logprobsAt(model, mb, at, true), sftTokenWeights(at.lossWeights, trainable));
        };
        const withTargets = mbs.filter((mb) => mb.numTrainableTokens > 0);
        ({ loss, gradNorm } = await optimizerStep(optimizer, withTargets, lossOf, { learningRate: learningRates[step], maxGradNorm: deps.maxGradNorm ?? 1, betweenMicroBatches: () => betweenMicroBatches(deps) }));
      }
      lastStepBytes = bytesMoved(model) - bytesBefore;
      const seconds = (performance.now() - started) / 1000;
      lastMetrics = {
        loss,
        grad_norm: gradNorm,
        learning_rate: learningRates[step],
        num_trajectories: indices.length,
        num_tokens: tokens,
        num_trainable_tokens: trainable,
        tokens_per_second: tokens / seconds,
      };
      await emit({ type: 'gradient_step', data: finiteMetrics(lastMetrics) });
    }
    await checkCancelled(deps);
    await writeCheckpoint(deps.checkpointDir, checkpointContents(model, deps, optimizer));
    return { checkpointDir: deps.checkpointDir, steps: batches.length, backend, lastMetrics, engine: engineReport(model, lastStepBytes) };
  } catch (err) {
    throw explainTrainingError(err);
  } finally {
    release(model, optimizer);
  }
}

/** The forward half of an SFT step: its mean NLL and token counts at the starting weights, nothing written. */
async function measureSft(job: SftJob, deps: TrainingDeps, emit: Emit, backend: TrainingBackend): Promise<TrainingResult> {
  const budget = deps.microBatchTokens ?? defaultMicroBatchTokens(deps.model.config, jobEngine(deps.model).engine);
  const plan = assertFits(deps.model, job.sequences, budget, backend, deps.deviceMemory);
  const model = buildJobModel(deps.model, deps.seed, deps.log, plan, deps.deviceMemory);
  const optimizer = new AdamW([], DEFAULT_ADAMW);
  try {
    await emit({ type: 'training_started', data: { num_sequences: 1 } });
    await checkCancelled(deps);
    const indices = job.sequences.map((_, i) => i);
    const mbs = microBatches(job.sequences, indices, budget);
    const trainable = mbs.reduce((a, m) => a + m.numTrainableTokens, 0);
    let loss = 0;
    await forEachMicroBatch(mbs, () => betweenMicroBatches(deps), (mb) => {
      if (mb.numTrainableTokens === 0) return;
      const at = trainedPositions(mb);
      loss += readAndDispose(tf.tidy(() => weightedNll(logprobsAt(model, mb, at, false), sftTokenWeights(at.lossWeights, trainable))))[0];
    });
    const lastMetrics = {
      loss,
      num_trajectories: job.sequences.length,
      num_tokens: job.sequences.reduce((a, s) => a + s.ids.length, 0),
      num_trainable_tokens: trainable,
      max_sequence_tokens: job.sequences.reduce((a, s) => Math.max(a, s.ids.length), 0),
    };
    const tokenLogprobs = job.returnTokenLogprobs ? measuredTokenLogprobs(model, job.sequences, job.sequences.map((s, i) => s.row ?? i), budget) : undefined;
    await emit({ type: 'gradient_step', data: finiteMetrics(lastMetrics), ...(tokenLogprobs ? { tokenLogprobs } : {}) });
    return { checkpointDir: deps.checkpointDir, steps: 0, backend, lastMetrics, engine: engineReport(model) };
  } catch (err) {
    throw explainTrainingError(err);
  } finally {
    release(model, optimizer);
  }
}

/**
 * The logprob of every trained target at the model's current weights, per sequence and named by input row: one more
 * forward pass, without gradients, micro-batch by micro-batch (so memory stays one micro-batch's activations plus
 * 4 bytes per token). sequenceLogprobs is the quantity every loss here starts from, so these are the logprobs the
 * measured loss was computed from.
 */
function measuredTokenLogprobs(model: TrainingModel, sequences: TrainSequence[], rows: number[], budget: number): TokenLogprobsReport {
  return encodeTokenLogprobs(rows, sequenceLogprobs(model, sequences, budget));
}

export async function runRl(job: RlJob, deps: TrainingDeps, emit: Emit): Promise<TrainingResult> {
  const backend = await initTrainingBackend({ prefer: deps.backend, log: deps.log });
  const settings = job.settings ?? rlSettingsFromExperimentalConfig(null);
  const { data } = job;
  const train = rlTrainSequences(data, settings, deps.model.config.vocabSize);
  const { sequences, trajectoryOf, perToken } = train;
  const learningRate = rlLearningRate(settings, job.rewardStdDevHistory ?? [], new Set(trajectoryOf).size, deps.log);
  const budget = deps.microBatchTokens ?? defaultMicroBatchTokens(deps.model.config, jobEngine(deps.model).engine);
  const plan = assertFits(deps.model, sequences, budget, backend, deps.deviceMemory);
  const model = buildJobModel(deps.model, deps.seed, deps.log, plan, deps.deviceMemory);
  const optimizer = jobOptimizer(model, adamwConfig(deps));
  let lastMetrics: Record<string, number> = {};
  let lastStepBytes = 0;
  try {
    continueCarriedMoments(model, optimizer, deps.carryOptimizer);
    const refLogprobs = settings.loss.klPenaltyCoef !== 0 ? klReferenceLogprobs(model, deps.klReference ?? null, sequences, budget) : null;
    if (settings.precalculateLogprobs) {
      const current = sequenceLogprobs(model, sequences, budget);
      sequences.forEach((s, i) => (s.logprobs = [NaN, ...current[i]]));
    }

    // Tokens of each trajectory's trained positions: every trajectory weighs the same in a step.
    const trajectoryTokens = new Map<number, number>();
    sequences.forEach((s, i) => trajectoryTokens.set(trajectoryOf[i], (trajectoryTokens.get(trajectoryOf[i]) ?? 0) + trainableTokens(s)));
    const packed = packSequences(sequences.map((s) => s.ids.length - 1), settings.packedSequenceLength);
    const steps = job.oneOptimizerStep && !job.forwardOnly && packed.length > 1 ? [packed.flat()] : packed;
    await emit({ type: 'training_started', data: { num_sequences: job.forwardOnly ? 1 : steps.length } });
    // forwardOnly: steps weigh by their share (trajectories, or trained tokens with per-token advantages), as one step over all would.
    const measured = { loss: 0, policy: 0, kl: 0, entropy: 0, trainable: 0, tokens: 0, shares: 0 };

    for (const stepSequences of steps) {
      await checkCancelled(deps);
      const started = performance.now();
      const bytesBefore = bytesMoved(model);
      const trajectoriesInStep = new Set(stepSequences.map((i) => trajectoryOf[i])).size;
      const mbs = microBatches(stepSequences.map((i) => sequences[i]), stepSequences, budget);
      const sums = { policy: 0, kl: 0, entropy: 0 };
      const trainable = mbs.reduce((a, m) => a + m.numTrainableTokens, 0);
      const tokens = mbs.reduce((a, m) => a + m.numTokens, 0);
      // A measuring job's forwards keep nothing for a backward (on a GPU nothing would free it).
      const lossOf = (mb: MicroBatch) => rlMicroBatchLoss(model, mb, { trainable, trajectoriesInStep, trajectoryTokens }, { train, settings, refLogprobs }, sums, !job.forwardOnly);
      if (job.forwardOnly) {
        // The step's loss without its gradient, weighed by the step's share.
        let loss = 0;
        await forEachMicroBatch(mbs, () => betweenMicroBatches(deps), (mb) => void (loss += readAndDispose(tf.tidy(() => lossOf(mb)))[0]));
        const share = perToken ? trainable : trajectoriesInStep;
        Object.assign(measured, {
          loss: measured.loss + loss * share, policy: measured.policy + sums.policy * share, kl: measured.kl + sums.kl * share,
          entropy: measured.entropy + sums.entropy, trainable: measured.trainable + trainable, tokens: measured.tokens + tokens,
          shares: measured.shares + share,
        });
        continue;
      }
      const { loss, gradNorm } = await optimizerStep(optimizer, mbs, lossOf, { learningRate, maxGradNorm: deps.maxGradNorm ?? 1, betweenMicroBatches: () => betweenMicroBatches(deps) });
      lastStepBytes = bytesMoved(model) - bytesBefore;
      const seconds = (performance.now() - started) / 1000;
      lastMetrics = {
        loss,
        policy_loss: sums.policy,
        entropy: trainable > 0 ? sums.entropy / trainable : 0,
        grad_norm: gradNorm,
        learning_rate: learningRate,
        ...rlDataMetrics(data, train),
        // Only the trainable count: ART maps this and train_tokens to one key, and the later one won.
        num_trainable_tokens: trainable,
        num_tokens: tokens,
        tokens_per_second: tokens / seconds,
      };
      if (settings.loss.klPenaltyCoef !== 0) lastMetrics.kl_policy_ref = sums.kl;
      await emit({ type: 'gradient_step', data: finiteMetrics(lastMetrics) });
    }
    if (job.forwardOnly) {
      const per = Math.max(1, measured.shares);
      lastMetrics = {
        loss: measured.loss / per,
        policy_loss: measured.policy / per,
        entropy: measured.trainable > 0 ? measured.entropy / measured.trainable : 0,
        ...rlDataMetrics(data, train),
        num_trainable_tokens: measured.trainable,
        num_tokens: measured.tokens,
        // How the optimizer steps of this data would be packed (ART's PackingOutcome).
        packed_sequences: steps.length,
        packed_sequence_length: settings.packedSequenceLength,
        max_sequence_tokens: sequences.reduce((a, s) => Math.max(a, s.ids.length), 0),
      };
      if (settings.loss.klPenaltyCoef !== 0) lastMetrics.kl_policy_ref = measured.kl / per;
      // Client-made token sequences are the job's rows one to one (rl-token-data.ts: trajectory = row).
      const tokenLogprobs = job.returnTokenLogprobs ? measuredTokenLogprobs(model, sequences, trajectoryOf, budget) : undefined;
      await emit({ type: 'gradient_step', data: finiteMetrics(lastMetrics), ...(tokenLogprobs ? { tokenLogprobs } : {}) });
      return { checkpointDir: deps.checkpointDir, steps: 0, backend, lastMetrics, engine: engineReport(model) };
    }
    await checkCancelled(deps);
    await writeCheckpoint(deps.checkpointDir, checkpointContents(model, deps, optimizer));
    return { checkpointDir: deps.checkpointDir, steps: steps.length, backend, lastMetrics, engine: engineReport(model, lastStepBytes) };
  } catch (err) {
    throw explainTrainingError(err);
  } finally {
    release(model, optimizer);
  }
}
