// RL batches of the native API (src/services/native-runs/rl-batch.ts): admission checks, the trainer config a loss
// becomes, which gradients may accumulate, and the results built from the trainer's metrics.
import { describe, expect, it } from 'vitest';
import { DomainError, ValidationError } from '../../src/errors/domain-errors.js';
import {
  accumulationConflict, admitRlBatch, rlExperimentalConfig, rlForwardBackwardResult, rlOptimMetrics, rlOptimPayload, type RlInputs,
} from '../../src/services/native-runs/rl-batch.js';
import type { NativeOperationRecord, TrainingEventRecord } from '../../src/store/records.js';
import { bundleOfGroup } from '../helpers/art-trajectory-bundles.js';

const choice = { finish_reason: 'stop', index: 0, logprobs: null, message: { role: 'assistant', content: 'hi' } };
const group = { trajectories: [0, 1].map((reward) => ({ messages_and_choices: [{ role: 'user', content: 'q' }, choice], reward })) };
const batch = (over: Record<string, unknown> = {}) => ({ kind: 'rl' as const, groups: [bundleOfGroup(group)], min_source_version: 0, max_source_version: 0, ...over });
const loss = (over: Record<string, unknown> = {}) => ({ name: 'cispo', normalize_advantages: true, values: { learning_rate: 1e-5, ppo: true }, ...over });
const none = () => [];

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (err) {
    return err as Error;
  }
  throw new Error('nothing was thrown');
}

describe('admitting an RL batch', () => {
  it('decodes the groups and turns the loss into the trainer config (the name and normalize_advantages win over values)', () => {
    const inputs = admitRlBatch(batch({ min_source_version: 1, max_source_version: 3 }), loss({ normalize_advantages: false }), none);
    expect(inputs.trajectory_groups[0].trajectories.map((t) => t.reward)).toEqual([0, 1]);
    expect(inputs.experimental_config).toEqual({ learning_rate: 1e-5, ppo: true, loss_fn: 'cispo', normalize_advantages: false });
    expect([inputs.min_source_version, inputs.max_source_version]).toEqual([1, 3]);
    expect(rlExperimentalConfig(loss({ name: 'ppo', values: { loss_fn: 'cispo' } }))).toMatchObject({ loss_fn: 'ppo' });
  });

  it('answers 501 for losses and keys the trainer does not have, 422 for invalid values and reversed source versions', () => {
    const unknownLoss = thrown(() => admitRlBatch(batch(), loss({ name: 'importance_sampling' }), none));
    expect([(unknownLoss as DomainError).kind, unknownLoss.message]).toEqual(['not_implemented', expect.stringMatching(/"importance_sampling".*cispo, ppo/)]);
    const unsupported = thrown(() => admitRlBatch(batch(), loss(), () => ['kimi_k2_tau']));
    expect([(unsupported as DomainError).kind, unsupported.message]).toEqual(['not_implemented', expect.stringMatching(/kimi_k2_tau/)]);
    const badValue = thrown(() => admitRlBatch(batch(), loss({ values: { advantage_balance: 2 } }), none));
    expect(badValue).toBeInstanceOf(ValidationError);
    expect((badValue as ValidationError).issues[0].loc).toEqual(['body', 'loss', 'values', 'advantage_balance']);
    const versions = thrown(() => admitRlBatch(batch({ min_source_version: 2, max_source_version: 1 }), loss(), none));
    expect((versions as ValidationError).issues[0].loc).toEqual(['body', 'batch', 'max_source_version']);
    const bad = thrown(() => admitRlBatch(batch({ groups: [bundleOfGroup(group), { header: 'AA', records: [] }] }), loss(), none));
    expect((bad as ValidationError).issues[0].loc).toEqual(['body', 'batch', 'groups', 1, 'header']);
  });
});

const op = (sequenceId: number, command: Record<string, unknown>) => ({ id: `op${sequenceId}`, sequenceId, kind: 'forward_backward', command }) as unknown as NativeOperationRecord;
const body = (b: Record<string, unknown>, l: Record<string, unknown>) => ({ request_id: 'r', sequence_id: 9, batch: b, loss: l }) as never;

describe('accumulating gradients before one optim_step', () => {
  it('lets batches of one kind and (for RL) one loss accumulate, and names the pending one otherwise', () => {
    const rl = op(1, { batch: batch(), loss: loss() });
    const sft = op(2, { batch: { kind: 'sft', trajectories: [] }, loss: { name: 'cross_entropy' } });
    expect(accumulationConflict([rl], body(batch(), loss()))).toBeNull();
    expect(accumulationConflict([sft], body({ kind: 'sft', trajectories: [{}] }, { name: 'cross_entropy' }))).toBeNull();
    expect(accumulationConflict([rl], body(batch(), loss({ name: 'ppo' })))).toMatch(/forward_backward #1 \(an RL batch with another loss\)/);
    expect(accumulationConflict([rl], body({ kind: 'sft', trajectories: [] }, { name: 'cross_entropy' }))).toMatch(/#1 \(a rl batch\)/);
    expect(accumulationConflict([sft], body(batch(), loss()))).toMatch(/#2 \(a sft batch\)/);
  });

  it('applies all kept groups in one job at the optim_step learning rate', () => {
    const inputs = (n: number): RlInputs => ({ kind: 'rl', trajectory_groups: Array(n).fill({ trajectories: [] }), experimental_config: { loss_fn: 'ppo', learning_rate: 1 }, min_source_version: 0, max_source_version: 0 });
    const payload = rlOptimPayload([inputs(2), inputs(1)], 1e-3);
    expect(payload.trajectory_groups).toHaveLength(3);
    expect(payload.experimental_config).toEqual({ loss_fn: 'ppo', learning_rate: 1e-3 });
  });
});

describe('RL results', () => {
  it('reports the measured packing and a gradient exactly when tokens are trainable', () => {
    const step = { loss: 0.3, reward: 0.5, num_trajectories: 8, num_tokens: 40, num_trainable_tokens: 12, packed_sequences: 2, packed_sequence_length: 8192, max_sequence_tokens: 9 };
    const r = rlForwardBackwardResult({ id: 'op' } as NativeOperationRecord, step) as { produced_gradient: boolean; packing: Record<string, number>; metrics: Record<string, number> };
    expect(r.produced_gradient).toBe(true);
    expect(r.packing).toMatchObject({ packed_sequences: 2, nominal_capacity_tokens: 16384, physical_tokens: 40, loss_bearing_tokens: 12, trainable_assistant_tokens: 12 });
    expect(r.metrics).toEqual({ loss: 0.3, reward: 0.5, num_trajectories: 8, num_tokens: 40, num_trainable_tokens: 12 });
    expect((rlForwardBackwardResult({ id: 'op' } as NativeOperationRecord, { ...step, num_trainable_tokens: 0 }) as { produced_gradient: boolean }).produced_gradient).toBe(false);
  });

  it('averages an optim_step job\'s gradient steps, and counts them (none when no trajectory had an advantage)', () => {
    const event = (type: string, data: Record<string, unknown>) => ({ type, data }) as TrainingEventRecord;
    const events = [event('training_started', { num_sequences: 2 }), event('gradient_step', { loss: 1, grad_norm: 2, learning_rate: 0.1 }), event('gradient_step', { loss: 3, grad_norm: 4, learning_rate: 0.1 })];
    expect(rlOptimMetrics(events)).toEqual({ loss: 2, grad_norm: 3, learning_rate: 0.1, gradient_steps: 2 });
    expect(rlOptimMetrics([event('training_started', { num_sequences: 0 })])).toEqual({ gradient_steps: 0 });
  });
});
