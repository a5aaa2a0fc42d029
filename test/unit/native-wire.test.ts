// Pure mappings of the native training-runs API (src/services/native-runs/wire.ts).
import { describe, expect, it } from 'vitest';
import { forwardBackwardResult, peftTargets, sftRow } from '../../src/services/native-runs/wire.js';
import type { NativeOperationRecord } from '../../src/store/records.js';

describe('native wire mappings', () => {
  it('maps Megatron LoRA targets to PEFT names, keeps PEFT names, refuses others', () => {
    expect(peftTargets(['linear_qkv', 'linear_proj', 'linear_fc1', 'linear_fc2']).sort()).toEqual(
      ['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj'],
    );
    expect(peftTargets(['q_proj', 'linear_qkv'])).toEqual(['q_proj', 'k_proj', 'v_proj']);
    expect(() => peftTargets(['lm_head'])).toThrow(/not supported/);
  });

  it('turns a trajectory into an SFT row: Choices become their assistant message, tools kept', () => {
    const choice = { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'hi' }, logprobs: null };
    expect(sftRow({ messages_and_choices: [{ role: 'user', content: 'q' }, choice], tools: [{ type: 'function' }] })).toEqual({
      messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'hi' }], tools: [{ type: 'function' }],
    });
    expect(sftRow({ messages_and_choices: [{ role: 'user', content: 'q' }], tools: null })).toEqual({ messages: [{ role: 'user', content: 'q' }] });
  });

  it('assistant_turns "last": every assistant message but the final one gets weight 0 (a Choice counts as one)', () => {
    const choice = { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'c' }, logprobs: null };
    const trajectory = { messages_and_choices: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }, { role: 'user', content: 'r' }, choice, { role: 'user', content: 'bye' }] };
    expect(sftRow(trajectory, 'last')).toEqual({
      messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a', weight: 0 }, { role: 'user', content: 'r' }, { role: 'assistant', content: 'c' }, { role: 'user', content: 'bye' }],
    });
    expect(sftRow(trajectory, 'all')).toEqual(sftRow(trajectory));
    expect((sftRow(trajectory) as { messages: object[] }).messages.some((m) => 'weight' in m)).toBe(false);
  });

  it('reports a gradient exactly when the measured batch has trainable tokens', () => {
    const op = { id: 'op' } as NativeOperationRecord;
    const step = { loss: 2, num_trajectories: 2, max_sequence_tokens: 10, num_tokens: 18, num_trainable_tokens: 4 };
    const r = forwardBackwardResult(op, step) as { produced_gradient: boolean; packing: Record<string, number>; metrics: Record<string, number> };
    expect(r.produced_gradient).toBe(true);
    expect(r.packing).toMatchObject({ packed_sequences: 2, nominal_capacity_tokens: 20, physical_tokens: 18, trainable_assistant_tokens: 4 });
    expect(r.metrics).toEqual({ loss: 2, num_tokens: 18, num_trainable_tokens: 4 });
    expect((forwardBackwardResult(op, { ...step, num_trainable_tokens: 0 }) as { produced_gradient: boolean }).produced_gradient).toBe(false);
  });
});
