// Admission of save_state / load_state and the saved-state lookup (src/services/native-runs/state.ts): names, overwrite,
// unknown states refused before anything is stored, load_state's reservation and the gradients it drops.
import { describe, expect, it } from 'vitest';
import { admit, pendingGradients, type CommandInput } from '../../src/services/native-runs/admission.js';
import { findSavedState, forwardResult } from '../../src/services/native-runs/state.js';
import { forwardBackwardResult } from '../../src/services/native-runs/wire.js';
import type { NativeOperationRecord, NativeRunRecord } from '../../src/store/records.js';

const run = (over: Partial<NativeRunRecord> = {}): NativeRunRecord => ({
  id: 'r', entity: 'e', runName: 'n', spec: {}, status: 'open', learnerModelId: 'm', nextSequenceId: 0, projectedLearnerVersion: 0,
  committedLearnerVersion: 0, createdAt: '2026-01-01T00:00:00Z', ...over,
});
const op = (sequenceId: number, kind: NativeOperationRecord['kind'], over: Partial<NativeOperationRecord> = {}): NativeOperationRecord => ({
  id: `op${sequenceId}`, runId: 'r', requestId: `req${sequenceId}`, fingerprint: `fp${sequenceId}`, sequenceId, kind, command: {}, status: 'succeeded',
  learnerParentVersion: 0, reservedOutputLearnerVersion: null, admittedAt: '', executionStartedAt: null, executionEndedAt: null,
  cancelRequested: false, eventCursor: 0, jobId: null, consumedBy: null, result: null, resultReleased: false, error: null, ...over,
});
const save = (sequenceId: number, name: string, over: Partial<NativeOperationRecord> = {}) => op(sequenceId, 'save_state', { command: { checkpoint_name: name }, ...over });
const input = (over: Partial<CommandInput>): CommandInput => ({ kind: 'save_state', requestId: 'new', sequenceId: 0, fingerprint: 'f', ...over });

describe('saved states', () => {
  it('are found by name (the latest save of it) or by checkpoint_id, never once failed, cancelled or replaced', () => {
    const ops = [save(0, 'a'), save(1, 'b', { status: 'failed' }), save(2, 'a'), save(3, 'c', { status: 'admitted' })];
    expect(findSavedState(ops, 'a')?.id).toBe('op2');
    expect(findSavedState(ops, 'op2')?.id).toBe('op2');
    expect(findSavedState(ops, 'op0')).toBeNull(); // replaced by op2
    expect(findSavedState(ops, 'b')).toBeNull();
    expect(findSavedState(ops, 'c')?.id).toBe('op3'); // saved before a load_state that names it runs
    expect(findSavedState(ops, 'nope')).toBeNull();
  });

  it('save_state: refused at learner version 0 and over an existing name unless overwrite', () => {
    const r = run({ nextSequenceId: 1, projectedLearnerVersion: 1 });
    expect(admit(run(), [], input({ state: { name: 'x' } }))).toMatchObject({ type: 'refuse', refusal: { status: 409 } });
    expect(admit(r, [], input({ sequenceId: 1, state: { name: 'x' } }))).toEqual({ type: 'admit', learnerParentVersion: 1, reservedOutputLearnerVersion: null });
    const taken = admit(r, [save(0, 'x')], input({ sequenceId: 1, state: { name: 'x' } }));
    expect(taken).toMatchObject({ type: 'refuse', refusal: { status: 409 } });
    expect(taken.type === 'refuse' && taken.refusal.message).toMatch(/overwrite/);
    expect(admit(r, [save(0, 'x')], input({ sequenceId: 1, state: { name: 'x', overwrite: true } })).type).toBe('admit');
  });

  it('load_state: an unknown state is 404, a known one reserves parent + 1 and drops the pending gradients', () => {
    const r = run({ nextSequenceId: 3, projectedLearnerVersion: 2 });
    const ops = [save(0, 'x'), op(1, 'forward_backward'), op(2, 'forward_backward')];
    const unknown = admit(r, ops, input({ kind: 'load_state', sequenceId: 3, state: { ref: 'y' } }));
    expect(unknown).toMatchObject({ type: 'refuse', refusal: { status: 404 } });
    expect(admit(r, ops, input({ kind: 'load_state', sequenceId: 3, state: { ref: 'x' } }))).toEqual({
      type: 'admit', learnerParentVersion: 2, reservedOutputLearnerVersion: 3,
    });
    expect(pendingGradients(ops).map((o) => o.sequenceId)).toEqual([1, 2]);
    expect(pendingGradients([...ops, op(3, 'load_state', { status: 'admitted' })])).toEqual([]);
    // A failed load_state changed nothing: the gradients are still pending.
    expect(pendingGradients([...ops, op(3, 'load_state', { status: 'failed' })]).map((o) => o.sequenceId)).toEqual([1, 2]);
  });

  it('forward: the measurement as ForwardResult, with no gradient field', () => {
    const result = forwardResult(forwardBackwardResult(op(0, 'forward'), { loss: 2.5, num_tokens: 10, num_trainable_tokens: 4, num_trajectories: 2, max_sequence_tokens: 6 }));
    expect(result).toMatchObject({ operation_id: 'op0', kind: 'forward', metrics: { loss: 2.5, num_tokens: 10, num_trainable_tokens: 4 }, loss_fn_outputs: [] });
    expect(result).not.toHaveProperty('produced_gradient');
  });
});
