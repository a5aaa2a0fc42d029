// The training worker's task handler (loaded by worker/default-handlers.ts): a queued RL or SFT job becomes
// a TrainingJobSpec for runTrainingJob, its events go to the API in order, and the finished checkpoint
// folder is reported before the host sends `training_ended` (ART reads the new step right after it).
import { DeviceFrozenProducts } from './device-products.js';
import { setFrozenProductsDevice } from './frozen-linear.js';
import { executionProvidersFor } from '../runtime/runner.js';
import { parseDevice } from '../../src/hardware/device-name.js';
import fs from 'node:fs';
import { CancelledError, TaskError, type Handlers } from '../handlers.js';
import { runTrainingJob, type TrainingJobSpec } from './job.js';
import { TrainingCancelledError, type TrainingEvent } from './loop.js';
import type { TrainingTask } from '../../src/queue/messages.js';

interface RlPayload {
  trajectory_groups: unknown[];
  experimental_config?: Record<string, unknown> | null;
}
interface SftPayload {
  resolved_data_path: string;
  config?: { batch_size?: number | 'auto' | null; learning_rate?: number | number[] | null } | null;
}

export function specFromTask(task: TrainingTask): TrainingJobSpec {
  if (!task.baseModelDir) throw new TaskError(400, `base model ${task.baseModel} has no folder on this host`);
  const common = { modelDir: task.baseModelDir, baseModelName: task.baseModel, resumeFrom: task.initCheckpointDir, checkpointDir: task.outputDir };
  if (task.kind === 'rl') {
    const p = task.payload as RlPayload;
    return {
      ...common, kind: 'rl', trajectoryGroups: p.trajectory_groups as never, experimentalConfig: (p.experimental_config ?? null) as never,
      klReference: task.klReferenceDir ?? null, rewardStdDevHistory: task.rewardStdDevHistory ?? [],
    };
  }
  const p = task.payload as SftPayload;
  let trainJsonl: string;
  try {
    trainJsonl = fs.readFileSync(p.resolved_data_path, 'utf8');
  } catch (err) {
    throw new TaskError(400, `cannot read the training data ${p.resolved_data_path}: ${(err as Error).message}`);
  }
  return { ...common, kind: 'sft', trainJsonl, config: p.config ?? null };
}

export async function createHandlers(device: string, log: (m: string) => void): Promise<Handlers> {
  // On a GPU, the frozen base's products (forward and dx, most of a LoRA step's FLOPs) run on the device with
  // the base weights resident there (device-products.ts); LoRA, norms, attention and the optimizer stay on the
  // TF.js backend, which says in one log line what it chose (tfjs-node-gpu stays optional, not the GPU path).
  if (device !== 'cpu') {
    setFrozenProductsDevice(new DeviceFrozenProducts(device, executionProvidersFor(parseDevice(device))));
    log(`training on ${device}: frozen base products on the device (weights resident in GPU memory); LoRA, norms and optimizer on the TF.js backend`);
  }
  return {
    async training(task, ctx) {
      const spec = specFromTask(task);
      try {
        // After each event, yield to the event loop: the steps are synchronous compute, and without a macrotask
        // break the worker would send no heartbeats and hear no cancel or parent exit until the job ends.
        const emit = async (event: TrainingEvent) => {
          ctx.emit(event.type, event.data);
          await new Promise((resolve) => setImmediate(resolve));
        };
        await runTrainingJob(spec, emit, { isCancelled: () => ctx.cancelled(), log: ctx.log });
      } catch (err) {
        if (err instanceof TrainingCancelledError) throw new CancelledError();
        throw err;
      }
      if (!fs.existsSync(task.outputDir)) throw new Error(`training finished but wrote no checkpoint at ${task.outputDir}`);
      ctx.checkpoint(task.outputDir);
      log(`job ${task.jobId}: checkpoint step ${task.step} written`);
    },
  };
}
