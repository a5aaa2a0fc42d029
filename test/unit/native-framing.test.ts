// Client framings of the native training-runs API (src/services/native-runs/framing*.ts, native-runs/token-matrix.ts): which
// framing a resolve speaks, N1's and N3's commands translated to the runs service's, and the service's records
// answered in each framing, checked against zod copies of ART's models (test/helpers/art-native-framing-models.ts).
import { describe, expect, it } from 'vitest';
import { resolveFraming, runLoraSeed, translateN1, translateN3 } from '../../src/services/native-runs/framing.js';
import { renderOperation, renderResult, renderRun } from '../../src/services/native-runs/framing-responses.js';
import { sftSequencesFromTokenMatrices } from '../../src/services/native-runs/token-matrix.js';
import { forwardBackwardResult } from '../../src/services/native-runs/wire.js';
import { N3ForwardBackwardBody, N3SaveWeightsForSamplerBody, ResolveAnyRunBody, TokenMatrixBatch, type TokenMatrixBatchT } from '../../src/schemas/native-framings.js';
import type { NativeOperationRecord, NativeRunRecord } from '../../src/store/records.js';
import {
  artSftTokenMatrix, N1ForwardBackwardResult, N1NativeTrainingOperation, n1OperationRef, N1OptimStepResult, N1SamplerWeightsResult,
  N3NativeTrainingRun, n3ClientOperation, n3ClientResult,
} from '../helpers/art-native-framing-models.js';

const spec = { base_model: 'b', dtype: 'bfloat16' as const, lora_rank: 8, lora_target_modules: ['linear_qkv'] };
const matrixBatch = (...matrices: unknown[]): TokenMatrixBatchT => TokenMatrixBatch.parse({ kind: 'token_matrix', matrices, routes: [] });

describe('which framing a resolve speaks', () => {
  it('tells N1 (spec.optimizer), N3 (initial_state / spec.seed) and N2 apart, and refuses what it cannot honour', () => {
    expect(resolveFraming({ request_id: 'r', run_name: 'a', spec })).toEqual({ wire: 'n2', anonymous: false, unsupported: null });
    expect(resolveFraming({ request_id: 'r', run_name: 'a', spec: { ...spec, optimizer: 'adamw' } })).toEqual({ wire: 'n1', anonymous: false, unsupported: null });
    expect(resolveFraming({ request_id: 'r', run_name: 'a', spec: { ...spec, optimizer: 'sgd' } }).unsupported).toMatch(/optimizer "sgd"/);
    expect(resolveFraming({ request_id: 'r', spec: { ...spec, seed: null }, initial_state: null })).toEqual({ wire: 'n3', anonymous: true, unsupported: null });
    expect(resolveFraming({ request_id: 'r', run_name: 'a', spec: { ...spec, seed: null }, initial_state: null }).anonymous).toBe(false);
    expect(resolveFraming({ request_id: 'r', spec: { ...spec, seed: 7 }, initial_state: null }).unsupported).toBeNull();
    // A seed that is no safe integer never reaches it: the resolve body's schema refuses it (422 at spec.seed).
    for (const seed of [7.5, 2 ** 60]) {
      const parsed = ResolveAnyRunBody.safeParse({ request_id: 'r', spec: { ...spec, seed }, initial_state: null });
      expect(parsed.success, String(seed)).toBe(false);
      expect(parsed.error!.issues.map((i) => [i.path, i.message])).toEqual([[['spec', 'seed'], 'seed must be null or an integer of at most 2^53 in magnitude']]);
    }
    expect(ResolveAnyRunBody.parse({ request_id: 'r', spec: { ...spec, seed: -(2 ** 40) }, initial_state: null }).spec.seed).toBe(-(2 ** 40));
    // The trainer's seed: 32 bits of the spec's (0 without one).
    expect([null, undefined, 0, 7, -1, 2 ** 32 + 5, -(2 ** 40)].map((seed) => runLoraSeed({ ...spec, seed }))).toEqual([0, 0, 0, 7, 2 ** 32 - 1, 5, 0]);
    expect(runLoraSeed(spec)).toBe(0);
    const initial = { source: { kind: 'service_checkpoint' as const, checkpoint_id: 'c' }, restore_optimizer: false };
    expect(resolveFraming({ request_id: 'r', spec: { ...spec, seed: null }, initial_state: initial })).toEqual({ wire: 'n3', anonymous: true, unsupported: null });
    expect(() => resolveFraming({ request_id: 'r', run_name: 'a', spec: { ...spec, optimizer: 'adamw', seed: null } })).toThrow(/cannot also/);
    expect(() => resolveFraming({ request_id: 'r', spec })).toThrow(/run_name: Field required/);
    expect(() => resolveFraming({ request_id: 'r', run_name: 'hearth-anonymous-run:x', spec })).toThrow(/may not start/);
  });
});

describe("N3's token matrices", () => {
  it('become next-token sequences with a loss mask, from dense and span rows', () => {
    const tokens = [1, 10, 11, 12, 13, 2];
    const labels = [-100, -100, -100, 12, 13, 2];
    const r = sftSequencesFromTokenMatrices(matrixBatch(artSftTokenMatrix('sft-0', tokens, labels)));
    expect(r).toEqual({ ok: true, sequences: [{ token_ids: tokens, loss_mask: [0, 0, 0, 1, 1, 1] }] });
    const long = Array.from({ length: 20 }, (_, i) => i + 3);
    const spanned = artSftTokenMatrix('sft-1', long, long.map((t, i) => (i >= 15 ? t : -100)));
    expect(spanned.rows[2].values.encoding).toBe('spans');
    const decoded = sftSequencesFromTokenMatrices(matrixBatch(spanned));
    expect(decoded.ok && decoded.sequences[0].loss_mask).toEqual(long.map((_, i) => (i >= 15 ? 1 : 0)));
  });

  it('carry loss weights other than 1 (any sign) as per-target weights, and none when every weight is 0 or 1', () => {
    const m = artSftTokenMatrix('m', [1, 2, 3, 4], [-100, 2, 3, 4]);
    const withWeights = (data: number[]) => ({ ...m, rows: [m.rows[0], m.rows[1], { ...m.rows[2], values: { encoding: 'dense', data } }] });
    // Position t weighs the target token_ids[t + 1]: the weight moves one place right, beside its target's id.
    expect(sftSequencesFromTokenMatrices(matrixBatch(withWeights([0.5, -1, 0, 0])))).toEqual({
      ok: true, sequences: [{ token_ids: [1, 2, 3, 4], loss_mask: [0, 1, 1, 0], weights: [0, 0.5, -1, 0] }],
    });
    expect(sftSequencesFromTokenMatrices(matrixBatch(withWeights([0, 1, 1, 0])))).toEqual({ ok: true, sequences: [{ token_ids: [1, 2, 3, 4], loss_mask: [0, 0, 1, 1] }] });
    const spans = { ...m, rows: [m.rows[0], m.rows[1], { ...m.rows[2], values: { encoding: 'spans', default: [0], spans: [{ start: 1, end: 3, value: [2.5] }] } }] };
    const decoded = sftSequencesFromTokenMatrices(matrixBatch(spans));
    expect(decoded.ok && decoded.sequences[0]).toEqual({ token_ids: [1, 2, 3, 4], loss_mask: [0, 0, 1, 1], weights: [0, 0, 2.5, 2.5] });
  });

  it('refuses what the trainer cannot do (501) and malformed matrices (400), naming why', () => {
    const m = artSftTokenMatrix('m', [1, 2, 3], [-100, 2, 3]);
    const notNext = { ...m, rows: [m.rows[0], { ...m.rows[1], values: { encoding: 'dense', data: [9, 3, 0] } }, m.rows[2]] };
    expect(sftSequencesFromTokenMatrices(matrixBatch(notNext))).toMatchObject({ ok: false, status: 501, reason: /not the next input token/ });
    const advantages = { ...m, rows: [...m.rows, { name: 'advantages', dtype: 'float32', shape: [3, 1], values: { encoding: 'dense', data: [0, 1, 0] } }] };
    expect(sftSequencesFromTokenMatrices(matrixBatch(advantages))).toMatchObject({ ok: false, status: 501, reason: /rows advantages/ });
    expect(sftSequencesFromTokenMatrices(matrixBatch({ ...m, rows: m.rows.slice(0, 2) }))).toMatchObject({ ok: false, status: 400 });
    const short = { ...m, rows: [m.rows[0], m.rows[1], { ...m.rows[2], values: { encoding: 'dense', data: [1] } }] };
    expect(sftSequencesFromTokenMatrices(matrixBatch(short))).toMatchObject({ ok: false, status: 400, reason: /1 values for shape/ });
    const routed = TokenMatrixBatch.parse({ kind: 'token_matrix', matrices: [m], routes: [{ kind: 'captured', matrix_id: 'm' }] });
    expect(sftSequencesFromTokenMatrices(routed)).toMatchObject({ ok: false, status: 501, reason: /routes/ });
  });
});

describe('commands translated to the runs service', () => {
  const fb = (loss: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    N3ForwardBackwardBody.parse({
      request_id: 'fb-1', sequence_id: 0, batch: { kind: 'token_matrix', matrices: [artSftTokenMatrix('sft-0', [1, 5, 6], [-100, 5, 6])], routes: [] },
      loss, collect_packing_shapes: false, retain_packed_input: false, return_token_logprobs: false, ...extra,
    });

  it('N3: SFT token matrices train (token logprobs too), dpo is refused, publications and load sources map to N2', () => {
    const sft = translateN3('forward_backward', fb({ name: 'cross_entropy', normalize_advantages: false }));
    expect(sft.unsupported).toBeUndefined();
    expect(sft.batchKind).toBe('sft');
    expect(sft.command).toMatchObject({ batch: { kind: 'sft_tokens', sequences: [{ token_ids: [1, 5, 6], loss_mask: [0, 1, 1] }] }, loss: { name: 'cross_entropy', values: {} } });
    // RL losses read their own rows (advantages, behavior_logprobs): an SFT matrix is malformed for them (native-rl-token-matrix.test.ts).
    expect(() => translateN3('forward_backward', fb({ name: 'cispo', normalize_advantages: false, clip_low_threshold: 0, clip_high_threshold: 5 }))).toThrow(/missing rows/);
    expect(translateN3('forward_backward', fb({ name: 'dpo', normalize_advantages: false })).unsupported).toMatch(/dpo loss over token matrices/);
    // Token logprobs are answered (native-runs/token-logprobs.ts): the flag is kept in the command for the executor.
    const withLogprobs = translateN3('forward_backward', fb({ name: 'cross_entropy' }, { return_token_logprobs: true }));
    expect([withLogprobs.unsupported, (withLogprobs.command as { return_token_logprobs?: boolean }).return_token_logprobs]).toEqual([undefined, true]);
    // The fingerprint is the sent body's: a retry with its keys in another order is the same command.
    const body = fb({ name: 'cross_entropy', normalize_advantages: false });
    const reordered = Object.fromEntries(Object.entries(body).reverse()) as typeof body;
    expect(translateN3('forward_backward', reordered).fingerprint).toBe(sft.fingerprint);

    const publish = N3SaveWeightsForSamplerBody.parse({ request_id: 'p', sequence_id: 2, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'active', model_alias: 'm' } });
    expect(translateN3('save_weights_for_sampler', publish).command.publication).toEqual({ mode: 'in_flight_lora', model_alias: 'm' });
    const load = translateN3('load_state', { request_id: 'l', sequence_id: 3, source: { kind: 'wandb_artifact', artifact: 'e/p/n:v1' }, restore_optimizer: true });
    expect(load.unsupported).toMatch(/load_state is not implemented by this server for client N3/);
  });

  it("N1: the wrapped command must repeat the request's identity and run", () => {
    const envelope = { request_id: 'fb-1', sequence_id: 0, command: { run_id: 'run', request_id: 'fb-1', sequence_id: 0, batch: { kind: 'sft' } } };
    const t = translateN1('run', envelope, { request_id: 'fb-1', sequence_id: 0, batch: { kind: 'sft', trajectories: [] } });
    expect([t.batchKind, t.command.request_id, t.command.run_id]).toEqual(['sft', 'fb-1', undefined]);
    expect(() => translateN1('other', envelope, {})).toThrow(/command.run_id/);
    expect(() => translateN1('run', { ...envelope, sequence_id: 1 }, {})).toThrow(/command.sequence_id/);
  });
});

describe('records answered in each framing', () => {
  const run: NativeRunRecord = {
    id: 'run', entity: 'e', runName: 'hearth-anonymous-run:abc', spec, status: 'open', learnerModelId: 'l', nextSequenceId: 3,
    projectedLearnerVersion: 1, committedLearnerVersion: 1, createdAt: '2026-11-27T00:00:00.000Z',
  };
  const op = (kind: NativeOperationRecord['kind'], sequenceId: number, result: Record<string, unknown>, command: Record<string, unknown> = {}): NativeOperationRecord => ({
    id: `op-${sequenceId}`, runId: 'run', requestId: `req-${sequenceId}`, fingerprint: 'f', sequenceId, kind, command, status: 'succeeded',
    learnerParentVersion: kind === 'save_weights_for_sampler' ? 1 : 0, reservedOutputLearnerVersion: kind === 'optim_step' ? 1 : null,
    admittedAt: '2026-11-27T00:00:00.000Z', executionStartedAt: '2026-11-27T00:00:01.000Z', executionEndedAt: '2026-11-27T00:00:02.000Z',
    cancelRequested: false, eventCursor: 3, jobId: null, consumedBy: null, result, resultReleased: false, error: null,
  });
  const fbOp = op('forward_backward', 0, {});
  fbOp.result = forwardBackwardResult(fbOp, { loss: 2.5, num_trajectories: 2, max_sequence_tokens: 7, num_tokens: 12, num_trainable_tokens: 4 });
  const checkpoint = { run_id: 'run', learner_version: 1, checkpoint_id: 'ck' };
  const optimOp = op('optim_step', 1, { operation_id: 'op-1', kind: 'optim_step', contributing_forward_backward_operation_ids: ['op-0'], checkpoint, metrics: { loss: 2.4, grad_norm: Number.NaN } });
  const publishOp = op('save_weights_for_sampler', 2, {
    operation_id: 'op-2', kind: 'save_sampler', checkpoint, lora: 'e/p/m:step1', training_session_id: 'run', generation_id: 'g', lora_bytes: 10, publication_metrics: {},
  }, { publication: { mode: 'versioned_lora', model_alias: 'm' } });

  it('N1: operations carry their result inline, validated as art.training contracts; sampler kind save_weights', () => {
    const parsed = [fbOp, optimOp, publishOp].map((o) => N1NativeTrainingOperation.parse(renderOperation('n1', o)));
    parsed.forEach((o) => n1OperationRef(o));
    expect(parsed.map((o) => o.kind)).toEqual(['forward_backward', 'optim_step', 'save_weights']);
    expect(N1ForwardBackwardResult.parse(parsed[0].result).packing).toMatchObject({ packed_sequences: 2, physical_tokens: 12, trainable_assistant_tokens: 4 });
    const optim = N1OptimStepResult.parse(parsed[1].result);
    expect([optim.metrics, parsed[1].contributing_operation_ids]).toEqual([{ loss: 2.4 }, ['op-0']]);
    expect(N1SamplerWeightsResult.parse(parsed[2].result).lora).toBe('e/p/m:step1');
    expect(N1OptimStepResult.parse(renderResult('n1', optimOp, optimOp.result!).result)).toEqual(optim);
    expect(N1NativeTrainingOperation.parse(renderOperation('n1', { ...fbOp, resultReleased: true })).result).toBeNull();
  });

  it("N3: public operations and summaries pass ART's adapter into its contracts; anonymous runs answer run_name null", () => {
    const fb = n3ClientOperation(renderOperation('n3', fbOp));
    expect(fb.result).toMatchObject({ training: { accepted_trainable_tokens: 4 }, loss: { value: 2.5 }, produced_gradient: true });
    expect(n3ClientOperation(renderOperation('n3', optimOp)).result).toMatchObject({ checkpoint, contributing_forward_backward_operation_ids: ['op-0'] });
    const published = n3ClientOperation(renderOperation('n3', publishOp)).result;
    expect(published).toMatchObject({ kind: 'save_sampler', target: 'saved_generation', model_alias: 'm', generation_id: 'e/p/m:step1' });
    expect(n3ClientResult('run', renderResult('n3', publishOp, publishOp.result!))).toEqual(published);
    const empty = op('forward_backward', 3, {});
    empty.result = forwardBackwardResult(empty, { num_trajectories: 1, max_sequence_tokens: 3, num_tokens: 3, num_trainable_tokens: 0 });
    expect(n3ClientOperation(renderOperation('n3', empty)).result).toMatchObject({ produced_gradient: false, loss: { value: 0 } });
    const failed = n3ClientOperation(renderOperation('n3', { ...fbOp, status: 'failed', result: null, error: { message: 'the worker died', training_job_id: 'j' } }));
    expect([failed.error, failed.result_available]).toEqual([{ code: 'the worker died' }, false]);
    expect(N3NativeTrainingRun.parse(renderRun('n3', true, run)).run_name).toBeNull();
    expect(renderRun('n3', false, { ...run, runName: 'named' }).run_name).toBe('named');
  });
});
