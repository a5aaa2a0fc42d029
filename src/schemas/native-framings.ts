// Wire shapes of the native training-runs API as ART's N1 and N3 clients send them, beside N2's
// (native-training.ts). N1 (client.py @ 235af098) wraps each command as `{request_id, sequence_id, command}`;
// N3 (client.py @ 44cf4bbe, "frozen public wire") sends token matrices, a flat loss and `{target, model_alias}`
// publications. docs/art.md "Framings" says which field comes from where and what Hearth does with it.
import { z } from 'zod';
import { RunSpec } from './native-training.js';

const id = z.string().min(1).max(255);
const identity = { request_id: id, sequence_id: z.number().int().min(0) };

/** Every framing's command carries these two at the top; the run's framing then says how to read the rest. */
export const NativeCommandEnvelope = z
  .object(identity)
  .catchall(z.unknown())
  .meta({
    id: 'NativeCommand',
    description:
      'N2: the command itself (NativeForwardBackward, NativeOptimStep, NativeSaveWeightsForSampler); N1: {request_id, sequence_id, command: ' +
      '<the same command with run_id>}; N3: N2\'s fields with a token_matrix batch, a flat loss and publication {target, model_alias}',
  });

/**
 * N3's `initial_state` (client.py @ 44cf4bbe): the checkpoint a new run starts from, named by the id the service gave
 * it (an optim_step's or a publication's `checkpoint_id`) or as an artifact (`entity/project/name:stepN`, `:vN`,
 * `:latest`: the served names), and whether AdamW's moments saved with it continue too.
 */
export const N3InitialState = z
  .strictObject({
    source: z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('service_checkpoint'), checkpoint_id: z.string().min(1).max(255) }),
      z.strictObject({ kind: z.literal('wandb_artifact'), artifact: z.string().min(1).max(512) }),
    ]),
    restore_optimizer: z.boolean(),
  })
  .meta({ id: 'NativeTrainingInitialState' });
export type N3InitialStateT = z.output<typeof N3InitialState>;

/** `POST /training/runs:resolve` of every framing: N3 may leave out run_name and adds initial_state. */
export const ResolveAnyRunBody = z
  .object({ request_id: id, run_name: z.string().min(1).max(255).nullish(), spec: RunSpec, initial_state: N3InitialState.nullish() })
  .catchall(z.unknown())
  .meta({ id: 'ResolveTrainingRunAnyFraming' });

/** N1: `{request_id, sequence_id, command: RunCommand.model_dump()}`; the command repeats run_id, request_id, sequence_id. */
export const N1CommandBody = z.object({ ...identity, command: z.record(z.string(), z.unknown()) });

// ---- N3 token matrices (art/training/token_matrix.py @ 44cf4bbe) ----

const scalar = z.union([z.number(), z.boolean()]);
const element = z.union([scalar, z.array(scalar)]);

const RowValues = z.discriminatedUnion('encoding', [
  z.strictObject({ encoding: z.literal('dense'), data: z.array(scalar) }),
  z.strictObject({
    encoding: z.literal('spans'),
    default: element,
    spans: z.array(z.strictObject({ start: z.number().int().min(0), end: z.number().int().min(1), value: element })).default([]),
  }),
]);

export const TokenRow = z.strictObject({
  name: z.string().min(1).max(64),
  dtype: z.enum(['bool', 'int32', 'int64', 'float32']),
  shape: z.array(z.number().int().min(1)).min(1).max(2),
  values: RowValues,
});

export const TokenMatrix = z.strictObject({
  kind: z.literal('matrix').default('matrix'),
  matrix_id: z.string().min(1).max(255),
  rows: z.array(TokenRow).min(1).max(32),
  packing_affinity_id: z.string().min(1).max(255).nullish(),
});

export const TokenMatrixBatch = z.strictObject({
  kind: z.literal('token_matrix'),
  matrices: z.array(TokenMatrix).min(1),
  routes: z.array(z.record(z.string(), z.unknown())).default([]),
});

/** N3 forward / forward_backward: the loss is flat (`{name, normalize_advantages, clip_*_threshold?}`). */
export const N3ForwardBackwardBody = z.object({
  ...identity,
  batch: z.union([
    TokenMatrixBatch,
    // Captured inputs and input objects (art.training @ 44cf4bbe): N3's client refuses to send them; answered 501 if one comes.
    z.object({ kind: z.enum(['captured', 'input_object']) }).catchall(z.unknown()),
  ]),
  loss: z
    .object({
      name: z.enum(['cross_entropy', 'importance_sampling', 'cispo', 'dpo', 'ppo']),
      normalize_advantages: z.boolean().default(true),
    })
    .catchall(z.number()),
  collect_packing_shapes: z.boolean().default(false),
  retain_packed_input: z.boolean().default(false),
  return_token_logprobs: z.boolean().default(true),
});

/** N3 publication: `{target: active|saved_generation, model_alias}` (N2's in_flight_lora / versioned_lora). */
export const N3SaveWeightsForSamplerBody = z.object({
  ...identity,
  checkpoint_name: z.string().min(1).max(255),
  ttl_seconds: z.number().int().min(1).nullish(),
  publication: z.strictObject({ target: z.enum(['active', 'saved_generation']), model_alias: z.string().min(1).max(255) }),
});

/** N3 `:close` body (N1 and N2 send none). */
export const CloseRunBody = z.object({ request_id: id }).partial().catchall(z.unknown()).optional();

export type N1CommandBodyT = z.output<typeof N1CommandBody>;
export type N3ForwardBackwardBodyT = z.output<typeof N3ForwardBackwardBody>;
export type N3SaveWeightsForSamplerBodyT = z.output<typeof N3SaveWeightsForSamplerBody>;
export type TokenMatrixBatchT = z.output<typeof TokenMatrixBatch>;
export type ResolveAnyRunBodyT = z.output<typeof ResolveAnyRunBody>;
