// ART's TrajectoryGroupBundle decoded (src/protocol/trajectory-bundle.ts): bundles built as ART builds them
// (msgpack header and records, base64 in JSON) come back as the trajectory groups they were made from; base64 in
// either alphabet, padded or not; anything that is not ART's structure is refused naming the group and record.
import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { decodeBase64, decodeTrajectoryGroupBundles } from '../../src/protocol/trajectory-bundle.js';
import { DomainError, ValidationError } from '../../src/errors/domain-errors.js';
import { base64Url, bundleOf, bundleOfGroup, groupHeader, trajectoryRecord } from '../helpers/art-trajectory-bundles.js';

const choice = (content: string) => ({
  finish_reason: 'stop', index: 0, logprobs: { content: [{ token: 'token_id:7', logprob: -0.5, bytes: null, top_logprobs: [] }], refusal: null },
  message: { content, refusal: null, role: 'assistant', annotations: null, audio: null, function_call: null, tool_calls: null },
});
const trajectory = (answer: string, reward: number) => ({
  messages_and_choices: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }, choice(answer)],
  tools: null, additional_histories: [{ messages_and_choices: [{ role: 'user', content: 'again' }, choice(`${answer}!`)], tools: null }],
  reward, initial_policy_version: 3, final_policy_version: 4, metrics: { turns: 1, ok: true }, auto_metrics: {}, metadata: { task: 'greet', n: 2, x: null },
  logs: ['a log line'],
});
const group = {
  trajectories: [trajectory('hello', 1), trajectory('hey', 0)],
  exceptions: [{ type: 'ValueError', message: 'rollout failed', traceback: 'Traceback …' }],
  metadata: { split: 'train' }, metrics: { groups: 1 }, logs: ['group log'],
};

/** The ValidationError a decode throws, for its issue's loc and msg. */
function refusal(bundles: ReturnType<typeof bundleOf>[]): { loc: (string | number)[]; msg: string } {
  try {
    decodeTrajectoryGroupBundles(bundles);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    const { loc, msg } = (err as ValidationError).issues[0];
    return { loc, msg };
  }
  throw new Error('the bundle was accepted');
}

describe('base64 of bundle bytes', () => {
  const bytes = new Uint8Array([0x83, 0xfb, 0xff, 0x00, 0x3e, 0x3f]);
  it('reads both alphabets, with and without padding', () => {
    for (const text of ['g/v/AD4/', 'g_v_AD4_', 'g/v/AD4', 'g_v_AD4', Buffer.from(bytes.slice(0, 4)).toString('base64')]) {
      const out = decodeBase64(text);
      expect(out).toBeInstanceOf(Uint8Array);
      expect([...(out as Uint8Array)]).toEqual([...bytes.slice(0, (out as Uint8Array).length)]);
    }
    expect([...(decodeBase64('g_v_AD4_') as Uint8Array)]).toEqual([...bytes]);
    expect([...(decodeBase64('g/v/AA==') as Uint8Array)]).toEqual([0x83, 0xfb, 0xff, 0x00]);
    expect([...(decodeBase64('g_v_AA') as Uint8Array)]).toEqual([0x83, 0xfb, 0xff, 0x00]);
  });
  it('refuses what is not base64: other characters, mixed alphabets, a one-character group, broken padding', () => {
    for (const text of ['g/v_AD4/', 'not base64!', 'g/v/A', 'g/v/AD4==', 'g/v/A=D4', '\u0083\u00fb']) expect(decodeBase64(text)).toHaveProperty('error');
  });
});

describe('decoding TrajectoryGroupBundles', () => {
  it('gives back the group it was built from (header fields, every trajectory, exceptions)', () => {
    const [decoded] = decodeTrajectoryGroupBundles([bundleOfGroup(group)]);
    expect(decoded.trajectories).toEqual(group.trajectories);
    expect(decoded.exceptions).toEqual(group.exceptions);
    expect([decoded.metadata, decoded.metrics, decoded.logs]).toEqual([group.metadata, group.metrics, group.logs]);
  });

  it('reads standard base64 and unpadded text too, and the fields ART defaults when they are absent', () => {
    const standard = bundleOf(groupHeader(), [trajectoryRecord(trajectory('a', 1))], (b) => Buffer.from(b).toString('base64'));
    const unpadded = bundleOf({}, [{ payload: { messages_and_choices: [{ role: 'user', content: 'q' }], reward: 0.5 } }], (b) => Buffer.from(b).toString('base64url'));
    const [a, b] = decodeTrajectoryGroupBundles([standard, unpadded]);
    expect(a.trajectories[0].reward).toBe(1);
    expect(b).toMatchObject({ exceptions: [], metadata: {}, metrics: {}, logs: [] });
    expect(b.trajectories[0]).toMatchObject({ messages_and_choices: [{ role: 'user', content: 'q' }], reward: 0.5, additional_histories: [] });
  });

  it('refuses truncated msgpack and trailing bytes, naming the group and record', () => {
    const good = bundleOfGroup(group);
    const cut = Buffer.from(good.records[1], 'base64url');
    const truncated = { ...good, records: [good.records[0], base64Url(cut.subarray(0, cut.length - 5))] };
    expect(refusal([good, truncated])).toMatchObject({ loc: ['body', 'batch', 'groups', 1, 'records', 1], msg: expect.stringMatching(/^not one msgpack value/) });
    const trailing = { ...good, header: base64Url(Buffer.concat([Buffer.from(encode(groupHeader())), Buffer.from([0xc0])])) };
    expect(refusal([trailing]).loc).toEqual(['body', 'batch', 'groups', 0, 'header']);
    expect(refusal([{ ...good, header: '' }]).loc).toEqual(['body', 'batch', 'groups', 0, 'header']);
    expect(refusal([{ ...good, records: ['%%%'] }])).toMatchObject({ loc: ['body', 'batch', 'groups', 0, 'records', 0], msg: expect.stringMatching(/^not base64/) });
  });

  it('refuses wrong types and extra fields (extra="forbid"), with the path inside the record', () => {
    const record = trajectoryRecord(trajectory('a', 1));
    expect(refusal([bundleOf(groupHeader(), [{ ...record, reward: 1 }])]).loc).toEqual(['body', 'batch', 'groups', 0, 'records', 0]);
    expect(refusal([bundleOf(groupHeader({ surprise: true }), [record])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header']);
    expect(refusal([bundleOf(groupHeader({ metrics: { m: 'high' } }), [record])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header', 'metrics', 'm']);
    expect(refusal([bundleOf(groupHeader({ trajectories: [record] }), [])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header', 'trajectories']);
    expect(refusal([bundleOf(groupHeader(), [record, { ...record, payload: { ...record.payload as object, reward: 'high' } }])]).loc).toEqual(
      ['body', 'batch', 'groups', 0, 'records', 1, 'payload', 'reward'],
    );
    expect(refusal([bundleOf(groupHeader(), [{ ...record, choice_positions: [-1] }])]).loc).toEqual(['body', 'batch', 'groups', 0, 'records', 0, 'choice_positions', 0]);
    expect(refusal([bundleOf([1, 2], [record])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header']);
    expect(refusal([bundleOf(groupHeader({ exceptions: [{ type: 'E', message: 'no traceback' }] }), [record])]).loc.slice(0, 6)).toEqual(
      ['body', 'batch', 'groups', 0, 'header', 'exceptions'],
    );
  });

  it('refuses bytes, extension types and non-finite numbers, which JSON cannot carry', () => {
    const record = trajectoryRecord(trajectory('a', 1));
    expect(refusal([bundleOf(groupHeader(), [{ ...record, payload: { ...record.payload as object, logs: [new Uint8Array([1])] } }])]).loc).toEqual(
      ['body', 'batch', 'groups', 0, 'records', 0, 'payload', 'logs', 0],
    );
    expect(refusal([bundleOf(groupHeader({ metrics: { m: NaN } }), [record])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header', 'metrics', 'm']);
    expect(refusal([bundleOf(groupHeader({ metadata: { when: new Date(0) } }), [record])]).loc).toEqual(['body', 'batch', 'groups', 0, 'header', 'metadata', 'when']);
  });

  it('refuses choice positions that are not Choices and per-history lists that do not line up', () => {
    const record = trajectoryRecord(trajectory('a', 1));
    expect(refusal([bundleOf(groupHeader(), [{ ...record, choice_positions: [1] }])])).toMatchObject({
      loc: ['body', 'batch', 'groups', 0, 'records', 0, 'choice_positions', 0], msg: 'position 1 of messages_and_choices is not a Choice',
    });
    expect(refusal([bundleOf(groupHeader(), [{ ...record, choice_positions: [9] }])]).loc).toEqual(['body', 'batch', 'groups', 0, 'records', 0, 'choice_positions', 0]);
    expect(refusal([bundleOf(groupHeader(), [{ ...record, additional_history_choice_positions: [] }])]).msg).toMatch(/0 entries for 1 additional histories/);
    expect(refusal([bundleOf(groupHeader(), [{ ...record, additional_history_choice_positions: [[0]] }])]).loc).toEqual(
      ['body', 'batch', 'groups', 0, 'records', 0, 'additional_history_choice_positions', 0, 0],
    );
  });

  it('answers not implemented (not invalid) for MoE routing metadata and exchange-form trajectories', () => {
    const record = trajectoryRecord(trajectory('a', 1));
    const routed = bundleOf(groupHeader(), [{ ...record, choice_routing_metadata: { 2: { metadata: {}, dtype: 'uint8', shape: [1, 1, 1] } } }]);
    expect(() => decodeTrajectoryGroupBundles([routed])).toThrow(/group 0 record 0 carries MoE routing metadata/);
    try {
      decodeTrajectoryGroupBundles([routed]);
    } catch (err) {
      expect((err as DomainError).kind).toBe('not_implemented');
    }
    const exchanges = bundleOf(groupHeader(), [{ payload: { reward: 1, exchanges: { chat_completions: [{}], completions: [] } }, exchange_choice_routing_metadata: [{}] }]);
    expect(() => decodeTrajectoryGroupBundles([exchanges])).toThrow(/recorded as exchanges/);
    // Empty routing, as ART writes it for dense models, is fine.
    expect(decodeTrajectoryGroupBundles([bundleOf(groupHeader(), [{ ...record, choice_routing_metadata: {}, additional_history_choice_routing_metadata: [{}], exchange_choice_routing_metadata: [] }])])).toHaveLength(1);
  });
});
