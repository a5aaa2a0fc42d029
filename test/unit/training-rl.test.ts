// RL: trajectory groups -> sequences, experimental_config, and a job end to end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTrainingBackend } from '../../worker/training/backend.js';
import { readCheckpoint } from '../../worker/training/checkpoint.js';
import { buildTrainingModel, runRl, type TrainingEvent } from '../../worker/training/loop.js';
import { sequenceLogprobs } from '../../worker/training/token-logprobs.js';
import { rlSettingsFromExperimentalConfig, unsupportedExperimentalKeys, unsupportedSftExperimentalKeys } from '../../src/protocol/rl-settings.js';
import { choiceTokens, isChoice, tokenizeTrajectoryGroups, type ChatTokenizer, type TrajectoryGroupJson } from '../../worker/training/rl-data.js';
import { END, ROLE, chars, toyTokenizer } from '../helpers/toy-chat-tokenizer.js';
import { randomWeights } from '../../worker/training/tensor-utils.js';
import { tinyConfig } from './training-helpers.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-rl-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await initTrainingBackend({ log: () => {} });
});


/** A Choice dict as Hearth's chat completions return it (token_id:N logprobs). */
function choice(text: string, logprob = -1.5) {
  const ids = [...chars(text), END];
  return {
    finish_reason: 'stop',
    index: 0,
    logprobs: { content: ids.map((id) => ({ token: `token_id:${id}`, bytes: [], logprob, top_logprobs: [] })), refusal: null },
    message: { content: text, refusal: null, role: 'assistant', annotations: null, audio: null, function_call: null, tool_calls: null },
  };
}

const trajectory = (question: string, answer: string, reward: number) => ({
  messages_and_choices: [{ role: 'user', content: question }, choice(answer)],
  tools: null,
  additional_histories: [],
  reward,
});

describe('trajectory groups -> sequences', () => {
  it('splices the exact sampled token ids after the rendered prompt; loss only on them', async () => {
    const data = await tokenizeTrajectoryGroups(
      [{ trajectories: [trajectory('2+2?', '4', 1), trajectory('2+2?', '5', 0)], exceptions: [] }],
      toyTokenizer,
      { allowTrainingWithoutLogprobs: false },
    );
    expect(data.sequences).toHaveLength(2);
    const s = data.sequences[0];
    const prompt = [11, ...chars('2+2?'), END, 12];
    expect(s.ids).toEqual([...prompt, ...chars('4'), END]);
    expect(s.lossMask).toEqual([...prompt.map(() => 0), 1, 1]);
    expect(s.logprobs!.slice(prompt.length)).toEqual([-1.5, -1.5]);
    expect(s.logprobs!.slice(0, prompt.length).every(Number.isNaN)).toBe(true);
    expect(data.groupRewards).toEqual([[1, 0]]);
    expect([s.trajectory, data.sequences[1].trajectory, s.group]).toEqual([0, 1, 0]);
  });

  it('keeps a multi-turn history in one sequence when the template re-renders the turns the same way', async () => {
    const t = {
      messages_and_choices: [{ role: 'user', content: 'hi' }, choice('yo'), { role: 'user', content: 'bye' }, choice('ok')],
      reward: 1,
    };
    const data = await tokenizeTrajectoryGroups([{ trajectories: [t, { ...t, reward: 0 }] }], toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const s = data.sequences[0];
    expect(data.sequences).toHaveLength(2);
    expect(s.ids).toEqual([11, ...chars('hi'), END, 12, ...chars('yo'), END, 11, ...chars('bye'), END, 12, ...chars('ok'), END]);
    expect(s.lossMask.reduce((a, b) => a + b, 0)).toBe(6);
  });

  it('skips choices without logprobs unless allow_training_without_logprobs, then re-tokenizes them', async () => {
    const noLogprobs = { ...choice('4'), logprobs: null };
    const groups: TrajectoryGroupJson[] = [{ trajectories: [{ messages_and_choices: [{ role: 'user', content: 'q' }, noLogprobs], reward: 1 }, trajectory('q', '5', 0)] }];
    const skipped = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: false });
    expect(skipped.numChoicesWithoutLogprobs).toBe(1);
    expect(skipped.sequences).toHaveLength(1);
    const allowed = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: true });
    expect(allowed.sequences).toHaveLength(2);
    expect(allowed.sequences[0].ids.slice(-2)).toEqual([...chars('4'), END]);
    expect(Number.isNaN(allowed.sequences[0].logprobs!.at(-1))).toBe(true);
  });

  it('rejects logprobs without token ids, and skips zero-variance groups', async () => {
    const bad = choice('4');
    bad.logprobs.content[0].token = '4';
    await expect(
      tokenizeTrajectoryGroups([{ trajectories: [{ messages_and_choices: [bad], reward: 1 }, trajectory('q', '5', 0)] }], toyTokenizer, { allowTrainingWithoutLogprobs: false }),
    ).rejects.toThrow(/token_id:N/);
    const same = await tokenizeTrajectoryGroups([{ trajectories: [trajectory('q', '4', 1), trajectory('q', '5', 1)] }], toyTokenizer, { allowTrainingWithoutLogprobs: false });
    expect(same.sequences).toHaveLength(0);
    expect(same.numTrajectories).toBe(2);
  });
});

describe('trajectory edges', () => {
  const opts = { allowTrainingWithoutLogprobs: false };
  const TOOLS = 15;
  const CALL = 14;
  const CALL_BLOCK = 16;
  /** The toy template, plus: tools before everything (15), a message's tool_calls as a block (16) with one 14
   * per call, and (forgetful) earlier assistant turns rendered empty, as templates that strip past reasoning do. */
  const richTokenizer = (forgetful = false): ChatTokenizer => ({
    async encodeChat(messages, o) {
      const ids = Array.isArray(o.tools) && o.tools.length ? [TOOLS] : [];
      messages.forEach((m) => {
        const hidden = forgetful && m.role === 'assistant' && o.addGenerationPrompt;
        ids.push(ROLE[m.role], ...(hidden ? [] : chars(String(m.content ?? ''))), ...(Array.isArray(m.tool_calls) ? [CALL_BLOCK, ...m.tool_calls.map(() => CALL)] : []), END);
      });
      if (o.addGenerationPrompt) ids.push(ROLE.assistant);
      return ids;
    },
  });
  const group = (t: object): TrajectoryGroupJson[] => [{ trajectories: [{ ...t, reward: 1 }, trajectory('x', 'y', 0)] }];

  it('starts a new sequence when the template re-renders earlier turns differently, each with its own choice', async () => {
    const t = { messages_and_choices: [{ role: 'user', content: 'hi' }, choice('yo'), { role: 'user', content: 'bye' }, choice('ok')] };
    const data = await tokenizeTrajectoryGroups(group(t), richTokenizer(true), opts);
    const mine = data.sequences.filter((x) => x.trajectory === 0);
    expect(mine.map((x) => x.ids)).toEqual([
      [11, ...chars('hi'), END, 12, ...chars('yo'), END],
      [11, ...chars('hi'), END, 12, END, 11, ...chars('bye'), END, 12, ...chars('ok'), END],
    ]);
    expect(mine.map((x) => x.lossMask.reduce((a, b) => a + b, 0))).toEqual([3, 3]);
    expect(mine[1].lossMask.slice(0, -3).every((m) => m === 0)).toBe(true);
    // The new sequence's sampling logprobs line up with its tokens (NaN on the prompt).
    expect(mine[1].logprobs).toHaveLength(mine[1].ids.length);
    expect(mine[1].logprobs!.slice(-3)).toEqual([-1.5, -1.5, -1.5]);
    expect(mine[1].logprobs!.slice(0, -3).every(Number.isNaN)).toBe(true);
  });

  it('a choice with no tokens trains nothing and makes no sequence of its own', async () => {
    const empty = { ...choice(''), logprobs: { content: [], refusal: null } };
    const alone = await tokenizeTrajectoryGroups(group({ messages_and_choices: [{ role: 'user', content: 'q' }, empty] }), toyTokenizer, opts);
    expect(alone.sequences.filter((x) => x.trajectory === 0)).toEqual([]);
    const after = await tokenizeTrajectoryGroups(group({ messages_and_choices: [{ role: 'user', content: 'hi' }, choice('yo'), { role: 'user', content: 'b' }, empty] }), richTokenizer(true), opts);
    expect(after.sequences.filter((x) => x.trajectory === 0).map((x) => x.ids)).toEqual([[11, ...chars('hi'), END, 12, ...chars('yo'), END]]);
  });

  it('a prompt_token_ids equal to the tokens so far continues the sequence', async () => {
    const first = choice('yo');
    const ids = [11, ...chars('hi'), END, 12, ...chars('yo'), END];
    const t = { messages_and_choices: [{ role: 'user', content: 'hi' }, first, { ...choice('ok'), prompt_token_ids: ids }] };
    const data = await tokenizeTrajectoryGroups(group(t), toyTokenizer, opts);
    expect(data.sequences.filter((x) => x.trajectory === 0).map((x) => x.ids)).toEqual([[...ids, ...chars('ok'), END]]);
  });

  it("a choice's tool calls are part of the conversation the next prompt renders; empty content renders empty", async () => {
    // The sampled tokens of a tool-calling turn are what the template renders for its calls.
    const call = {
      finish_reason: 'tool_calls',
      logprobs: { content: [CALL_BLOCK, CALL, END].map((id) => ({ token: `token_id:${id}`, logprob: -1 })) },
      message: { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    };
    const none = { ...choice('a'), message: { ...choice('a').message, tool_calls: [] } };
    const t = { messages_and_choices: [{ role: 'user', content: 'q' }, call, { role: 'tool', content: 'r' }, none, { role: 'user', content: 'u' }, choice('b')] };
    const data = await tokenizeTrajectoryGroups(group(t), richTokenizer(), opts);
    const s0 = data.sequences.filter((x) => x.trajectory === 0);
    expect(s0.map((x) => x.ids)).toEqual([
      [11, ...chars('q'), END, 12, CALL_BLOCK, CALL, END, 13, ...chars('r'), END, 12, ...chars('a'), END, 11, ...chars('u'), END, 12, ...chars('b'), END],
    ]);
    expect(s0[0].lossMask.reduce((a, b) => a + b, 0)).toBe(3 + 2 + 2);
  });

  it('re-tokenizes a choice without logprobs with the tools of its history, and refuses a template that cannot', async () => {
    const bare = { ...choice('4'), logprobs: null };
    const t = { messages_and_choices: [{ role: 'user', content: 'q' }, bare], tools: [{ type: 'function', function: { name: 'f' } }] };
    const data = await tokenizeTrajectoryGroups(group(t), richTokenizer(), { allowTrainingWithoutLogprobs: true });
    const s0 = data.sequences.find((x) => x.trajectory === 0)!;
    const prompt = [TOOLS, 11, ...chars('q'), END, 12];
    expect(s0.ids).toEqual([...prompt, ...chars('4'), END]);
    expect(s0.lossMask).toEqual([...prompt.map(() => 0), 1, 1]);
    const shuffled: ChatTokenizer = { async encodeChat(_m, o) { return o.addGenerationPrompt ? [12, 1, 2] : [1, 2, 12, 9]; } };
    await expect(tokenizeTrajectoryGroups(group({ messages_and_choices: [{ role: 'user', content: 'q' }, bare] }), shuffled, { allowTrainingWithoutLogprobs: true }))
      .rejects.toThrow('cannot re-tokenize a choice without logprobs: the chat template does not render the assistant turn after its generation prompt');
    const shorter: ChatTokenizer = { async encodeChat(_m, o) { return o.addGenerationPrompt ? [1, 2, 12] : [1, 2]; } };
    await expect(tokenizeTrajectoryGroups(group({ messages_and_choices: [{ role: 'user', content: 'q' }, bare] }), shorter, { allowTrainingWithoutLogprobs: true }))
      .rejects.toThrow(/cannot re-tokenize/);
  });

  it('a trajectory of additional histories only trains those', async () => {
    const t = { additional_histories: [{ messages_and_choices: [{ role: 'user', content: 'h' }, choice('z')] }, { tools: null }] };
    const data = await tokenizeTrajectoryGroups(group(t), toyTokenizer, opts);
    expect(data.sequences.filter((x) => x.trajectory === 0).map((x) => x.ids)).toEqual([[11, ...chars('h'), END, 12, ...chars('z'), END]]);
  });

  it('tells choices from messages: message and finish_reason, and no role', () => {
    expect(isChoice({ message: {}, finish_reason: 'stop' })).toBe(true);
    expect(isChoice({ message: {}, finish_reason: 'stop', role: 'assistant' })).toBe(false);
    expect(isChoice({ message: {} })).toBe(false);
    expect(isChoice({ finish_reason: 'stop' })).toBe(false);
    expect(isChoice({ content: 'x' })).toBe(false);
  });

  it('reads token ids written token_id:N exactly, else looks pieces up, else refuses naming the token', () => {
    const entries = (...tokens: unknown[]) => ({ logprobs: { content: tokens.map((token) => ({ token, logprob: -1 })) } });
    expect(choiceTokens(entries('token_id:7', 'token_id:0'))).toEqual({ ids: [7, 0], logprobs: [-1, -1] });
    expect(choiceTokens(entries('hello'), (t) => (t === 'hello' ? 42 : null))).toEqual({ ids: [42], logprobs: [-1] });
    const anyPiece = () => 99;
    for (const token of ['xtoken_id:5', 'token_id:5x']) expect(() => choiceTokens(entries(token))).toThrow(`choice logprobs carry token ${JSON.stringify(token)}`);
    expect(() => choiceTokens(entries(5), anyPiece)).toThrow('choice logprobs carry token 5, which is neither');
    expect(choiceTokens({ logprobs: { content: [{ token: 'token_id:1' }] } })!.logprobs.every(Number.isNaN)).toBe(true);
    expect(choiceTokens({ logprobs: null })).toBeNull();
  });
});

describe('experimental_config', () => {
  // What ART 0.5.18 sends by default (spec §2.7).
  const artDefaults = {
    advantage_balance: 0.0, allow_training_without_logprobs: false, epsilon: null, epsilon_high: null, importance_sampling_level: 'token',
    kimi_k2_tau: null, kl_penalty_coef: 0.0, kl_penalty_reference_step: null, kl_penalty_source: 'current_learner', kl_penalty_step_lag: null,
    kl_ref_adapter_path: null, learning_rate: 1e-5, logprob_calculation_chunk_size: 1024, loss_fn: 'cispo', mask_prob_ratio: false,
    max_negative_advantage_importance_sampling_weight: null, normalize_advantages: true, num_trajectories_learning_rate_multiplier_power: 0.0,
    packed_sequence_length: null, plot_tensors: false, ppo: false, precalculate_logprobs: false, scale_learning_rate_by_reward_std_dev: false,
    scale_rewards: true, truncated_importance_sampling: null,
  };

  it('accepts ART defaults and resolves them like ART', () => {
    expect(unsupportedExperimentalKeys(artDefaults)).toEqual([]);
    const s = rlSettingsFromExperimentalConfig(artDefaults);
    expect(s.learningRate).toBe(1e-5);
    expect(s.loss).toMatchObject({ lossFn: 'cispo', epsilon: 1, epsilonHigh: 4, importanceSamplingLevel: 'token', klPenaltyCoef: 0 });
    expect(s.scaleRewards).toBe(true);
    expect(rlSettingsFromExperimentalConfig({ ppo: true, epsilon: 0.3 }).loss).toMatchObject({ lossFn: 'ppo', epsilon: 0.3, epsilonHigh: 0.3 });
    expect(rlSettingsFromExperimentalConfig(null).learningRate).toBe(5e-6);
  });

  it('names the set keys it does not implement', () => {
    // advantage_balance and the KL reference keys are implemented (test/unit/training-art-compat.test.ts).
    expect(unsupportedExperimentalKeys({ ...artDefaults, advantage_balance: 0.5, kl_penalty_step_lag: 2, kl_ref_adapter_path: '/x' })).toEqual([]);
    // scale_learning_rate_by_reward_std_dev is implemented too (test/unit/reward-std-lr.test.ts).
    expect(unsupportedExperimentalKeys({ ...artDefaults, scale_learning_rate_by_reward_std_dev: true })).toEqual([]);
    expect(rlSettingsFromExperimentalConfig({ scale_learning_rate_by_reward_std_dev: true }).scaleLearningRateByRewardStdDev).toBe(true);
    expect(rlSettingsFromExperimentalConfig(artDefaults).scaleLearningRateByRewardStdDev).toBe(false);
    expect(unsupportedSftExperimentalKeys({ a: 1, b: null })).toEqual(['a']);
    expect(unsupportedSftExperimentalKeys(null)).toEqual([]);
  });
});

describe('RL job', () => {
  const cfg = tinyConfig();
  const weights = randomWeights(cfg, 1);
  // Two learnable groups (good answer rewarded) and one zero-variance group.
  const groups: TrajectoryGroupJson[] = [
    { trajectories: [trajectory('2+2?', '4', 1), trajectory('2+2?', '5', 0), trajectory('2+2?', '4', 1), trajectory('2+2?', '22', 0)] },
    { trajectories: [trajectory('3+3?', '6', 1), trajectory('3+3?', '7', 0), trajectory('3+3?', '33', 0), trajectory('3+3?', '6', 1)] },
    { trajectories: [trajectory('1+1?', '2', 1), trajectory('1+1?', '2', 1)], exceptions: [{ type: 'E', message: 'm', traceback: '' }] },
  ];

  it('emits training_started then one gradient_step per step, writes the adapter, and moves probability to rewarded answers', async () => {
    const data = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const events: TrainingEvent[] = [];
    const spec = { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' as const };
    const result = await runRl({ data, settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-2 }) }, { model: spec, checkpointDir: join(root, 'm', 'step-1'), log: () => {} }, (e) => void events.push(e));

    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: 1 } });
    expect(events).toHaveLength(2);
    const step = events[1].data as Record<string, number>;
    for (const v of Object.values(step)) expect(Number.isFinite(v)).toBe(true);
    // num_trajectories: every trajectory and exception submitted (ART's data/step_num_trajectories), not only the 8 trained.
    expect(step).toMatchObject({ num_groups_submitted: 3, num_groups_trainable: 2, num_trajectories: 11, learning_rate: 1e-2 });
    // Only trainable tokens under num_trainable_tokens (ART maps it and train_tokens to one key).
    expect(step.train_tokens).toBeUndefined();
    expect(step.num_tokens).toBeGreaterThan(step.num_trainable_tokens);
    expect(step.reward).toBeCloseTo(6 / 10, 9);
    expect(step.reward_std_dev).toBeCloseTo((0.5 + 0.5 + 0) / 3, 9);
    expect(step.exception_rate).toBeCloseTo(1 / 11, 9);
    expect(step.entropy).toBeGreaterThan(5); // ~ln(512) for a random model
    expect(step.num_trainable_tokens).toBe(2 + 2 + 2 + 3 + 2 + 2 + 3 + 2);

    // Log-probability of each trained answer before and after, under the written adapter.
    const before = buildTrainingModel(spec);
    const after = buildTrainingModel({ ...spec, resumeFrom: await readCheckpoint(result.checkpointDir) });
    const sum = (lp: Float32Array, mask: number[]) => lp.reduce((a, v, t) => a + (mask[t + 1] ? v : 0), 0);
    const lpBefore = sequenceLogprobs(before, data.sequences, 1024);
    const lpAfter = sequenceLogprobs(after, data.sequences, 1024);
    data.sequences.forEach((s, i) => {
      const delta = sum(lpAfter[i], s.lossMask) - sum(lpBefore[i], s.lossMask);
      const rewarded = data.groupRewards.flat()[s.trajectory] === 1;
      if (rewarded) expect(delta, `sequence ${i}`).toBeGreaterThan(0);
      else expect(delta, `sequence ${i}`).toBeLessThan(0);
    });
    before.dispose();
    after.dispose();
  });

  it('scale_learning_rate_by_reward_std_dev multiplies the step learning rate by the fitted reward-spread trend', async () => {
    const data = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const spec = { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' as const };
    const run = async (scale: boolean) => {
      const events: TrainingEvent[] = [];
      const history = [{ step: 1, reward_std_dev: 0.8 }, { step: 2, reward_std_dev: 0.5 }, { step: 2, reward_std_dev: 0.7 }, { step: 3, reward_std_dev: 0.55 }, { step: 5, reward_std_dev: 0.35 }];
      await runRl(
        { data, settings: rlSettingsFromExperimentalConfig({ learning_rate: 1e-3, scale_learning_rate_by_reward_std_dev: scale }), rewardStdDevHistory: history },
        { model: spec, checkpointDir: join(root, 'm', `lr-${scale}`), log: () => {} },
        (e) => void events.push(e),
      );
      return (events[1].data as Record<string, number>).learning_rate;
    };
    // numpy.polyfit(steps, per-step means, 1) over that history: (m·5 + b) / b = 0.3894389438943896.
    expect(await run(true)).toBeCloseTo(1e-3 * 0.3894389438943896, 15);
    expect(await run(false)).toBe(1e-3);
  });

  it('with nothing to learn (all groups zero-variance) reports 0 steps and still writes the checkpoint', async () => {
    const data = await tokenizeTrajectoryGroups([groups[2]], toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const events: TrainingEvent[] = [];
    const result = await runRl({ data }, { model: { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' }, checkpointDir: join(root, 'm', 'step-0'), log: () => {} }, (e) => void events.push(e));
    expect(events).toEqual([{ type: 'training_started', data: { num_sequences: 0 } }]);
    expect((await readCheckpoint(result.checkpointDir)).kind).toBe('lora');
  });

  it('runs PPO with sequence-level importance sampling and a KL penalty, one step per packed bin', async () => {
    const data = await tokenizeTrajectoryGroups(groups, toyTokenizer, { allowTrainingWithoutLogprobs: false });
    const events: TrainingEvent[] = [];
    await runRl(
      { data, settings: rlSettingsFromExperimentalConfig({ loss_fn: 'ppo', importance_sampling_level: 'sequence', kl_penalty_coef: 0.1, packed_sequence_length: 40, precalculate_logprobs: true }) },
      { model: { config: cfg, weights, baseModelName: 'tiny', mode: 'lora' }, checkpointDir: join(root, 'm', 'step-2'), log: () => {} },
      (e) => void events.push(e),
    );
    const steps = events.filter((e) => e.type === 'gradient_step');
    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: steps.length } });
    expect(steps.length).toBeGreaterThan(1);
    for (const s of steps) {
      // Precalculated old logprobs = the starting policy: the first step's KL is 0 (base = start).
      expect(Number.isFinite(s.data.kl_policy_ref)).toBe(true);
      expect(Number.isFinite(s.data.loss)).toBe(true);
    }
    expect(steps[0].data.kl_policy_ref).toBeCloseTo(0, 6);
  });
});
