// A native run command's body, read in the framing of its run (docs/art.md "Framings"): validated field by field
// (422, FastAPI's shape, located as sent: N1's inner command under `body.command`) and translated to the runs
// service's command (src/services/native-runs/framing.ts).
import type { z } from 'zod';
import { ValidationError } from '../errors/domain-errors.js';
import { zodIssuesToDetail } from './errors.js';
import type { NativeOperationKind } from '../store/records.js';
import { ForwardBackwardBody, ForwardBody, LoadStateBody, OptimStepBody, OtherCommandBody, SaveStateBody, SaveWeightsForSamplerBody } from '../schemas/native-training.js';
import { N1CommandBody, N3ForwardBackwardBody, N3SaveWeightsForSamplerBody } from '../schemas/native-framings.js';
import { commandFingerprint } from '../services/native-runs/admission.js';
import { translateN1, translateN3, type NativeWire, type TranslatedCommand } from '../services/native-runs/framing.js';

const N2_BODIES: Partial<Record<NativeOperationKind, z.ZodType>> = {
  forward_backward: ForwardBackwardBody, optim_step: OptimStepBody, save_weights_for_sampler: SaveWeightsForSamplerBody,
  forward: ForwardBody, save_state: SaveStateBody, load_state: LoadStateBody,
};
const N3_BODIES: Partial<Record<NativeOperationKind, z.ZodType>> = {
  forward: N3ForwardBackwardBody, forward_backward: N3ForwardBackwardBody, optim_step: OptimStepBody, save_weights_for_sampler: N3SaveWeightsForSamplerBody,
};

function parse<T>(schema: z.ZodType, value: unknown, prefix: string[] = []): T {
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data as T;
  throw new ValidationError(zodIssuesToDetail(r.error.issues.map((i) => ({ ...i, path: [...prefix, ...i.path] })), 'body'));
}

type Command = { request_id: string; sequence_id: number } & Record<string, unknown>;

export function framedCommand(wire: NativeWire, kind: NativeOperationKind, runId: string, raw: unknown): TranslatedCommand {
  if (wire === 'n1') {
    const envelope = parse<z.output<typeof N1CommandBody>>(N1CommandBody, raw);
    // N1's contracts also define pre-tokenized batches (kind "tokenized"), which N2's schema does not know: 501, not 422.
    if ((envelope.command.batch as { kind?: unknown } | undefined)?.kind === 'tokenized') {
      const translated = translateN1(runId, envelope, parse<Command>(OtherCommandBody, envelope.command, ['command']));
      return { ...translated, unsupported: 'tokenized batches are not implemented by this server for client N1 (supported: sft)' };
    }
    const command = parse<Command>(N2_BODIES[kind] ?? OtherCommandBody, envelope.command, ['command']);
    return translateN1(runId, envelope, command);
  }
  if (wire === 'n3') return translateN3(kind, parse<Command>(N3_BODIES[kind] ?? OtherCommandBody, raw));
  const command = parse<Command>(N2_BODIES[kind] ?? OtherCommandBody, raw);
  return { command, fingerprint: commandFingerprint(command) };
}
