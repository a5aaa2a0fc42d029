// RL over the native training-runs API, as ART's N2 ServerlessBackend drives it (`train()`: docs/art.md "RL over
// the native API"), against a real server and training worker: rollouts on the model's inference name, an RL
// forward_backward whose trajectory groups travel as TrajectoryGroupBundles (msgpack, base64 in JSON, built as ART
// builds them), its retry, optim_step, save_weights_for_sampler, and a completion with logprobs from what was
// published. Malformed bundles and unsupported losses are refused with nothing stored. Every answer is checked
// against ART's pydantic models (test/helpers/art-native-models.ts).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { nativeClient, parseAs } from '../helpers/art-native-client.js';
import { ForwardBackwardResult, ForwardResult, NativeTrainingOperation, NativeTrainingRun, OptimStepResult, SamplerWeightsResult } from '../helpers/art-native-models.js';
import { bundleOf, bundleOfGroup, groupHeader, trajectoryRecord } from '../helpers/art-trajectory-bundles.js';
import { decodeOptimizerState, OPTIMIZER_STATE_FILE } from '../../src/runtime/optimizer-state.js';

const hex = () => crypto.randomBytes(16).toString('hex');

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await startDemoServer({ training: true });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

const { post, get, terminal } = nativeClient(() => s, () => key);
const parse = parseAs;

/** What N2's train() puts in loss.values: its TrainConfig and dev config (every experimental_config key). */
const lossValues = {
  learning_rate: 1e-2, advantage_balance: 0.0, allow_training_without_logprobs: false, epsilon: null, epsilon_high: null, importance_sampling_level: 'token',
  kimi_k2_tau: null, kl_penalty_coef: 0.0, kl_penalty_source: 'current_learner', kl_ref_adapter_path: null, logprob_calculation_chunk_size: 1024,
  mask_prob_ratio: false, max_negative_advantage_importance_sampling_weight: null, num_trajectories_learning_rate_multiplier_power: 0.0,
  packed_sequence_length: 32, plot_tensors: false, ppo: false, precalculate_logprobs: false, scale_learning_rate_by_reward_std_dev: false,
  scale_rewards: true, truncated_importance_sampling: null, optimizer_save_interval: 5,
};

/** Rollouts on the model's inference name; each Choice kept whole, as ART's Trajectory dumps it. */
async function rolloutGroup(name: string, n: number) {
  const messages = [{ role: 'user', content: 'Say something nice.' }];
  const trajectories = [];
  for (let i = 0; i < n; i++) {
    const r = await post('/chat/completions', { model: `wandb-artifact:///alice/p/${name}`, messages, max_tokens: 6, temperature: 1, seed: i, logprobs: true });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    trajectories.push({
      messages_and_choices: [...messages, r.body.choices[0]], tools: null, additional_histories: [], reward: i % 2, initial_policy_version: 0,
      final_policy_version: 0, metrics: {}, auto_metrics: {}, metadata: {}, logs: [],
    });
  }
  return { trajectories, exceptions: [], metadata: {}, metrics: {}, logs: [] };
}

describe('RL over the native training runs, as ART N2 train() calls them', () => {
  it('trains RL groups sent as TrajectoryGroupBundles, publishes the step, serves it; refuses malformed bundles with nothing stored', async () => {
    await post('/preview/models', { entity: null, project: 'p', name: 'native-rl', base_model: DEMO_MODEL, return_existing: true });
    const spec = { base_model: DEMO_MODEL, dtype: 'bfloat16', lora_rank: 8, lora_target_modules: ['linear_qkv', 'linear_proj', 'linear_fc1', 'linear_fc2'] };
    const run = parse(NativeTrainingRun, (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'native-rl', spec })).body);
    const id = run.run_id;
    const groups = [await rolloutGroup('native-rl', 4), await rolloutGroup('native-rl', 4)];
    const fbBody = {
      request_id: `fb-${hex()}`, sequence_id: 0,
      batch: { kind: 'rl', groups: groups.map(bundleOfGroup), min_source_version: 0, max_source_version: 0 },
      loss: { name: 'cispo', normalize_advantages: true, values: lossValues }, collect_packing_shapes: false, return_token_logprobs: false,
      retain_packed_input: false,
    };

    // Refused before anything is stored: a record that is not msgpack, a record of the wrong structure, reversed
    // source versions, a loss the trainer does not have.
    const good = fbBody.batch.groups[1];
    const truncated = await post(`/training/runs/${id}/forward_backward`, {
      ...fbBody, batch: { ...fbBody.batch, groups: [fbBody.batch.groups[0], { ...good, records: [good.records[0], good.records[1].slice(0, 40)] }] },
    });
    expect(truncated.status).toBe(422);
    expect(truncated.body.detail[0].loc).toEqual(['body', 'batch', 'groups', 1, 'records', 1]);
    expect(truncated.body.detail[0].msg).toMatch(/msgpack|base64/);
    const extra = { ...trajectoryRecord(groups[0].trajectories[0]), advantage: 1 };
    const wrongShape = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, batch: { ...fbBody.batch, groups: [bundleOf(groupHeader(), [extra])] } });
    expect(wrongShape.status).toBe(422);
    expect(wrongShape.body.detail[0].loc).toEqual(['body', 'batch', 'groups', 0, 'records', 0]);
    const versions = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, batch: { ...fbBody.batch, min_source_version: 2, max_source_version: 1 } });
    expect(versions.status).toBe(422);
    const otherLoss = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, loss: { ...fbBody.loss, name: 'importance_sampling' } });
    expect(otherLoss.status).toBe(501);
    expect(otherLoss.body.detail).toMatch(/importance_sampling.*cispo, ppo/);
    expect((await get(`/training/runs/${id}`)).body).toMatchObject({ next_sequence_id: 0, projected_learner_version: 0 });
    expect(s.store.nativeRuns.ops(id)).toEqual([]);

    // The forward_backward, then the same POST again (ART's client retries native POSTs): one operation.
    const fb = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, fbBody)).body);
    expect([fb.sequence_id, fb.kind, fb.learner_parent_version, fb.reserved_output_learner_version]).toEqual([0, 'forward_backward', 0, null]);
    const retried = await post(`/training/runs/${id}/forward_backward`, fbBody);
    expect(retried.status).toBe(200);
    expect(retried.body.operation_id).toBe(fb.operation_id);
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);
    // An SFT batch cannot join the RL gradient waiting for its optim_step (one job applies them): 501, nothing stored.
    const sft = await post(`/training/runs/${id}/forward_backward`, {
      ...fbBody, request_id: `fb-${hex()}`, sequence_id: 1, batch: { kind: 'sft', trajectories: [groups[0].trajectories[0]] }, loss: { name: 'cross_entropy' },
    });
    expect(sft.status).toBe(501);
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);

    const measured = await terminal(id, fb);
    expect(measured.op.status, JSON.stringify(measured.op.error)).toBe('succeeded');
    const fbResult = parse(ForwardBackwardResult, measured.result);
    expect(fbResult.produced_gradient).toBe(true);
    expect(fbResult.packing.packed_sequences).toBeGreaterThanOrEqual(1);
    expect(fbResult.metrics).toMatchObject({ reward: 0.5, num_groups_submitted: 2, num_groups_trainable: 2, num_trajectories: 8 });
    expect(Number.isFinite(fbResult.metrics.loss)).toBe(true);
    // The decoded inputs are kept until the optim_step applies them.
    expect(fs.readdirSync(path.join(s.home, 'native-runs', id))).toHaveLength(1);

    const optim = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/optim_step`, {
      request_id: `optim-${hex()}`, sequence_id: 1, optimizer: { learning_rate: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-13, weight_decay: 0.1, grad_clip_norm: 0.1 },
    })).body);
    expect([optim.learner_parent_version, optim.reserved_output_learner_version]).toEqual([0, 1]);
    const optimDone = await terminal(id, optim);
    expect(optimDone.op.status, JSON.stringify(optimDone.op.error)).toBe('succeeded');
    const optimResult = parse(OptimStepResult, optimDone.result);
    expect(optimResult.checkpoint.learner_version).toBe(1);
    expect(optimResult.contributing_forward_backward_operation_ids).toEqual([fb.operation_id]);
    expect(optimResult.metrics.learning_rate).toBeCloseTo(1e-2);
    // ART's optim_step applies the batch once: one Adam update over every packed sequence (here more than one).
    expect(fbResult.packing.packed_sequences).toBeGreaterThan(1);
    expect(optimResult.metrics.gradient_steps).toBe(1);
    // It ran as an RL job of the run's learner, with the forward_backward's loss and the optim_step's learning rate.
    const job = s.store.jobs.getById(s.store.nativeRuns.op(id, optim.operation_id)!.jobId!)!;
    expect(job.kind).toBe('rl');
    expect((job.payload as { experimental_config: Record<string, unknown> }).experimental_config).toMatchObject({ loss_fn: 'cispo', learning_rate: 1e-2, normalize_advantages: true });
    expect(fs.readdirSync(path.join(s.home, 'native-runs', id))).toEqual([]);
    // AdamW's moments after the step are kept beside the learner's checkpoint (one update per gradient step), for the
    // next optim_step to continue from.
    const learnerDir = s.store.checkpoints.byStep(s.store.nativeRuns.runById(id)!.learnerModelId, 1)!.path!;
    expect(decodeOptimizerState(fs.readFileSync(path.join(learnerDir, OPTIMIZER_STATE_FILE))).step).toBe(1);

    // The same groups measured again after the step: the optimizer step moved the policy.
    const again = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 2 })).body);
    const againResult = parse(ForwardBackwardResult, (await terminal(id, again)).result);
    expect(againResult.metrics.loss).not.toBe(fbResult.metrics.loss);
    // A measurement only: cancelled, so that no later optim_step applies it.
    const cancel = await s.call('POST', `/v1/training/runs/${id}/operations/${again.operation_id}:cancel`, { key, rawBody: '', headers: { 'content-type': 'application/json' } });
    expect(parse(NativeTrainingOperation, cancel.body).cancel_requested).toBe(true);

    // train() ends with save_weights_for_sampler; the published step serves a completion with logprobs by ART's name.
    const publish = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 3, checkpoint_name: 'step-1', ttl_seconds: null, publication: { mode: 'versioned_lora', model_alias: 'native-rl' },
    })).body);
    const published = parse(SamplerWeightsResult, (await terminal(id, publish)).result);
    expect([published.checkpoint.learner_version, published.lora]).toEqual([1, 'alice/p/native-rl:step1']);
    const completion = await post('/chat/completions', {
      model: 'wandb-artifact:///alice/p/native-rl:step1', messages: [{ role: 'user', content: 'Say something nice.' }], max_tokens: 4, temperature: 0, logprobs: true,
    });
    expect(completion.status, JSON.stringify(completion.body)).toBe(200);
    expect(completion.body.choices[0].logprobs.content.length).toBeGreaterThan(0);
    expect(completion.body.choices[0].logprobs.content[0].token).toMatch(/^token_id:\d+$/);

    // Groups whose rewards are all equal have no advantage: no gradient, yet the optim_step that train() always
    // sends after it still makes the step (weights unchanged), as a preview RL job with them would.
    const flat = groups.map((g) => ({ ...g, trajectories: g.trajectories.map((t) => ({ ...t, reward: 1 })) }));
    const flatFb = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, {
      ...fbBody, request_id: `fb-${hex()}`, sequence_id: 4, batch: { ...fbBody.batch, groups: flat.map(bundleOfGroup) },
    })).body);
    const flatResult = parse(ForwardBackwardResult, (await terminal(id, flatFb)).result);
    expect([flatResult.produced_gradient, flatResult.metrics.num_groups_trainable]).toEqual([false, 0]);
    const flatOptim = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/optim_step`, {
      request_id: `optim-${hex()}`, sequence_id: 5, optimizer: { learning_rate: 1e-2 },
    })).body);
    const flatOptimDone = await terminal(id, flatOptim);
    expect(flatOptimDone.op.status, JSON.stringify(flatOptimDone.op.error)).toBe('succeeded');
    const flatOptimResult = parse(OptimStepResult, flatOptimDone.result);
    expect([flatOptimResult.checkpoint.learner_version, flatOptimResult.metrics.gradient_steps]).toEqual([2, 0]);
    expect(flatOptimResult.contributing_forward_backward_operation_ids).toEqual([flatFb.operation_id]);
    expect(fs.readdirSync(path.join(s.home, 'native-runs', id))).toEqual([]);

    // forward of an RL batch: the measurement alone. The step without advantage left the weights of version 1, so
    // the first groups measure what they measured there; nothing is kept and no version is reserved.
    const forward = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward`, {
      request_id: `forward-${hex()}`, sequence_id: 6, batch: fbBody.batch, loss: fbBody.loss, collect_packing_shapes: false,
    })).body);
    expect([forward.kind, forward.learner_parent_version, forward.reserved_output_learner_version]).toEqual(['forward', 2, null]);
    const forwarded = parse(ForwardResult, (await terminal(id, forward)).result);
    expect(forwarded.metrics.loss).toBeCloseTo(againResult.metrics.loss, 5);
    expect(forwarded.packing.packed_sequences).toBe(againResult.packing.packed_sequences);
    expect(fs.readdirSync(path.join(s.home, 'native-runs', id))).toEqual([]);
    expect(parse(NativeTrainingRun, (await get(`/training/runs/${id}`)).body)).toMatchObject({ committed_learner_version: 2, next_sequence_id: 7 });
  }, 300_000);
});
