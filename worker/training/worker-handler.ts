// The training worker's task handler (loaded by worker/default-handlers.ts): a queued RL or SFT job becomes
// a TrainingJobSpec, trained on the worker's job thread (training-thread.ts), its events go to the API in order, and the
// finished checkpoint folder is reported before the host sends `training_ended` (ART reads the new step right after it).
import fs from 'node:fs';
import { CancelledError, TaskError, type Handlers, type TrainingContext } from '../handlers.js';
import { LocalArtifacts } from '../artifacts/local-artifacts.js';
import type { ModelLoads } from '../model-loads.js';
import type { NativeOptimizerSettings, TrainingJobSpec } from './job.js';
import { parseLoraTargets } from './lora.js';
import { ThreadCancelledError, TrainingThread } from './training-thread.js';
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

/** HEARTH_TRAIN_STALL_S (default an hour): how long a training thread may count no progress before its job fails. */
export function trainStallMs(env: NodeJS.ProcessEnv): number {
  const v = Number(env.HEARTH_TRAIN_STALL_S || 3600);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`HEARTH_TRAIN_STALL_S must be a positive number of seconds, got "${env.HEARTH_TRAIN_STALL_S}"`);
  return v * 1000;
}

/**
 * Jobs train on a thread of their own (training-thread.ts): this thread stays free for heartbeats, lock renewals
 * and cancels however long a step computes, so a training worker announces no loads (an inference worker's model
 * load still blocks its only thread: worker/model-loads.ts).
 * @param _loads the engines' common signature (worker/default-handlers.ts); training announces none
 */
export async function createHandlers(device: string, log: (m: string) => void, _loads?: ModelLoads, artifacts = LocalArtifacts.fromEnv(process.env, log)): Promise<Handlers> {
  const thread = new TrainingThread({ device, stallMs: trainStallMs(process.env), log });

  /** One job on this host's copies of its inputs; the checkpoint reaches the API host before it is reported. */
  async function trainWithInputs(apiTask: TrainingTask, ctx: TrainingContext): Promise<void> {
    const task = await localizeTask(apiTask, artifacts);
    // A folder left at this host's output path by a crash before its upload: the API has no row for this step.
    if (!artifacts.sharesStorage(apiTask)) fs.rmSync(task.outputDir, { recursive: true, force: true });
    const spec = specFromTask(task);
    try {
      await thread.run(spec, {
        isCancelled: () => ctx.cancelled(), log: ctx.log,
        // A measuring job's token logprobs travel in its one gradient_step (src/protocol/token-logprobs.ts).
        emit: (event) => ctx.emit(event.type, event.type === 'gradient_step' && event.tokenLogprobs ? { ...event.data, token_logprobs: event.tokenLogprobs } : event.data),
      });
    } catch (err) {
      if (err instanceof ThreadCancelledError) throw new CancelledError();
      throw err;
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
    close: () => thread.close(),
  };
}
