// The training engine's public surface (what the training worker process calls).
export { initTrainingBackend, type BackendName, type TrainingBackend } from './backend.js';
export {
  buildTrainingModel,
  defaultMicroBatchTokens,
  planSftBatches,
  runRl,
  runSft,
  sequenceLogprobs,
  TrainingCancelledError,
  type Emit,
  type RlJob,
  type SftJob,
  type TrainingDeps,
  type TrainingEvent,
  type TrainingModelSpec,
  type TrainingResult,
} from './loop.js';
export { tokenizeTrajectoryGroups, type ChatMessage, type ChatTokenizer, type RlData, type TrajectoryGroupJson } from './rl-data.js';
export { parseSftJsonl, tokenizeSftRows, type SftRow } from './sft-data.js';
export { chatTokenizerFrom } from './chat-tokenizer.js';
export { runTrainingJob, DEFAULT_SFT_LEARNING_RATE, type RlJobSpec, type RunOptions, type SftJobSpec, type TrainingJobSpec } from './job.js';
export { rlSettingsFromExperimentalConfig, unsupportedExperimentalKeys, unsupportedSftExperimentalKeys, type ExperimentalConfig } from '../../src/protocol/rl-settings.js';
export { readCheckpoint, writeCheckpoint, type CheckpointContents } from './checkpoint.js';
export { DEFAULT_LORA_CONFIG, type LoraConfig } from './lora.js';
export type { TrainSequence } from './data.js';
