// One training job from plain JSON inputs and folders: load the base model and its tokenizer,
// tokenize the data, train, write the checkpoint. This is what a training worker process calls;
// the queue/store side only moves the spec in and the events out.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chatTemplateFromConfig } from '../../src/runtime/chat-template.js';
import { openModelWeights, readModelWeights } from '../../src/runtime/hf-model.js';
import { loadTokenizer } from '../../src/runtime/load-model.js';
import type { BackendName } from './backend.js';
import { chatTokenizerFrom } from './chat-tokenizer.js';
import { readCheckpoint, readOptimizerState } from './checkpoint.js';
import type { RewardStdDevPoint } from '../../src/domain/reward-std-lr.js';
import type { LoraConfig } from './lora.js';
import type { DeviceMemory } from '../../src/runtime/device-memory.js';
import { jobEngine, runRl, runSft, type Emit, type TrainingDeps, type TrainingModelSpec, type TrainingResult } from './loop.js';
import { rlSettingsFromExperimentalConfig, type RlSettings } from '../../src/protocol/rl-settings.js';
import { tokenizeTrajectoryGroups, type TrajectoryGroupJson } from './rl-data.js';
import { rlDataFromTokenSequences } from './rl-token-data.js';
import type { RlTokenSequence } from '../../src/protocol/token-sequences.js';
import { parseSftJsonl, tokenizeSftRows } from './sft-data.js';

interface JobCommon {
  /** Base model folder: config.json, *.safetensors, tokenizer.json, tokenizer_config.json. */
  modelDir: string;
  /** Name written into adapter_config.json (base_model_name_or_path). */
  baseModelName: string;
  /** Latest checkpoint folder of the trained model to continue from, or null for the first step. */
  resumeFrom: string | null;
  /** Checkpoint folder to write (must not exist). */
  checkpointDir: string;
  /** Default 'lora'. */
  mode?: 'lora' | 'full';
  lora?: Partial<LoraConfig>;
  /** The seed of fresh LoRA adapters' A matrices (default 0); a checkpoint continued from keeps its own adapters. */
  seed?: number;
  /**
   * A native run's optim_step: AdamW with these settings continues from the moments beside `resumeFrom` (fresh when
   * it has none) and writes its own beside the checkpoint.
   */
  optimizer?: NativeOptimizerSettings;
}

export interface RlJobSpec extends JobCommon {
  kind: 'rl';
  trajectoryGroups: TrajectoryGroupJson[];
  /** Sequences the client tokenized, with per-token advantages (a native N3 run): trained instead of trajectoryGroups. */
  tokenSequences?: RlTokenSequence[];
  /** experimental_config as the API parsed it (default: ART's defaults). */
  settings?: RlSettings;
  /** Checkpoint folder the KL penalty compares against (null = the base model). */
  klReference?: string | null;
  /** The model's reward std dev by step (scale_learning_rate_by_reward_std_dev). */
  rewardStdDevHistory?: RewardStdDevPoint[];
  /** Measure the policy loss at the starting weights; train nothing, write no checkpoint (loop.ts RlJob.forwardOnly). */
  forwardOnly?: boolean;
  /** With forwardOnly: report every trained target's logprob (loop.ts RlJob.returnTokenLogprobs). */
  returnTokenLogprobs?: boolean;
  /** One optimizer step over all the packed sequences (loop.ts RlJob.oneOptimizerStep; a native run's optim_step). */
  oneOptimizerStep?: boolean;
}

export interface SftJobSpec extends JobCommon {
  kind: 'sft';
  /** Contents of ART's train.jsonl. */
  trainJsonl: string;
  /** The request's `config` (SFTTrainingConfig). */
  config?: { batch_size?: number | 'auto' | null; learning_rate?: number | number[] | null } | null;
  /** Measure the loss at the starting weights; train nothing, write no checkpoint (loop.ts SftJob.forwardOnly). */
  forwardOnly?: boolean;
  /** With forwardOnly: report every trained target's logprob (loop.ts SftJob.returnTokenLogprobs). */
  returnTokenLogprobs?: boolean;
  /** One optimizer step over all the rows at the learning rate (loop.ts SftJob.oneOptimizerStep; a native run's optim_step). */
  oneOptimizerStep?: boolean;
}

/** ART's AdamConfig without the learning rate (that travels in `config`). */
export interface NativeOptimizerSettings {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** Global-norm clip; 0 disables. */
  gradClipNorm: number;
}

export type TrainingJobSpec = RlJobSpec | SftJobSpec;

export interface RunOptions {
  isCancelled?: () => boolean | Promise<boolean>;
  log?: (line: string) => void;
  backend?: BackendName;
  /** The GPU the graphs run on, as detected before the job: its share of the job's memory plan is checked against it. */
  deviceMemory?: DeviceMemory;
  /** Tokens per forward/backward pass (HEARTH_TRAIN_MICRO_BATCH_TOKENS); default: the engine's (defaultMicroBatchTokens). */
  microBatchTokens?: number;
}

/**
 * The base model as the job's engine reads it. The graph engine builds its graphs from the file as stored (a
 * GGUF's blocks stay quantized; tensors are read one by one), so the whole base is never held in float32 (an 8B
 * Q4_K base is ~5 GB stored, 32 GB as float32). The TF.js engine needs the float32 weights.
 */
function readBase(dir: string, job: Pick<TrainingModelSpec, 'mode' | 'lora' | 'resumeFrom'>): { config: TrainingModelSpec['config']; base: Pick<TrainingModelSpec, 'weights' | 'source'> } {
  if (jobEngine(job).engine === 'graph') {
    const { config, source } = openModelWeights(dir);
    return { config, base: { source } };
  }
  const { config, weights } = readModelWeights(dir);
  return { config, base: { weights } };
}

/** SFT learning rate when a request sends none (ART always sends one; a common LoRA SFT value). */
export const DEFAULT_SFT_LEARNING_RATE = 1e-4;

export async function runTrainingJob(spec: TrainingJobSpec, emit: Emit, opts: RunOptions = {}): Promise<TrainingResult> {
  const tokenizerConfigPath = join(spec.modelDir, 'tokenizer_config.json');
  const tokenizerConfig = existsSync(tokenizerConfigPath) ? JSON.parse(readFileSync(tokenizerConfigPath, 'utf8')) : {};
  const tokenizer = chatTokenizerFrom(loadTokenizer(spec.modelDir), chatTemplateFromConfig(tokenizerConfig));
  const mode = spec.mode ?? 'lora';
  const resumeFrom = spec.resumeFrom ? await readCheckpoint(spec.resumeFrom) : null;
  const { config, base } = readBase(spec.modelDir, { mode, lora: spec.lora, resumeFrom });
  const deps: TrainingDeps = {
    model: { config, ...base, baseModelName: spec.baseModelName, mode, lora: spec.lora, resumeFrom },
    checkpointDir: spec.checkpointDir,
    isCancelled: opts.isCancelled,
    log: opts.log,
    backend: opts.backend,
    deviceMemory: opts.deviceMemory,
    microBatchTokens: opts.microBatchTokens,
    seed: spec.seed,
  };

  if (spec.optimizer) {
    const o = spec.optimizer;
    deps.adamw = { beta1: o.beta1, beta2: o.beta2, epsilon: o.eps, weightDecay: o.weightDecay };
    deps.maxGradNorm = o.gradClipNorm;
    deps.carryOptimizer = { from: spec.resumeFrom ? await readOptimizerState(spec.resumeFrom) : null };
  }

  if (spec.kind === 'rl') {
    const settings = spec.settings ?? rlSettingsFromExperimentalConfig(null);
    const data = spec.tokenSequences
      ? rlDataFromTokenSequences(spec.tokenSequences)
      : await tokenizeTrajectoryGroups(spec.trajectoryGroups, tokenizer, { allowTrainingWithoutLogprobs: settings.allowTrainingWithoutLogprobs });
    // ART's trainer asserts the same: a job that would train on less than it was given fails instead of
    // writing a checkpoint that learned nothing from those choices.
    if (data.numChoicesWithoutLogprobs > 0) {
      throw new Error(
        `Chat completion choices must have logprobs: ${data.numChoicesWithoutLogprobs} choice(s) have none ` +
          '(sample with a server that returns them, or set experimental_config.allow_training_without_logprobs to re-tokenize them)',
      );
    }
    const klReference = spec.klReference ? await readCheckpoint(spec.klReference) : null;
    return runRl(
      { data, settings, rewardStdDevHistory: spec.rewardStdDevHistory, forwardOnly: spec.forwardOnly,
        returnTokenLogprobs: spec.returnTokenLogprobs, oneOptimizerStep: spec.oneOptimizerStep },
      { ...deps, klReference },
      emit,
    );
  }

  const { sequences, rowsWithoutAssistant, droppedTooLong } = await tokenizeSftRows(parseSftJsonl(spec.trainJsonl), tokenizer, {
    maxTokens: config.maxPositionEmbeddings,
  });
  if (rowsWithoutAssistant + droppedTooLong > 0) {
    opts.log?.(`[training] SFT data: ${rowsWithoutAssistant} rows without an assistant turn, ${droppedTooLong} sequences longer than ${config.maxPositionEmbeddings} tokens skipped`);
  }
  return runSft(
    {
      sequences,
      batchSize: spec.config?.batch_size ?? 'auto',
      learningRate: spec.config?.learning_rate ?? DEFAULT_SFT_LEARNING_RATE,
      forwardOnly: spec.forwardOnly,
      returnTokenLogprobs: spec.returnTokenLogprobs,
      oneOptimizerStep: spec.oneOptimizerStep,
    },
    deps,
    emit,
  );
}
