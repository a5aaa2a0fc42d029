// N3's return_token_logprobs on the API side (src/services/native-runs/token-logprobs.ts, pure): which operations ask
// the measuring job for token logprobs, and its report shaped as ART's TokenLogprobs, one [T, 1] buffer per matrix.
import { describe, expect, it } from 'vitest';
import { matrixTokenLogprobs, wantsTokenLogprobs } from '../../src/services/native-runs/token-logprobs.js';
import { base64Float32, decodeTokenLogprobs, encodeTokenLogprobs, float32Base64 } from '../../src/protocol/token-logprobs.js';
import type { NativeOperationRecord } from '../../src/store/records.js';

const op = (kind: string, command: Record<string, unknown>) => ({ id: 'op', kind, command }) as unknown as NativeOperationRecord;
const sftTokens = (flag: boolean) => ({
  return_token_logprobs: flag,
  batch: { kind: 'sft_tokens', sequences: [{ token_ids: [1, 5, 6, 7], loss_mask: [0, 0, 1, 1] }, { token_ids: [1, 8, 9], loss_mask: [0, 0, 0] }, { token_ids: [1, 2, 3], loss_mask: [0, 1, 1] }] },
});

describe('token logprobs of native operations', () => {
  it('float32 little-endian base64 round-trips, and a report decodes by input row', () => {
    const values = [-0.5, -1.25, Math.fround(-3.3), 0];
    expect(Array.from(base64Float32(float32Base64(values)))).toEqual(values);
    // -0.5 as float32 LE is 00 00 00 bf.
    expect(Buffer.from(float32Base64([-0.5]), 'base64')).toEqual(Buffer.from([0, 0, 0, 0xbf]));
    const report = encodeTokenLogprobs([0, 2], [new Float32Array([NaN, -1, -2]), new Float32Array([-0.5, -0.25])]);
    const byRow = decodeTokenLogprobs(report);
    expect([...byRow.keys()]).toEqual([0, 2]);
    expect(Array.from(byRow.get(2)!)).toEqual([-0.5, -0.25]);
    expect(() => decodeTokenLogprobs({ ...report, lengths: [3, 3] })).toThrow(/add up to 6 values, the data holds 5/);
  });

  it('are asked for only by N3 forward / forward_backward over token matrices with the flag', () => {
    expect(wantsTokenLogprobs(op('forward_backward', sftTokens(true)))).toBe(true);
    expect(wantsTokenLogprobs(op('forward', { ...sftTokens(true), batch: { kind: 'rl_tokens', sequences: [] } }))).toBe(true);
    expect(wantsTokenLogprobs(op('forward_backward', sftTokens(false)))).toBe(false);
    // N2's default is true, over trajectories the server tokenizes: not asked (positions would mean nothing to the client).
    expect(wantsTokenLogprobs(op('forward_backward', { return_token_logprobs: true, batch: { kind: 'sft', trajectories: [] } }))).toBe(false);
    expect(wantsTokenLogprobs(op('optim_step', sftTokens(true)))).toBe(false);
  });

  it('become one [T, 1] buffer per matrix: the learner logprob where trained, 0 elsewhere, all zeros where nothing was measured', () => {
    const o = op('forward_backward', sftTokens(true));
    // Row 1 has no trained target (the trainer skips it); values are per position t (target token_ids[t + 1]).
    const report = encodeTokenLogprobs([0, 2], [new Float32Array([NaN, -1.5, -2.5]), new Float32Array([-0.75, -0.125])]);
    const out = matrixTokenLogprobs(o, report);
    expect(out.map((t) => t.shape)).toEqual([[4, 1], [3, 1], [3, 1]]);
    expect(out.map((t) => Array.from(base64Float32(t.data)))).toEqual([[0, -1.5, -2.5, 0], [0, 0, 0], [-0.75, -0.125, 0]]);
  });

  it('a report that does not fit the batch is an error, not a result', () => {
    const o = op('forward_backward', sftTokens(true));
    expect(() => matrixTokenLogprobs(o, undefined)).toThrow(/reported no token logprobs/);
    expect(() => matrixTokenLogprobs(o, encodeTokenLogprobs([0], [new Float32Array([-1, -2])]))).toThrow(/matrix 0: 2 values for 4 positions/);
  });
});
