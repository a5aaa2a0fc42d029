// The training worker's task handler (loaded by worker/default-handlers.ts): a queued RL or SFT job becomes
// a TrainingJobSpec for runTrainingJob, its events go to the API in order, and the finished checkpoint
// folder is reported before the host sends `training_ended` (ART reads the new step right after it).
import { DeviceFrozenProducts } from './device-products.js';
import { setFrozenProductsDevice } from './frozen-linear.js';
import { setTrainingProviders } from './graph/graph-session.js';
import { executionProvidersFor } from '../../src/runtime/runner.js';
import { parseDevice } from '../../src/domain/device-name.js';
import { deviceMemoryOf } from '../../src/hardware/device-memory-of.js';
import fs from 'node:fs';
import { CancelledError, TaskError, type Handlers, type TrainingContext } from '../handlers.js';
import { faultDelayBlocking, faultPointBlocking } from '../../src/runtime/fault-points.js';
import { positiveIntSetting } from '../../src/domain/positive-int-setting.js';
import { ModelLoads } from '../model-loads.js';
import { StepAnnouncements } from './step-announcements.js';
import { LocalArtifacts } from '../artifacts/local-artifacts.js';
import { runTrainingJob, type NativeOptimizerSettings, type TrainingJobSpec } from './job.js';
import type { TrainingEvent } from './loop.js';
import { ComputeCancelledError } from '../../src/runtime/compute-cancel.js';
import { parseLoraTargets } from './lora.js';
import type { TrainingTask } from '../../src/protocol/messages.js';
import { loraAlpha, type NativeOptimizer } from '../../src/protocol/training-task.js';

export function specFromTask(task: TrainingTask): TrainingJobSpec {
  if (!task.baseModelDir) throw new TaskError(400, `base model ${task.baseModel} has no folder on this host`);
  const common = { modelDir: task.baseModelDir, baseModelName: task.baseModel, resumeFrom: task.initCheckpointDir, checkpointDir: task.outputDir };
  const p = task.payload;
  const native = {
    forwardOnly: p.forward_only === true,
    returnTokenLogprobs: p.return_token_logprobs === true,
    oneOptimizerStep: p.one_optimizer_step === true,
    ...(p.lora ? { lora: { rank: p.lora.rank, alpha: loraAlpha(p.lora), targetModules: parseLoraTargets(p.lora.target_modules) } } : {}),
    ...(p.lora?.seed !== undefined ? { seed: p.lora.seed } : {}),
    ...(p.optimizer ? { optimizer: optimizerSettings(p.optimizer) } : {}),
  };
  if (task.kind === 'rl') {
    return {
      ...common, ...native, kind: 'rl', trajectoryGroups: task.payload.trajectory_groups, tokenSequences: task.payload.token_sequences,
      settings: task.rlSettings, klReference: task.klReferenceDir ?? null, rewardStdDevHistory: task.rewardStdDevHistory ?? [],
    };
  }
  let trainJsonl: string;
  try {
    trainJsonl = fs.readFileSync(task.payload.resolved_data_path, 'utf8');
  } catch (err) {
    throw new TaskError(400, `cannot read the training data ${task.payload.resolved_data_path}: ${(err as Error).message}`);
  }
  return { ...common, ...native, kind: 'sft', trainJsonl, config: task.payload.config ?? null };
}

function optimizerSettings(o: NativeOptimizer): NativeOptimizerSettings {
  return { beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weight_decay, gradClipNorm: o.grad_clip_norm };
}

/**
 * The task with this host's paths: the base model, the checkpoints it reads and the SFT data are fetched from the
 * API host first when this host lacks them; the output folder is this host's (uploaded by publishCheckpoint after).
 */
export async function localizeTask(task: TrainingTask, artifacts: LocalArtifacts): Promise<TrainingTask> {
  const at = (p: string) => artifacts.localize(task, p);
  const paths = {
    baseModelDir: task.baseModelDir && (await at(task.baseModelDir)),
    initCheckpointDir: task.initCheckpointDir && (await at(task.initCheckpointDir)),
    klReferenceDir: task.klReferenceDir && (await at(task.klReferenceDir)),
    outputDir: artifacts.outputPathOf(task, task.outputDir),
  };
  if (task.kind === 'rl') return { ...task, ...paths };
  return { ...task, ...paths, payload: { ...task.payload, resolved_data_path: await at(task.payload.resolved_data_path) } };
}

/**
 * @param loads where the job's load and its long steps are announced. From the job's start to the end of its first
 *   step (backend start, reading and decoding the base model and the checkpoint it continues from, building the
 *   model, RL's reference logprobs, the first step's warm-up) the worker's event loop is blocked for long stretches,
 *   as an inference worker's is by its model load: the API waits HEARTH_LOAD_TIMEOUT for its next heartbeat, and the
 *   BullMQ transport holds the job's lock that long (worker/job-locks.ts). Later steps are announced when long
 *   (step-announcements.ts).
 */
export async function createHandlers(device: string, log: (m: string) => void, loads = new ModelLoads(), artifacts = LocalArtifacts.fromEnv(process.env, log)): Promise<Handlers> {
  // On a GPU, the frozen base's products (forward and dx, most of a LoRA step's FLOPs) run on the device with
  // the base weights resident there (device-products.ts); LoRA, norms, attention and the optimizer stay on the
  // TF.js backend, which says in one log line what it chose (tfjs-node-gpu stays optional, not the GPU path).
  // The graph engine (LoRA without dropout, the default) loads its layer and head graphs on the device; where
  // ONNX Runtime cannot load them there, graph-session.ts says so in one line and trains on the CPU.
  // The API's heartbeat timeout (the same variable on every host: docs/configuration.md): steps longer than a third of
  // it are announced before they block.
  const heartbeatTimeoutMs = positiveIntSetting(process.env, 'HEARTH_HEARTBEAT_TIMEOUT', 15) * 1000;
  // Tokens per forward/backward pass: smaller bounds the activations a GPU or a small host must hold, at more passes
  // per step (gradients accumulate across them). Unset: the engine's default for the model (loop.ts).
  const microBatchTokens = process.env.HEARTH_TRAIN_MICRO_BATCH_TOKENS ? positiveIntSetting(process.env, 'HEARTH_TRAIN_MICRO_BATCH_TOKENS', 1) : undefined;
  if (device !== 'cpu') {
    const providers = executionProvidersFor(parseDevice(device));
    setFrozenProductsDevice(new DeviceFrozenProducts(device, providers));
    setTrainingProviders(device, providers, log);
    log(`training on ${device}: graph engine (LoRA) runs its layer and head graphs on ${device} (ONNX Runtime providers ${providers.map((p) => (typeof p === 'string' ? p : p.name)).join(', ')}); TF.js engine (full fine-tuning, LoRA dropout): frozen base products on the device, LoRA, norms and optimizer on the TF.js backend`);
  }

  /** One job on this host's copies of its inputs; the checkpoint reaches the API host before it is reported. */
  async function trainWithInputs(apiTask: TrainingTask, ctx: TrainingContext): Promise<void> {
    const task = await localizeTask(apiTask, artifacts);
    // A folder left at this host's output path by a crash before its upload: the API has no row for this step.
    if (!artifacts.sharesStorage(apiTask)) fs.rmSync(task.outputDir, { recursive: true, force: true });
    const spec = specFromTask(task);
    const announcements = new StepAnnouncements(loads, task.baseModel, heartbeatTimeoutMs);
    await announcements.start();
    try {
      faultPointBlocking('training-model-load');
      // After each event, yield to the event loop: the steps are synchronous compute, and without a macrotask
      // break the worker would send no heartbeats and hear no cancel or parent exit until the job ends.
      const emit = async (event: TrainingEvent) => {
        // A measuring job's token logprobs travel in its one gradient_step (src/protocol/token-logprobs.ts).
        ctx.emit(event.type, event.type === 'gradient_step' && event.tokenLogprobs ? { ...event.data, token_logprobs: event.tokenLogprobs } : event.data);
        await announcements.after(event.type); // a long step: the next one is announced before it blocks
        await new Promise((resolve) => setImmediate(resolve));
        if (event.type === 'training_started' || event.type === 'gradient_step') faultDelayBlocking('training-step');
      };
      // The GPU's free memory now (other jobs and models share it): the job's plan is checked against it.
      const deviceMemory = await deviceMemoryOf(device);
      await runTrainingJob(spec, emit, { isCancelled: () => ctx.cancelled(), log: ctx.log, deviceMemory, microBatchTokens });
    } catch (err) {
      if (err instanceof ComputeCancelledError) throw new CancelledError(); // between micro-batches, or within one (compute-cancel.ts)
      throw err;
    } finally {
      announcements.stop();
    }
    if (spec.forwardOnly) return;
    if (!fs.existsSync(task.outputDir)) throw new Error(`training finished but wrote no checkpoint at ${task.outputDir}`);
    // On the API host, verified, before the API hears of it: it stores training_ended after the checkpoint.
    await artifacts.publishCheckpoint(apiTask, apiTask.outputDir, task.outputDir, apiTask.jobId);
    ctx.checkpoint(apiTask.outputDir);
    log(`job ${task.jobId}: checkpoint step ${task.step} written`);
  }

  return {
    async training(apiTask, ctx) {
      // Pinned before they are localized: another process of this host evicting one in between would pull it away.
      const inputs = [apiTask.baseModelDir, apiTask.initCheckpointDir, apiTask.klReferenceDir, apiTask.kind === 'sft' ? apiTask.payload.resolved_data_path : undefined];
      const pins = inputs.filter((p): p is string => !!p).map((p) => artifacts.pinFor(apiTask, p));
      try {
        return await trainWithInputs(apiTask, ctx);
      } finally {
        for (const unpin of pins) unpin();
      }
    },
  };
}
