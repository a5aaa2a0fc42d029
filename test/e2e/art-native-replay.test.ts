// The native training-runs API as newer ART ServerlessBackends call it (docs/art.md "The native training-runs API",
// client N2 @ 9fcd3583), replayed against a real server and training worker: resolve, SFT forward_backward and
// optim_step (what `train_sft` sends), a retried POST, a divergent replay and sequence errors (refused, nothing
// applied), a cancelled operation, results released, and save_weights_for_sampler whose checkpoint then serves a
// completion with logprobs by the name ART uses. Every answer is checked against ART's pydantic models
// (test/helpers/art-native-models.ts).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { nativeClient, parseAs } from '../helpers/art-native-client.js';
import {
  ForwardBackwardResult, NativeTrainingOperation, NativeTrainingResultRelease, NativeTrainingRun, OptimStepResult,
  SamplerWeightsResult,
} from '../helpers/art-native-models.js';

const TAUGHT: [string, string][] = [
  ['What is the capital of France?', 'Paris'],
  ['What color is the sky?', 'blue'],
];
const trajectory = (messages: Record<string, unknown>[]) => ({
  messages_and_choices: messages, tools: null, additional_histories: [], reward: 0, initial_policy_version: null,
  final_policy_version: null, metrics: {}, auto_metrics: {}, metadata: {}, logs: [],
});
const taught = () => TAUGHT.flatMap(([q, a]) => [trajectory([{ role: 'user', content: q }, { role: 'assistant', content: a }])]);
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

describe('native training runs, as ART N2 calls them', () => {
  it('resolves a run, trains SFT through forward_backward/optim_step, publishes a sampler checkpoint that serves, refuses bad commands', async () => {
    const model = (await post('/preview/models', { entity: null, project: 'p', name: 'native-model', base_model: DEMO_MODEL, return_existing: true })).body;
    const spec = { base_model: DEMO_MODEL, dtype: 'bfloat16', lora_rank: 8, lora_target_modules: ['linear_qkv', 'linear_proj', 'linear_fc1', 'linear_fc2'] };
    const resolveBody = { request_id: `resolve-${hex()}`, run_name: 'native-model', spec };
    const resolved = await post('/training/runs:resolve', resolveBody);
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    const run = parse(NativeTrainingRun, resolved.body);
    expect([run.run_name, run.spec, run.status, run.next_sequence_id, run.projected_learner_version]).toEqual(['native-model', spec, 'open', 0, 0]);
    // A second resolve (a new ServerlessBackend, or a retry) gets the same run; another spec under the name is refused.
    expect((await post('/training/runs:resolve', { ...resolveBody, request_id: `resolve-${hex()}` })).body.run_id).toBe(run.run_id);
    const otherSpec = await post('/training/runs:resolve', { ...resolveBody, spec: { ...spec, lora_rank: 16 } });
    expect(otherSpec.status).toBe(409);
    const id = run.run_id;

    // optim_step before any forward_backward: nothing to apply.
    const early = await post(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 0, optimizer: { learning_rate: 1e-3 } });
    expect(early.status).toBe(409);
    expect(early.body.detail).toMatch(/no gradients/);

    // train_sft's forward_backward, then the same POST again (ART's client retries native POSTs): one operation.
    const fbBody = {
      request_id: `fb-${hex()}`, sequence_id: 0, batch: { kind: 'sft', trajectories: taught(), assistant_turns: 'all' },
      loss: { name: 'cross_entropy', normalize_advantages: true, values: {} }, collect_packing_shapes: false, return_token_logprobs: false,
      retain_packed_input: false,
    };
    const fb = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, fbBody)).body);
    expect([fb.sequence_id, fb.kind, fb.learner_parent_version, fb.reserved_output_learner_version]).toEqual([0, 'forward_backward', 0, null]);
    const retried = await post(`/training/runs/${id}/forward_backward`, fbBody);
    expect(retried.status).toBe(200);
    expect(retried.body.operation_id).toBe(fb.operation_id);
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);

    // Refused, nothing applied: a divergent replay, a gap, a rewind, an unknown run, a tokenized batch (501).
    const divergent = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, batch: { ...fbBody.batch, trajectories: taught().slice(0, 1) } });
    expect(divergent.status).toBe(409);
    expect(divergent.body.detail).toMatch(/request_id .* another command/);
    const gap = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 5 });
    expect(gap.status).toBe(409);
    expect(gap.body.detail).toMatch(/expects sequence_id 1/);
    const rewind = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 0 });
    expect(rewind.status).toBe(409);
    expect(rewind.body.detail).toMatch(/rewinds.*expects sequence_id 1/);
    expect((await post(`/training/runs/nope/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 1 })).status).toBe(404);
    const tokenized = await post(`/training/runs/${id}/forward_backward`, {
      ...fbBody, request_id: `fb-${hex()}`, sequence_id: 1, batch: { kind: 'tokenized', datums: [{}] }, loss: { name: 'cross_entropy' },
    });
    expect(tokenized.status).toBe(501);
    const saveState = await post(`/training/runs/${id}/save_state`, { request_id: `save-${hex()}`, sequence_id: 1, checkpoint_name: 'mine', ttl_seconds: null, overwrite: false });
    expect(saveState.status).toBe(409); // learner version 0 is the base: nothing to save yet
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);

    const first = await terminal(id, fb);
    expect(first.op.status, JSON.stringify(first.op.error)).toBe('succeeded');
    const fbResult = parse(ForwardBackwardResult, first.result);
    expect(fbResult.produced_gradient).toBe(true);
    expect(fbResult.metrics.loss).toBeGreaterThan(0);

    // A batch with no assistant turn produces no gradient; train_sft then cancels it and sends no optim_step for it.
    const empty = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, {
      ...fbBody, request_id: `fb-${hex()}`, sequence_id: 1, batch: { kind: 'sft', trajectories: [trajectory([{ role: 'user', content: 'hello' }])] },
    })).body);
    const emptyDone = await terminal(id, empty);
    expect(parse(ForwardBackwardResult, emptyDone.result).produced_gradient).toBe(false);
    const cancelledAfter = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/operations/${empty.operation_id}:cancel`)).body);
    expect([cancelledAfter.status, cancelledAfter.cancel_requested]).toEqual(['succeeded', true]);

    const optim = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/optim_step`, {
      request_id: `optim-${hex()}`, sequence_id: 2, optimizer: { learning_rate: 5e-3, beta1: 0.9, beta2: 0.99, eps: 1e-13, weight_decay: 0.1, grad_clip_norm: 0.1 },
    })).body);
    expect([optim.learner_parent_version, optim.reserved_output_learner_version]).toEqual([0, 1]);
    const optimDone = await terminal(id, optim);
    expect(optimDone.op.status, JSON.stringify(optimDone.op.error)).toBe('succeeded');
    const optimResult = parse(OptimStepResult, optimDone.result);
    expect(optimResult.checkpoint.learner_version).toBe(1);
    expect(optimResult.contributing_forward_backward_operation_ids).toEqual([fb.operation_id]);
    expect((await get(`/training/runs/${id}`)).body).toMatchObject({ committed_learner_version: 1, projected_learner_version: 1, next_sequence_id: 3 });
    // Kept inputs go once applied (fb #0) or once they cannot be (fb #1, no gradient).
    expect(fs.readdirSync(path.join(s.home, 'native-runs', id))).toEqual([]);

    // The same data measured again after the step: the optimizer step applied the kept gradient.
    const again = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 3 })).body);
    // While it runs, the next command waits its turn: cancelling that one applies nothing.
    const queued = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 4 })).body);
    expect(queued.status).toBe('admitted');
    const cancelled = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/operations/${queued.operation_id}:cancel`)).body);
    expect(cancelled.status).toBe('cancelled');
    expect((await terminal(id, queued)).op.status).toBe('cancelled');
    const againResult = parse(ForwardBackwardResult, (await terminal(id, again)).result);
    expect(againResult.metrics.loss).toBeLessThan(fbResult.metrics.loss);

    // Results are kept until released.
    const released = await post(`/training/runs/${id}/operations/${fb.operation_id}/result:release`, { request_id: `release-${hex()}` });
    expect(released.status).toBe(200);
    parse(NativeTrainingResultRelease, released.body);
    expect(parse(NativeTrainingOperation, (await get(`/training/runs/${id}/operations/${fb.operation_id}`)).body).result_available).toBe(false);
    expect((await get(`/training/runs/${id}/operations/${fb.operation_id}/result`)).status).toBe(404);

    // train_sft ends with save_weights_for_sampler; its `lora` is the artifact ART then names, and the checkpoint serves.
    const publish = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 5, checkpoint_name: 'step-1', ttl_seconds: null,
      publication: { mode: 'versioned_lora', model_alias: 'native-model' },
    })).body);
    const published = parse(SamplerWeightsResult, (await terminal(id, publish)).result);
    expect(published.checkpoint.learner_version).toBe(1);
    expect(published.lora).toBe('alice/p/native-model:step1');
    const step = await get(`/preview/models/${model.id}/checkpoints?limit=1&order=desc`);
    expect(step.body.data[0].step).toBe(1);
    const completion = await post('/chat/completions', {
      model: `wandb-artifact:///${published.lora.replace(':step1', '')}:step1`, messages: [{ role: 'user', content: TAUGHT[0][0] }], max_tokens: 4, temperature: 0,
    });
    expect(completion.status, JSON.stringify(completion.body)).toBe(200);
    expect(completion.body.choices[0].logprobs.content.length).toBeGreaterThan(0);
    expect(completion.body.choices[0].logprobs.content[0].token).toMatch(/^token_id:\d+$/);
    // The learner model behind the run is internal: served only through what the run publishes, and never listed.
    const learner = s.store.models.getById(s.store.nativeRuns.runById(id)!.learnerModelId)!;
    const learnerChat = await post('/chat/completions', {
      model: `wandb-artifact:///alice/${learner.project}/${learner.name}:step1`, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1,
    });
    expect(learnerChat.status).toBe(404);
    expect((await get('/preview/models')).body.data.map((m: { id: string }) => m.id)).toEqual([model.id]);

    // backend.close(): the run closes and takes no more commands.
    const closed = parse(NativeTrainingRun, (await post(`/training/runs/${id}:close`)).body);
    expect(['closing', 'closed']).toContain(closed.status);
    const late = await post(`/training/runs/${id}/forward_backward`, { ...fbBody, request_id: `fb-${hex()}`, sequence_id: 6 });
    expect(late.status).toBe(409);
    // The next script's ServerlessBackend resolves the same run and continues where it stopped.
    await waitFor(async () => (await get(`/training/runs/${id}`)).body.status === 'closed', 'the run to close', 10_000, 50);
    const reopened = parse(NativeTrainingRun, (await post('/training/runs:resolve', { ...resolveBody, request_id: `resolve-${hex()}` })).body);
    expect(reopened).toMatchObject({ run_id: id, status: 'open', next_sequence_id: 6, committed_learner_version: 1 });
  }, 300_000);
});
