// Client framings of the native training-runs API (docs/art.md "Framings"): which one a resolve speaks, and the
// translation of N1's and N3's commands into the commands the runs service stores and executes (N2's shapes).
// Pure: no I/O. Responses go the other way in native-runs/framing-responses.ts.
import { invalid, ValidationError } from '../../errors/domain-errors.js';
import type { NativeWire } from '../../store/sqlite/native-run-wires-repo.js';
import type { NativeOperationKind } from '../../store/records.js';
import type { N1CommandBodyT, N3ForwardBackwardBodyT, N3SaveWeightsForSamplerBodyT, ResolveAnyRunBodyT, TokenMatrixBatchT } from '../../schemas/native-framings.js';
import { commandFingerprint } from './admission.js';
import { sftSequencesFromTokenMatrices } from './token-matrix.js';
import { checkTokenRlLoss, rlSequencesFromTokenMatrices, TOKEN_RL_LOSSES } from './rl-token-matrix.js';

export type { NativeWire };

/** Hearth names N3's runs resolved without a run_name with this prefix (a run_name a client may not use). */
export const ANONYMOUS_RUN_PREFIX = 'hearth-anonymous-run:';

export interface ResolveFraming {
  wire: NativeWire;
  /** N3 without run_name: one run per resolve request_id, answered `run_name: null`. */
  anonymous: boolean;
  /** 501: a field this framing sent that Hearth cannot honour. */
  unsupported: string | null;
}

/**
 * N1's spec carries `optimizer: "adamw"`; N3's resolve carries `initial_state` (null or a state) and its spec `seed`
 * (null or a number); N2's carries neither. The framing is fixed with the run, so every answer of that run is shaped for it.
 */
export function resolveFraming(body: ResolveAnyRunBodyT): ResolveFraming {
  const spec = body.spec as Record<string, unknown>;
  const n1 = 'optimizer' in spec;
  const n3 = 'initial_state' in body || 'seed' in spec;
  if (n1 && n3) throw invalid('a resolve with spec.optimizer (client N1) cannot also carry spec.seed or initial_state (client N3)');
  if (body.run_name != null && body.run_name.startsWith(ANONYMOUS_RUN_PREFIX)) throw invalid(`run_name may not start with "${ANONYMOUS_RUN_PREFIX}"`);
  if (n1) {
    if (body.run_name == null) throw missingRunName();
    const unsupported = spec.optimizer === 'adamw' ? null : `spec.optimizer ${JSON.stringify(spec.optimizer)} is not implemented by this server (supported: "adamw")`;
    return { wire: 'n1', anonymous: false, unsupported };
  }
  if (n3) {
    return { wire: 'n3', anonymous: body.run_name == null, unsupported: null };
  }
  if (body.run_name == null) throw missingRunName();
  return { wire: 'n2', anonymous: false, unsupported: null };
}

/**
 * The LoRA seed of a run's spec (N3's `seed`): its fresh adapters' A matrices are drawn from it, so runs with one seed
 * start alike. The trainer's generator takes 32 bits: the seed modulo 2^32 (0 without one, as N1's and N2's runs).
 */
export function runLoraSeed(spec: Record<string, unknown>): number {
  const seed = typeof spec.seed === 'number' ? spec.seed : 0; // a safe integer: RunSpec's schema
  return ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32;
}

/** Only N3 may leave the run name out: for N1 and N2 it is a missing field, answered as the schema would (422). */
const missingRunName = () => new ValidationError([{ loc: ['body', 'run_name'], msg: 'Field required', type: 'missing' }]);

/** The command the runs service stores and executes, the fingerprint that makes retries idempotent, and any refusal. */
export interface TranslatedCommand {
  command: { request_id: string; sequence_id: number } & Record<string, unknown>;
  fingerprint: string;
  /** forward_backward: what the executor will train ('sft' also for N3's token matrices). */
  batchKind?: string;
  /** Answered 501 (after the run's sequence checks, like N2's unsupported commands); nothing stored. */
  unsupported?: string;
}

/** N1: the command is the body's `command` (ART's RunCommand dump), which must repeat the envelope's identity and the path's run. */
export function translateN1(runId: string, envelope: N1CommandBodyT, command: Record<string, unknown>): TranslatedCommand {
  const inner = envelope.command;
  for (const [field, expected] of [['run_id', runId], ['request_id', envelope.request_id], ['sequence_id', envelope.sequence_id]] as const) {
    if (inner[field] !== expected) throw invalid(`command.${field} (${JSON.stringify(inner[field])}) differs from the request's ${field} (${JSON.stringify(expected)})`);
  }
  const batch = (command.batch as { kind?: unknown } | undefined)?.kind;
  return {
    command: { ...command, request_id: envelope.request_id, sequence_id: envelope.sequence_id },
    fingerprint: commandFingerprint(envelope),
    ...(batch !== undefined ? { batchKind: String(batch) } : {}),
  };
}

/** N3: token matrices become pre-tokenized SFT or RL sequences, the flat loss N2's, `{target}` N2's publication mode. */
export function translateN3(kind: NativeOperationKind, body: { request_id: string; sequence_id: number } & Record<string, unknown>): TranslatedCommand {
  const fingerprint = commandFingerprint(body);
  if (kind === 'forward_backward' || kind === 'forward') return { ...n3Batch(body as unknown as N3ForwardBackwardBodyT), fingerprint };
  if (kind === 'save_weights_for_sampler') {
    const b = body as unknown as N3SaveWeightsForSamplerBodyT;
    const mode = b.publication.target === 'active' ? 'in_flight_lora' : 'versioned_lora';
    return { command: { ...b, publication: { mode, model_alias: b.publication.model_alias } }, fingerprint };
  }
  if (kind === 'save_state' || kind === 'load_state') {
    // N3's states travel as archives (save_state's `archive`, load_state's `source` object), which Hearth's are not.
    return { command: body, fingerprint, unsupported: `${kind} is not implemented by this server for client N3 (its state archives); N1 and N2 clients can save and load states` };
  }
  return { command: body, fingerprint };
}

function n3Batch(body: N3ForwardBackwardBodyT): Omit<TranslatedCommand, 'fingerprint'> {
  const { loss, batch, ...rest } = body;
  const { name, normalize_advantages, ...values } = loss;
  const command = { ...rest, loss: { name, normalize_advantages, values } } as TranslatedCommand['command'];
  if (batch.kind !== 'token_matrix') {
    return { command: { ...command, batch }, batchKind: batch.kind, unsupported: `${batch.kind} batches (server-held inputs) are not implemented by this server; send the token matrices` };
  }
  const kind = name === 'cross_entropy' ? 'sft' : 'rl';
  const refused = (unsupported: string) => ({ command: { ...command, batch: { kind: 'token_matrix' } }, batchKind: kind, unsupported });
  if (kind === 'rl') return n3RlBatch(command, batch, name, normalize_advantages, values, refused);
  const decoded = sftSequencesFromTokenMatrices(batch);
  if (!decoded.ok && decoded.status === 400) throw invalid(decoded.reason);
  if (!decoded.ok) return refused(decoded.reason);
  return { command: { ...command, batch: { kind: 'sft_tokens', sequences: decoded.sequences } }, batchKind: 'sft' };
}

/** N3's RL token matrices become `rl_tokens` sequences (native-runs/rl-token-matrix.ts); malformed ones are a 422 here, before anything is stored. */
function n3RlBatch(
  command: TranslatedCommand['command'], batch: TokenMatrixBatchT, name: string, normalizeAdvantages: boolean, values: Record<string, unknown>,
  refused: (reason: string) => Omit<TranslatedCommand, 'fingerprint'>,
): Omit<TranslatedCommand, 'fingerprint'> {
  if (!(name in TOKEN_RL_LOSSES)) {
    return refused(`the ${name} loss over token matrices is not implemented by this server (supported: cross_entropy, ${Object.keys(TOKEN_RL_LOSSES).join(', ')})`);
  }
  if (normalizeAdvantages) {
    return refused('normalize_advantages=true over token matrices is not implemented by this server (ART\'s client normalizes the advantages itself and sends false)');
  }
  checkTokenRlLoss({ name, values });
  const decoded = rlSequencesFromTokenMatrices(batch);
  if (!decoded.ok) return refused(decoded.reason);
  return { command: { ...command, batch: { kind: 'rl_tokens', sequences: decoded.sequences } }, batchKind: 'rl' };
}
