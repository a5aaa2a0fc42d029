// The admission rules of native run commands (src/services/native-runs/admission.ts): idempotency by request_id,
// strict sequence order, learner versions, and what is refused before anything is stored.
import { describe, expect, it } from 'vitest';
import { admit, canonicalJson, commandFingerprint, pendingGradients, type CommandInput } from '../../src/services/native-runs/admission.js';
import type { NativeOperationRecord, NativeRunRecord } from '../../src/store/records.js';

const run = (over: Partial<NativeRunRecord> = {}): NativeRunRecord => ({
  id: 'r', entity: 'e', runName: 'n', spec: {}, status: 'open', learnerModelId: 'm', nextSequenceId: 0, projectedLearnerVersion: 0,
  committedLearnerVersion: 0, createdAt: '2026-01-01T00:00:00Z', ...over,
});
const op = (sequenceId: number, kind: NativeOperationRecord['kind'], over: Partial<NativeOperationRecord> = {}): NativeOperationRecord => ({
  id: `op${sequenceId}`, runId: 'r', requestId: `req${sequenceId}`, fingerprint: `fp${sequenceId}`, sequenceId, kind, command: {}, status: 'succeeded',
  learnerParentVersion: 0, reservedOutputLearnerVersion: kind === 'optim_step' ? 1 : null, admittedAt: '', executionStartedAt: null,
  executionEndedAt: null, cancelRequested: false, eventCursor: 0, jobId: null, consumedBy: null, result: null, resultReleased: false, error: null, ...over,
});
const input = (over: Partial<CommandInput>): CommandInput => ({ kind: 'forward_backward', requestId: 'new', sequenceId: 0, fingerprint: 'f', batchKind: 'sft', ...over });

describe('native command admission', () => {
  it('answers a retry with the stored operation and refuses the same request_id with another body', () => {
    const ops = [op(0, 'forward_backward')];
    const r = run({ nextSequenceId: 1 });
    expect(admit(r, ops, input({ requestId: 'req0', sequenceId: 0, fingerprint: 'fp0' }))).toEqual({ type: 'replay', op: ops[0] });
    const divergent = admit(r, ops, input({ requestId: 'req0', sequenceId: 0, fingerprint: 'other' }));
    expect(divergent).toMatchObject({ type: 'refuse', refusal: { status: 409 } });
    // A replay is answered even once the run is closed (ART retries a POST whose answer it lost).
    expect(admit({ ...r, status: 'closed' }, ops, input({ requestId: 'req0', fingerprint: 'fp0' })).type).toBe('replay');
  });

  it('takes exactly the next sequence_id and names it when refusing a gap or a rewind', () => {
    const r = run({ nextSequenceId: 3 });
    expect(admit(r, [], input({ sequenceId: 3 })).type).toBe('admit');
    for (const bad of [2, 4, 9]) {
      const a = admit(r, [], input({ sequenceId: bad }));
      expect(a).toMatchObject({ type: 'refuse', refusal: { status: 409, expectedSequenceId: 3 } });
      expect(a.type === 'refuse' && a.refusal.message).toMatch(/expects sequence_id 3/);
    }
  });

  it('reserves parent + 1 for optim_step only, and only with a pending gradient', () => {
    const r = run({ nextSequenceId: 1, projectedLearnerVersion: 2 });
    expect(admit(r, [op(0, 'forward_backward')], input({ kind: 'optim_step', sequenceId: 1 }))).toEqual({
      type: 'admit', learnerParentVersion: 2, reservedOutputLearnerVersion: 3,
    });
    expect(admit(r, [op(0, 'forward_backward')], input({ sequenceId: 1 }))).toEqual({ type: 'admit', learnerParentVersion: 2, reservedOutputLearnerVersion: null });
    expect(admit(r, [], input({ kind: 'optim_step', sequenceId: 1 }))).toMatchObject({ type: 'refuse', refusal: { status: 409 } });
  });

  it('refuses a run that is not open, unsupported commands (501) and a sampler save of the base', () => {
    expect(admit(run({ status: 'closing' }), [], input({}))).toMatchObject({ type: 'refuse', refusal: { status: 409 } });
    expect(admit(run(), [], input({ kind: 'forward', batchKind: 'tokenized' }))).toMatchObject({ refusal: { status: 501 } });
    expect(admit(run(), [], input({ kind: 'forward', batchKind: 'rl' }))).toMatchObject({ type: 'admit', reservedOutputLearnerVersion: null });
    expect(admit(run(), [], input({ batchKind: 'tokenized' }))).toMatchObject({ refusal: { status: 501 } });
    expect(admit(run(), [], input({ batchKind: 'rl' }))).toMatchObject({ type: 'admit' });
    expect(admit(run(), [], input({ kind: 'save_weights_for_sampler' }))).toMatchObject({ refusal: { status: 409 } });
    expect(admit(run({ projectedLearnerVersion: 1 }), [], input({ kind: 'save_weights_for_sampler' })).type).toBe('admit');
  });
});

describe('pending gradients', () => {
  it('are the forward_backwards after the last optim_step that applied (or will apply) gradients, not failed, cancelled or consumed', () => {
    const ops = [
      op(0, 'forward_backward', { consumedBy: 'op1' }),
      op(1, 'optim_step'),
      op(2, 'forward_backward'),
      op(3, 'forward_backward', { status: 'failed' }),
      op(4, 'forward_backward', { cancelRequested: true }),
      op(5, 'forward_backward', { status: 'running' }),
    ];
    expect(pendingGradients(ops).map((o) => o.sequenceId)).toEqual([2, 5]);
    // A failed optim_step applied nothing: what came before it is still pending.
    expect(pendingGradients([...ops, op(6, 'optim_step', { status: 'failed' })]).map((o) => o.sequenceId)).toEqual([2, 5]);
    expect(pendingGradients([...ops, op(6, 'optim_step', { status: 'admitted' })])).toEqual([]);
  });
});

describe('command fingerprints', () => {
  it('ignore key order and undefined values, and see every value', () => {
    expect(canonicalJson({ b: 1, a: [{ y: 2, x: undefined, z: null }] })).toBe('{"a":[{"y":2,"z":null}],"b":1}');
    expect(commandFingerprint({ a: 1, b: { c: 2 } })).toBe(commandFingerprint({ b: { c: 2 }, a: 1 }));
    expect(commandFingerprint({ a: 1 })).not.toBe(commandFingerprint({ a: 1.5 }));
  });
});
