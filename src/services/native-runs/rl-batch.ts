// RL batches of the native training-runs API (`forward_backward` with `batch.kind = "rl"`; docs/art.md "RL over
// the native API"): what admission checks, what a forward_backward keeps for its optim_step, and the result of
// its measuring job. Pure: the executor does the I/O.
//
// Hearth runs them on the preview API's RL trainer: the decoded trajectory groups are that API's
// `trajectory_groups`, and the loss (name, normalize_advantages, values) becomes its `experimental_config`, so a
// native RL step trains exactly as a preview RL job with the same groups and config would.
import { notImplemented, ValidationError } from '../../errors/domain-errors.js';
import { decodeTrajectoryGroupBundles } from '../../protocol/trajectory-bundle.js';
import { ExperimentalTrainingConfig, type ExperimentalTrainingConfigT, type TrajectoryGroupT } from '../../protocol/training.js';
import type { RlTrainingPayload } from '../../protocol/training-task.js';
import type { ForwardBackwardBodyT } from '../../schemas/native-training.js';
import type { NativeOperationRecord, TrainingEventRecord } from '../../store/records.js';
import { canonicalJson } from './admission.js';
import { measuredResult, pick } from './wire.js';
import { tokenRlExperimentalConfig } from './rl-token-matrix.js';
import type { RlTokenSequence } from '../../protocol/token-sequences.js';

/** The losses of ART's RL batches that the preview API's RL trainer implements (ART's contract allows these two). */
export const RL_LOSSES = ['cispo', 'ppo'];

type RlBatch = Extract<ForwardBackwardBodyT['batch'], { kind: 'rl' }>;
type Loss = ForwardBackwardBodyT['loss'];

/** What an RL forward_backward keeps (a file) until an optim_step applies it. */
export type RlInputs = RlGroupInputs | RlTokenInputs;

export interface RlGroupInputs {
  kind: 'rl';
  trajectory_groups: TrajectoryGroupT[];
  experimental_config: ExperimentalTrainingConfigT;
  min_source_version: number;
  max_source_version: number;
}

/** N3's RL token matrices, translated to sequences with per-token advantages (native-runs/rl-token-matrix.ts). */
export interface RlTokenInputs {
  kind: 'rl_tokens';
  token_sequences: RlTokenSequence[];
  experimental_config: ExperimentalTrainingConfigT;
}

/** The batch an N3 RL forward_backward is stored with (native-runs/framing.ts). */
export interface RlTokenBatch {
  kind: 'rl_tokens';
  sequences: RlTokenSequence[];
}

/** An N3 RL batch's inputs: its sequences and the trainer config of its loss. */
export function rlTokenInputs(batch: RlTokenBatch, loss: Loss): RlTokenInputs {
  return { kind: 'rl_tokens', token_sequences: batch.sequences, experimental_config: tokenRlExperimentalConfig(loss) };
}

/**
 * The trainer's experimental_config for a loss: its values (ART sends its whole train config there), with the
 * loss name and normalize_advantages of the command itself taking precedence over same-named values.
 */
export function rlExperimentalConfig(loss: Loss): Record<string, unknown> {
  return { ...loss.values, loss_fn: loss.name, normalize_advantages: loss.normalize_advantages };
}

/**
 * Admission of an RL batch, before anything is stored: the loss is one the trainer implements (else 501), its values
 * are valid as the preview API's experimental_config (else 422) and implemented (else 501, naming them), the
 * source versions are ordered (ART's RlTrajectoryBatch rule, else 422), and every bundle decodes (else 422 naming
 * the group and record). Returns the inputs the operation will train on.
 */
export function admitRlBatch(batch: RlBatch, loss: Loss, unsupportedKeys: (config: Record<string, unknown>) => string[]): RlGroupInputs {
  if (!RL_LOSSES.includes(loss.name)) {
    throw notImplemented(`loss ${JSON.stringify(loss.name)} is not implemented for RL batches by this server (supported: ${RL_LOSSES.join(', ')})`);
  }
  const config = rlExperimentalConfig(loss);
  const parsed = ExperimentalTrainingConfig.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const [key, ...rest] = issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
    const loc = key === 'loss_fn' ? ['body', 'loss', 'name'] : key === 'normalize_advantages' ? ['body', 'loss', 'normalize_advantages'] : ['body', 'loss', 'values', key, ...rest];
    throw new ValidationError([{ loc, msg: issue.message, type: 'value_error' }]);
  }
  const unsupported = unsupportedKeys(config);
  if (unsupported.length) throw notImplemented(`loss.values keys not implemented by this server: ${unsupported.join(', ')}`);
  if (batch.max_source_version < batch.min_source_version) {
    throw new ValidationError([{ loc: ['body', 'batch', 'max_source_version'], msg: 'max_source_version must be >= min_source_version', type: 'value_error' }]);
  }
  return {
    kind: 'rl', trajectory_groups: decodeTrajectoryGroupBundles(batch.groups), experimental_config: parsed.data,
    min_source_version: batch.min_source_version, max_source_version: batch.max_source_version,
  };
}

/** What a forward_backward's gradient is of: its batch kind, and for RL the loss it was measured with. */
function gradientKind(body: ForwardBackwardBodyT): string {
  const kind = (body.batch as { kind: string }).kind;
  return kind === 'rl' || kind === 'rl_tokens' ? `${kind} ${canonicalJson(body.loss)}` : kind;
}

/**
 * Why a forward_backward cannot join the gradients still waiting for an optim_step (null when it can): Hearth applies
 * them as one training job, which has one kind and one loss.
 */
export function accumulationConflict(pending: NativeOperationRecord[], body: ForwardBackwardBodyT): string | null {
  const other = pending.find((op) => gradientKind(op.command as unknown as ForwardBackwardBodyT) !== gradientKind(body));
  if (!other) return null;
  const otherBody = other.command as unknown as ForwardBackwardBodyT;
  const what = otherBody.batch.kind !== body.batch.kind ? `a ${otherBody.batch.kind} batch` : 'an RL batch with another loss';
  return `accumulating gradients of different losses is not implemented by this server: forward_backward #${other.sequenceId} (${what}) ` +
    'is waiting for an optim_step; apply it (optim_step) or cancel it first';
}

/** A forward or forward_backward of an RL batch. */
export const measuresRl = (op: NativeOperationRecord) => {
  const kind = (op.command as { batch?: { kind?: unknown } }).batch?.kind;
  return kind === 'rl' || kind === 'rl_tokens';
};

export const isRlForwardBackward = (op: NativeOperationRecord) => op.kind === 'forward_backward' && measuresRl(op);

/**
 * An RL job's data from kept inputs of one kind and loss (accumulationConflict): their trajectory groups, or N3's
 * token sequences, concatenated, with the trainer config of their loss.
 */
export function rlJobData(inputs: RlInputs[]): RlTrainingPayload {
  const { experimental_config } = inputs[0];
  if (inputs.some((i) => i.kind !== inputs[0].kind)) throw new Error('an RL job cannot train trajectory groups and token matrices together');
  const tokens = inputs.flatMap((i) => (i.kind === 'rl_tokens' ? i.token_sequences : []));
  if (inputs[0].kind === 'rl_tokens') return { trajectory_groups: [], token_sequences: tokens, experimental_config };
  return { trajectory_groups: inputs.flatMap((i) => (i.kind === 'rl' ? i.trajectory_groups : [])), experimental_config };
}

/** One RL job over every applied forward_backward's inputs, at the optim_step's learning rate. */
export function rlOptimPayload(inputs: RlInputs[], learningRate: number): RlTrainingPayload {
  return { ...rlJobData(inputs), experimental_config: { ...inputs[0].experimental_config, learning_rate: learningRate } };
}

const RL_METRICS = [
  'loss', 'policy_loss', 'entropy', 'kl_policy_ref', 'reward', 'reward_std_dev', 'exception_rate', 'num_groups_submitted', 'num_groups_trainable',
  'num_trajectories', 'num_tokens', 'num_trainable_tokens',
];

/** An RL forward_backward's result from its measuring job's one step (the packing its optim_step will train). */
export function rlForwardBackwardResult(op: NativeOperationRecord, step: Record<string, number>): Record<string, unknown> {
  const packing = { length: step.packed_sequence_length ?? 0, sequences: step.packed_sequences ?? 0, tokens: step.num_tokens ?? 0, trainable: step.num_trainable_tokens ?? 0 };
  return measuredResult(op, packing, pick(step, RL_METRICS));
}

/**
 * An RL optim_step's metrics: the mean of its job's gradient steps (one, over every packed sequence; none when no
 * trajectory had an advantage, and the learner version then advances with unchanged weights, as a preview RL job does).
 */
export function rlOptimMetrics(events: TrainingEventRecord[]): Record<string, number> {
  const steps = events.filter((e) => e.type === 'gradient_step').map((e) => e.data as Record<string, number>);
  const keys = ['loss', 'policy_loss', 'entropy', 'grad_norm', 'learning_rate', 'kl_policy_ref', 'num_tokens', 'num_trainable_tokens'];
  const out: Record<string, number> = {};
  for (const k of keys) {
    const values = steps.map((s) => s[k]).filter((v) => typeof v === 'number' && Number.isFinite(v));
    if (values.length) out[k] = values.reduce((a, b) => a + b, 0) / values.length;
  }
  out.gradient_steps = steps.length;
  return out;
}
