// The native training-runs API in ART's other client framings (docs/art.md "Framings"), replayed against a real
// server and training worker the way each client makes its SFT sequence: resolve → forward_backward (SFT) →
// optim_step → save weights for the sampler → chat completion on the published name → close, with a retried POST
// (one operation), a divergent replay (refused, nothing applied) and every answer checked as that client reads it
// (test/helpers/art-native-framing-models.ts):
// - N1 (client.py / native_training.py @ 235af098): each command wrapped as {request_id, sequence_id, command};
//   its ServerlessBackend trains through the preview API, so this is the sequence of code that calls
//   `backend.create_training_client(...)`;
// - N3 (client.py, backend.py @ 44cf4bbe): ServerlessBackend.train_sft's and train()'s own sequences, tokenized
//   client-side into token matrices (SFT: cross_entropy; RL: cispo with per-token advantages), on runs resolved
//   without a run_name.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import {
  artRlTokenMatrix, artSftTokenMatrix, N1ForwardBackwardResult, N1NativeTrainingOperation, N1NativeTrainingRun, n1OperationRef, N1OptimStepResult,
  N1SamplerWeightsResult, N3NativeTrainingRun, n3ClientOperation, n3ClientResult,
} from '../helpers/art-native-framing-models.js';

const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: DEMO_MODEL, dtype: 'bfloat16', lora_rank: 8, lora_target_modules: ['linear_fc1', 'linear_fc2', 'linear_proj', 'linear_qkv'] };
const optimizer = { learning_rate: 5e-3, beta1: 0.9, beta2: 0.99, eps: 1e-13, weight_decay: 0.1, grad_clip_norm: 0.1 };
const TERMINAL = ['succeeded', 'failed', 'cancelled'];

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await startDemoServer({ training: true });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

const post = (path: string, body?: unknown) =>
  s.call('POST', `/v1${path}`, { key, ...(body === undefined ? { rawBody: '', headers: { 'content-type': 'application/json' } } : { body }) });
const get = (path: string) => s.call('GET', `/v1${path}`, { key });
const body200 = (r: { status: number; body: unknown }): unknown => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};
const ok = <T>(r: { status: number; body: unknown }, schema: z.ZodType<T>): T => schema.parse(body200(r));
const register = async (name: string) => body200(await post('/preview/models', { entity: null, project: 'p', name, base_model: DEMO_MODEL, return_existing: true }));

async function servesWithLogprobs(artifact: string) {
  const completion = await post('/chat/completions', { model: `wandb-artifact:///${artifact}`, messages: [{ role: 'user', content: 'Hi?' }], max_tokens: 3, temperature: 0 });
  expect(completion.status, JSON.stringify(completion.body)).toBe(200);
  expect(completion.body.choices[0].logprobs.content[0].token).toMatch(/^token_id:\d+$/);
}

describe('native runs in client framing N1 (commands wrapped in `command`)', () => {
  type Op = z.output<typeof N1NativeTrainingOperation>;
  const trajectories = [
    { messages_and_choices: [{ role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'Paris' }], tools: null },
    { messages_and_choices: [{ role: 'user', content: 'What color is the sky?' }, { role: 'assistant', content: 'blue' }], tools: null },
  ];

  /** RemoteTrainingOperation._wait_terminal, then .result(): the identity may not change, the result is inline. */
  async function terminal(op: Op): Promise<Op> {
    const ref = n1OperationRef(op);
    return waitFor(async () => {
      const o = ok(await get(`/training/runs/${op.run_id}/operations/${op.operation_id}`), N1NativeTrainingOperation);
      expect(n1OperationRef(o)).toEqual(ref);
      return TERMINAL.includes(o.status) ? o : null;
    }, `N1 ${op.kind} #${op.sequence_id}`, 180_000, 100);
  }

  it('resolves, trains, publishes a served checkpoint and closes; retries are one operation, divergent replays refused', async () => {
    await register('n1-model');
    const wireSpec = { ...spec, optimizer: 'adamw' };
    const run = ok(await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'n1-model', spec: wireSpec }), N1NativeTrainingRun);
    // TrainingRuns.resolve raises unless run_name and spec come back as sent.
    expect([run.run_name, run.spec, run.status]).toEqual(['n1-model', wireSpec, 'open']);
    // Only N3 may resolve without a name; the same name in another framing (here N2's spec) is another client's run.
    const unnamed = await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec: wireSpec });
    expect([unnamed.status, unnamed.body.detail?.[0]?.loc]).toEqual([422, ['body', 'run_name']]);
    expect((await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'n1-model', spec })).status).toBe(409);
    const id = run.run_id;
    const wrap = (requestId: string, sequenceId: number, command: Record<string, unknown>) =>
      ({ request_id: requestId, sequence_id: sequenceId, command: { run_id: id, request_id: requestId, sequence_id: sequenceId, ...command } });

    const fbRequest = `fb-${hex()}`;
    const fbCommand = { batch: { kind: 'sft', trajectories, assistant_turns: 'all' }, loss: { name: 'cross_entropy', normalize_advantages: true, values: {} }, collect_packing_shapes: false, return_token_logprobs: true };
    const fb = ok(await post(`/training/runs/${id}/forward_backward`, wrap(fbRequest, 0, fbCommand)), N1NativeTrainingOperation);
    // _submit: same run, sequence, kind and the projected parent version, else "server admitted a divergent command".
    expect([fb.run_id, fb.sequence_id, fb.kind, fb.learner_parent_version, fb.reserved_output_learner_version]).toEqual([id, 0, 'forward_backward', 0, null]);
    n1OperationRef(fb);
    expect((await post(`/training/runs/${id}/forward_backward`, wrap(fbRequest, 0, fbCommand))).body.operation_id).toBe(fb.operation_id);
    const divergent = await post(`/training/runs/${id}/forward_backward`, wrap(fbRequest, 0, { ...fbCommand, batch: { ...fbCommand.batch, trajectories: trajectories.slice(0, 1) } }));
    expect(divergent.status).toBe(409);
    expect(divergent.body.detail).toMatch(/request_id .* another command/);
    const otherRun = await post(`/training/runs/${id}/forward_backward`, { ...wrap(`fb-${hex()}`, 1, fbCommand), command: { ...wrap('x', 1, fbCommand).command, run_id: 'another' } });
    expect(otherRun.status).toBe(400);
    const tokenized = await post(`/training/runs/${id}/forward_backward`, wrap(`fb-${hex()}`, 1, { ...fbCommand, batch: { kind: 'tokenized', datums: [] } }));
    expect([tokenized.status, tokenized.body.detail]).toEqual([501, expect.stringMatching(/tokenized batches/)]);
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);

    const fbDone = await terminal(fb);
    expect(fbDone.status, JSON.stringify(fbDone.error)).toBe('succeeded');
    const fbResult = N1ForwardBackwardResult.parse(fbDone.result);
    expect([fbResult.operation_id, fbResult.packing.trainable_assistant_tokens > 0]).toEqual([fb.operation_id, true]);

    const optim = ok(await post(`/training/runs/${id}/optim_step`, wrap(`optim-${hex()}`, 1, { optimizer })), N1NativeTrainingOperation);
    expect([optim.kind, optim.learner_parent_version, optim.reserved_output_learner_version]).toEqual(['optim_step', 0, 1]);
    const optimDone = await terminal(optim);
    expect(optimDone.status, JSON.stringify(optimDone.error)).toBe('succeeded');
    const optimResult = N1OptimStepResult.parse(optimDone.result);
    expect([optimResult.checkpoint.learner_version, optimDone.contributing_operation_ids]).toEqual([1, [fb.operation_id]]);

    const publish = ok(await post(`/training/runs/${id}/save_weights_for_sampler`, wrap(`publish-${hex()}`, 2, {
      checkpoint_name: 'step-1', ttl_seconds: null, publication: { mode: 'versioned_lora', model_alias: 'n1-model' },
    })), N1NativeTrainingOperation);
    expect(publish.kind).toBe('save_weights');
    n1OperationRef(publish);
    const published = N1SamplerWeightsResult.parse((await terminal(publish)).result);
    expect([published.checkpoint.learner_version, published.lora]).toEqual([1, 'alice/p/n1-model:step1']);
    await servesWithLogprobs(published.lora);

    // forward, save_state and load_state travel in N1's wrapping too (their results in N2's shapes: N1's contracts
    // for them are not in ART's stored source).
    const forward = ok(await post(`/training/runs/${id}/forward`, wrap(`forward-${hex()}`, 3, fbCommand)), N1NativeTrainingOperation);
    expect([forward.kind, forward.learner_parent_version, forward.reserved_output_learner_version]).toEqual(['forward', 1, null]);
    const forwardDone = await terminal(forward);
    expect(forwardDone.status, JSON.stringify(forwardDone.error)).toBe('succeeded');
    expect((forwardDone.result as { metrics: { loss: number } }).metrics.loss).toBeLessThan((fbResult.metrics as { loss: number }).loss);
    const save = ok(await post(`/training/runs/${id}/save_state`, wrap(`save-${hex()}`, 4, { checkpoint_name: 'v1', ttl_seconds: null })), N1NativeTrainingOperation);
    expect((await terminal(save)).status).toBe('succeeded');
    const load = ok(await post(`/training/runs/${id}/load_state`, wrap(`load-${hex()}`, 5, { checkpoint: 'v1', restore_optimizer: true })), N1NativeTrainingOperation);
    expect([load.kind, load.learner_parent_version, load.reserved_output_learner_version]).toEqual(['load_state', 1, 2]);
    expect((await terminal(load)).status).toBe('succeeded');

    const closed = ok(await post(`/training/runs/${id}:close`), N1NativeTrainingRun);
    expect(['closing', 'closed']).toContain(closed.status);
  }, 300_000);
});

describe('native runs in client framing N3 (frozen public wire, token matrices)', () => {
  type Op = ReturnType<typeof n3ClientOperation>;
  // What the tokenizer makes of two conversations: prompt tokens (labels −100), then the assistant's.
  const matrices = () => [
    artSftTokenMatrix('sft-0', [1, 40, 41, 42, 43, 90, 91, 92, 2], [-100, -100, -100, -100, -100, 90, 91, 92, 2]),
    artSftTokenMatrix('sft-1', [1, 50, 51, 52, 95, 96, 2], [-100, -100, -100, -100, 95, 96, 2]),
  ];
  const fbBody = (requestId: string, sequenceId: number, batchMatrices = matrices()) => ({
    request_id: requestId, sequence_id: sequenceId, batch: { kind: 'token_matrix', matrices: batchMatrices, routes: [] },
    loss: { name: 'cross_entropy', normalize_advantages: false }, collect_packing_shapes: false, retain_packed_input: false, return_token_logprobs: false,
  });

  /** RemoteTrainingOperation: poll the public operation through ART's adapter until terminal. */
  async function terminal(op: Op): Promise<Op> {
    return waitFor(async () => {
      const o = n3ClientOperation(body200(await get(`/training/runs/${op.run_id}/operations/${op.operation_id}`)));
      expect([o.run_id, o.sequence_id, o.kind, o.learner_parent_version, o.reserved_output_learner_version]).toEqual(
        [op.run_id, op.sequence_id, op.kind, op.learner_parent_version, op.reserved_output_learner_version],
      );
      return TERMINAL.includes(o.status) ? o : null;
    }, `N3 ${op.kind} #${op.sequence_id}`, 180_000, 100);
  }
  const submit = async (path: string, body: unknown) => n3ClientOperation(body200(await post(path, body)));

  it("runs ServerlessBackend.train_sft's sequence on an anonymous run: trains, publishes a served generation, closes", async () => {
    await register('n3-model');
    // training_client(): a fresh resolve request_id per client, no run_name, sorted targets, seed from lora_config.
    const wireSpec = { ...spec, seed: null };
    const resolveBody = { request_id: `resolve-${hex()}`, spec: wireSpec, initial_state: null };
    const run = ok(await post('/training/runs:resolve', resolveBody), N3NativeTrainingRun);
    expect([run.run_name, run.spec, run.status]).toEqual([null, wireSpec, 'open']);
    // The client's retry finds the same run; another client (another request_id) gets its own.
    expect((await post('/training/runs:resolve', resolveBody)).body.run_id).toBe(run.run_id);
    const other = ok(await post('/training/runs:resolve', { ...resolveBody, request_id: `resolve-${hex()}` }), N3NativeTrainingRun);
    expect(other.run_id).not.toBe(run.run_id);
    // A seed is honoured (the next test); one that is no integer is refused as the client's pydantic would (422).
    const seeded = ok(await post('/training/runs:resolve', { ...resolveBody, request_id: `resolve-${hex()}`, spec: { ...wireSpec, seed: 3407 } }), N3NativeTrainingRun);
    expect(seeded.spec).toEqual({ ...wireSpec, seed: 3407 });
    const fractional = await post('/training/runs:resolve', { ...resolveBody, request_id: `resolve-${hex()}`, spec: { ...wireSpec, seed: 1.5 } });
    expect([fractional.status, fractional.body.detail?.[0]?.loc]).toEqual([422, ['body', 'spec', 'seed']]);
    const id = run.run_id;

    const fbRequest = `fb-${hex()}`;
    const fb = await submit(`/training/runs/${id}/forward_backward`, fbBody(fbRequest, 0));
    expect([fb.sequence_id, fb.kind, fb.learner_parent_version, fb.reserved_output_learner_version]).toEqual([0, 'forward_backward', 0, null]);
    expect((await post(`/training/runs/${id}/forward_backward`, fbBody(fbRequest, 0))).body.operation_id).toBe(fb.operation_id);
    const divergent = await post(`/training/runs/${id}/forward_backward`, fbBody(fbRequest, 0, matrices().slice(0, 1)));
    expect([divergent.status, divergent.body.detail]).toEqual([409, expect.stringMatching(/request_id .* another command/)]);
    // An RL loss reads its own rows: SFT matrices are malformed for it (422), and nothing is stored.
    const rl = await post(`/training/runs/${id}/forward_backward`, { ...fbBody(`fb-${hex()}`, 1), loss: { name: 'cispo', normalize_advantages: false, clip_low_threshold: 0, clip_high_threshold: 5 } });
    expect([rl.status, rl.body.detail?.[0]?.msg]).toEqual([422, expect.stringMatching(/"sft-0" is missing rows behavior_logprobs, advantages/)]);
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(1);

    const fbDone = await terminal(fb);
    expect(fbDone.status, JSON.stringify(fbDone.error)).toBe('succeeded');
    const fbResult = fbDone.result as { produced_gradient: boolean; loss: { value: number }; training: { accepted_trainable_tokens: number } };
    // Trained tokens: every target whose label is not −100 (4 + 3).
    expect([fbResult.produced_gradient, fbResult.training.accepted_trainable_tokens]).toEqual([true, 7]);
    // TrainingRuns.result(): the bare public summary, through the same adapter.
    expect(n3ClientResult(id, (await get(`/training/runs/${id}/operations/${fb.operation_id}/result`)).body)).toEqual(fbDone.result);

    const optim = await submit(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 1, optimizer });
    expect([optim.learner_parent_version, optim.reserved_output_learner_version]).toEqual([0, 1]);
    const optimDone = await terminal(optim);
    expect(optimDone.status, JSON.stringify(optimDone.error)).toBe('succeeded');
    expect(optimDone.result).toMatchObject({ checkpoint: { run_id: id, learner_version: 1 }, contributing_forward_backward_operation_ids: [fb.operation_id] });

    // The same tokens measured again: the step learned them.
    const again = await terminal(await submit(`/training/runs/${id}/forward_backward`, fbBody(`fb-${hex()}`, 2)));
    expect((again.result as { loss: { value: number } }).loss.value).toBeLessThan(fbResult.loss.value);

    const publish = await submit(`/training/runs/${id}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 3, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'saved_generation', model_alias: 'n3-model' },
    });
    const published = (await terminal(publish)).result as { generation_id: string; target: string; checkpoint: { learner_version: number } };
    // train_sft returns generation_id as artifact_name: it must be the served name.
    expect([published.generation_id, published.target, published.checkpoint.learner_version]).toEqual(['alice/p/n3-model:step1', 'saved_generation', 1]);
    await servesWithLogprobs(published.generation_id);

    // Results are kept until released; then the operation has no summary and the result route 404s.
    expect((await post(`/training/runs/${id}/operations/${fb.operation_id}/result:release`, { request_id: `release-${hex()}` })).status).toBe(200);
    expect(n3ClientOperation((await get(`/training/runs/${id}/operations/${fb.operation_id}`)).body).result_available).toBe(false);
    expect((await get(`/training/runs/${id}/operations/${fb.operation_id}/result`)).status).toBe(404);

    // forward: the same measurement without a gradient, at the same weights; N3's states are archives (501).
    const forward = await terminal(await submit(`/training/runs/${id}/forward`, fbBody(`forward-${hex()}`, 4)));
    expect([forward.kind, forward.status, forward.reserved_output_learner_version]).toEqual(['forward', 'succeeded', null]);
    // (N3's forward summary carries no loss object: the measurement is in its metrics.)
    expect((forward.result as { metrics: { loss: number } }).metrics.loss).toBeCloseTo((again.result as { loss: { value: number } }).loss.value, 5);
    const save = await post(`/training/runs/${id}/save_state`, { request_id: `save-${hex()}`, sequence_id: 5, checkpoint_name: 'v1', ttl_seconds: null });
    expect([save.status, save.body.detail]).toEqual([501, expect.stringMatching(/save_state is not implemented by this server for client N3/)]);

    const closed = ok(await post(`/training/runs/${id}:close`, { request_id: `close-${hex()}` }), N3NativeTrainingRun);
    expect([closed.run_name, ['closing', 'closed'].includes(closed.status)]).toEqual([null, true]);
    expect((await post(`/training/runs/${other.run_id}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
    expect((await post(`/training/runs/${seeded.run_id}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
  }, 300_000);

  it("spec.seed seeds a run's fresh adapters: one seed trains alike (null is seed 0), another seed differently", async () => {
    await register('n3-seeds');
    /** One SFT step from the base on a fresh run with this seed, then the loss measured at the trained weights. */
    const lossAfterOneStep = async (seed: number | null) => {
      const run = ok(await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec: { ...spec, seed }, initial_state: null }), N3NativeTrainingRun);
      const id = run.run_id;
      expect((await terminal(await submit(`/training/runs/${id}/forward_backward`, fbBody(`fb-${hex()}`, 0)))).status).toBe('succeeded');
      const optim = await terminal(await submit(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 1, optimizer }));
      expect(optim.status, JSON.stringify(optim.error)).toBe('succeeded');
      const forward = await terminal(await submit(`/training/runs/${id}/forward`, fbBody(`forward-${hex()}`, 2)));
      expect(forward.status, JSON.stringify(forward.error)).toBe('succeeded');
      expect((await post(`/training/runs/${id}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
      return (forward.result as { metrics: { loss: number } }).metrics.loss;
    };
    const [unseeded, zero, a, again, b] = [await lossAfterOneStep(null), await lossAfterOneStep(0), await lossAfterOneStep(3407), await lossAfterOneStep(3407), await lossAfterOneStep(2 ** 32 + 3407)];
    expect(Math.abs(zero - unseeded)).toBeLessThan(1e-6);
    expect(Math.abs(again - a)).toBeLessThan(1e-6);
    // Different initial A matrices take the first step elsewhere.
    expect(Math.abs(a - unseeded)).toBeGreaterThan(1e-4);
    // The trainer's generator takes the seed modulo 2^32.
    expect(Math.abs(b - a)).toBeLessThan(1e-6);
  }, 300_000);

  it('initial_state starts a run from a checkpoint: by checkpoint_id with its moments (training on as the first run would), or by served name; refusals name why', async () => {
    await register('n3-init');
    const resolve = async (initial: unknown, runSpec: Record<string, unknown> = { ...spec, seed: null }) =>
      post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec: runSpec, initial_state: initial });
    const fresh = async (initial: unknown) => ok(await resolve(initial), N3NativeTrainingRun).run_id;
    const succeeded = async (path: string, body: unknown) => {
      const done = await terminal(await submit(path, body));
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
      return done;
    };
    const measure = async (id: string, sequenceId: number) => ((await succeeded(`/training/runs/${id}/forward`, fbBody(`forward-${hex()}`, sequenceId))).result as { metrics: { loss: number } }).metrics.loss;
    const trainStep = async (id: string, sequenceId: number) => {
      await succeeded(`/training/runs/${id}/forward_backward`, fbBody(`fb-${hex()}`, sequenceId));
      return (await succeeded(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: sequenceId + 1, optimizer })).result as { checkpoint: { checkpoint_id: string; learner_version: number } };
    };

    // The first run: one step (learner version 1), measured, published as n3-init:step1.
    const first = await fresh(null);
    const base = await measure(first, 0);
    const step1 = await trainStep(first, 1);
    const afterStep1 = await measure(first, 3);
    expect(afterStep1).toBeLessThan(base - 1e-3);
    const published = (await succeeded(`/training/runs/${first}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 4, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'saved_generation', model_alias: 'n3-init' },
    })).result as { generation_id: string };

    // A run from the first run's version 1 with its moments: its version 0 measures as that version, and its next
    // step lands where the first run's second step does (same weights, same AdamW moments, same batch).
    const continued = await fresh({ source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: true });
    expect(Math.abs((await measure(continued, 0)) - afterStep1)).toBeLessThan(1e-6);
    await trainStep(continued, 1);
    await trainStep(first, 5);
    const [firstStep2, continuedStep1] = [await measure(first, 7), await measure(continued, 3)];
    expect(Math.abs(continuedStep1 - firstStep2), `${continuedStep1} vs ${firstStep2}`).toBeLessThan(1e-5);
    // Without the moments the same step is a fresh AdamW's, which moves elsewhere.
    const freshMoments = await fresh({ source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: false });
    await trainStep(freshMoments, 0);
    expect(Math.abs((await measure(freshMoments, 2)) - firstStep2)).toBeGreaterThan(1e-4);

    // By served name (train()'s artifact_name, with :vN as W&B names versions); a publication holds no moments.
    for (const artifact of [published.generation_id, 'alice/p/n3-init:v1', `wandb-artifact:///${published.generation_id}`]) {
      const byName = await fresh({ source: { kind: 'wandb_artifact', artifact }, restore_optimizer: false });
      expect(Math.abs((await measure(byName, 0)) - afterStep1), artifact).toBeLessThan(1e-6);
    }
    const withMoments = await resolve({ source: { kind: 'wandb_artifact', artifact: published.generation_id }, restore_optimizer: true });
    expect([withMoments.status, withMoments.body.detail]).toEqual([409, expect.stringMatching(/carries no optimizer moments/)]);

    // Deleting a run that started from a checkpoint leaves the checkpoint: a later run still starts from it.
    expect((await post(`/training/runs/${continued}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
    await waitFor(async () => (await get(`/training/runs/${continued}`)).body.status === 'closed', 'the run to close', 30_000, 50);
    expect((await s.call('DELETE', `/v1/training/runs/${continued}`, { key })).status).toBe(200);
    const again = await fresh({ source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: false });
    expect(Math.abs((await measure(again, 0)) - afterStep1)).toBeLessThan(1e-6);
    // The first run has committed version 2 since: version 1 kept its adapter, its moments went (only a run's
    // committed version keeps them).
    const superseded = await resolve({ source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: true });
    expect([superseded.status, superseded.body.detail]).toEqual([409, expect.stringMatching(/carries no optimizer moments/)]);

    // Refusals, nothing made: unknown ids and steps (404), another entity's checkpoint (404), a served name that is
    // none (422), another rank (409), a malformed initial_state (422).
    const refusals: [unknown, Record<string, unknown> | undefined, number, RegExp][] = [
      [{ source: { kind: 'service_checkpoint', checkpoint_id: 'no-such-checkpoint' }, restore_optimizer: false }, undefined, 404, /checkpoint no-such-checkpoint not found/],
      [{ source: { kind: 'wandb_artifact', artifact: 'alice/p/n3-init:step9' }, restore_optimizer: false }, undefined, 404, /no checkpoint at step 9/],
      [{ source: { kind: 'wandb_artifact', artifact: 'bob/p/n3-init:step1' }, restore_optimizer: false }, undefined, 404, /not found/],
      [{ source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: false }, { ...spec, lora_rank: 4, seed: null }, 409, /rank-8 adapter .* rank 4/],
    ];
    for (const [initial, runSpec, status, message] of refusals) {
      const r = await resolve(initial, runSpec);
      expect([r.status, r.body.detail], JSON.stringify(initial)).toEqual([status, expect.stringMatching(message)]);
    }
    const notServed = await resolve({ source: { kind: 'wandb_artifact', artifact: 'just-a-name' }, restore_optimizer: false });
    expect([notServed.status, notServed.body.detail?.[0]?.loc]).toEqual([422, ['body', 'initial_state', 'source', 'artifact']]);
    const malformed = await resolve({ source: { kind: 'service_checkpoint' }, restore_optimizer: false });
    expect([malformed.status, malformed.body.detail?.[0]?.loc]).toEqual([422, ['body', 'initial_state', 'source', 'checkpoint_id']]);
    const bobs = await s.call('POST', '/v1/training/runs:resolve', {
      key: s.key('bob'), body: { request_id: `resolve-${hex()}`, spec: { ...spec, seed: null }, initial_state: { source: { kind: 'service_checkpoint', checkpoint_id: step1.checkpoint.checkpoint_id }, restore_optimizer: false } },
    });
    expect([bobs.status, bobs.body.detail]).toEqual([404, expect.stringMatching(/not found/)]);
  }, 400_000);

  it('a second anonymous run on the same model: learner versions restart at 1, the served names continue the model\'s steps, and generation_id names the new weights', async () => {
    await register('n3-twice');
    const wireSpec = { ...spec, seed: null };
    /** train_sft() once: its own fresh run, one SFT step, one publication to n3-twice. */
    const trainOnce = async () => {
      const run = ok(await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec: wireSpec, initial_state: null }), N3NativeTrainingRun);
      const id = run.run_id;
      expect((await terminal(await submit(`/training/runs/${id}/forward_backward`, fbBody(`fb-${hex()}`, 0)))).status).toBe('succeeded');
      const optim = await terminal(await submit(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 1, optimizer }));
      expect(optim.status, JSON.stringify(optim.error)).toBe('succeeded');
      const publish = await terminal(await submit(`/training/runs/${id}/save_weights_for_sampler`, {
        request_id: `publish-${hex()}`, sequence_id: 2, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'saved_generation', model_alias: 'n3-twice' },
      }));
      return publish.result as { generation_id: string; checkpoint: { learner_version: number; checkpoint_id: string } };
    };
    const first = await trainOnce();
    const second = await trainOnce();
    // The mapping (docs/art.md, "N3 runs start from the base model"): train_sft()'s step is the run's learner
    // version, 1 both times; its artifact_name (generation_id) is the served name, which continues the model's
    // steps, so the second script's artifact resolves its own weights and never the first's.
    expect([first.checkpoint.learner_version, first.generation_id]).toEqual([1, 'alice/p/n3-twice:step1']);
    expect([second.checkpoint.learner_version, second.generation_id]).toEqual([1, 'alice/p/n3-twice:step2']);
    const model = (await post('/preview/models', { entity: null, project: 'p', name: 'n3-twice', base_model: DEMO_MODEL, return_existing: true })).body as { id: string };
    const steps = (await get(`/preview/models/${model.id}/checkpoints?order=asc`)).body as { data: { step: number; id: string }[] };
    expect(steps.data.map((c) => c.step)).toEqual([1, 2]);
    expect(new Set(steps.data.map((c) => c.id)).size).toBe(2);
    // get_step() (the model's latest) is what ART's serverless inference names: step 2, the second run's weights.
    expect(steps.data[steps.data.length - 1].step).toBe(Number(second.generation_id.split(':step')[1]));
    for (const published of [first, second]) await servesWithLogprobs(published.generation_id);
  }, 240_000);

  it("runs ServerlessBackend.train()'s RL sequence (CISPO token matrices): trains, publishes a served generation; malformed rows are a 422", async () => {
    await register('n3-rl');
    const run = ok(await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec: { ...spec, seed: null }, initial_state: null }), N3NativeTrainingRun);
    const id = run.run_id;
    // _lower_rl_batch: one prompt, two rollouts rewarded 1 and 0 (advantages ±1 after ART's scaling), their sampled
    // tokens' logprobs as behaviour logprobs, policy_version 0 where trained.
    const rlMatrices = () => [
      artRlTokenMatrix('rollout-0', [1, 40, 41, 42, 90, 91, 2], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, -1.2, -0.8, -0.5], 1, { versions: [-1, -1, -1, -1, 0, 0, 0] }),
      artRlTokenMatrix('rollout-1', [1, 40, 41, 42, 95, 96, 97, 2], [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, -2, -1.5, -1, -0.7], -1, { versions: [-1, -1, -1, -1, 0, 0, 0, 0] }),
    ];
    // train(): loss cispo, clip thresholds 1 - (epsilon ?? 1) and 1 + (epsilon_high ?? 4), advantages already normalized.
    const rlBody = (requestId: string, sequenceId: number, batchMatrices: unknown[] = rlMatrices()) => ({
      request_id: requestId, sequence_id: sequenceId, batch: { kind: 'token_matrix', matrices: batchMatrices, routes: [] },
      loss: { name: 'cispo', normalize_advantages: false, clip_low_threshold: 0, clip_high_threshold: 5 },
      collect_packing_shapes: false, retain_packed_input: false, return_token_logprobs: false,
    });

    // A malformed matrix (its advantages row one token short) is refused before anything is stored.
    const bad = rlMatrices();
    bad[1].rows = bad[1].rows.map((r) => ((r as { name: string }).name === 'advantages' ? { ...(r as object), shape: [7, 1] } : r));
    const refused = await post(`/training/runs/${id}/forward_backward`, rlBody(`fb-${hex()}`, 0, bad));
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.detail[0]).toMatchObject({ loc: ['body', 'batch', 'matrices', 1, 'rows', 3], msg: expect.stringMatching(/"rollout-1".*advantages/) });
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(0);

    const fbRequest = `fb-${hex()}`;
    const fb = await submit(`/training/runs/${id}/forward_backward`, rlBody(fbRequest, 0));
    expect((await post(`/training/runs/${id}/forward_backward`, rlBody(fbRequest, 0))).body.operation_id).toBe(fb.operation_id);
    const fbDone = await terminal(fb);
    expect(fbDone.status, JSON.stringify(fbDone.error)).toBe('succeeded');
    const fbResult = fbDone.result as { produced_gradient: boolean; loss: { contract_id: string; value: number }; training: { accepted_trainable_tokens: number } };
    // Trained: the positions with an advantage (3 + 4); train() reads loss.value and the accepted tokens.
    expect([fbResult.produced_gradient, fbResult.training.accepted_trainable_tokens, fbResult.loss.contract_id]).toEqual([true, 7, 'cispo_v1']);
    expect(Number.isFinite(fbResult.loss.value) && fbResult.loss.value !== 0).toBe(true);
    expect(n3ClientResult(id, (await get(`/training/runs/${id}/operations/${fb.operation_id}/result`)).body)).toEqual(fbDone.result);

    const optimDone = await terminal(await submit(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 1, optimizer }));
    expect(optimDone.status, JSON.stringify(optimDone.error)).toBe('succeeded');
    expect(optimDone.result).toMatchObject({ checkpoint: { run_id: id, learner_version: 1 }, contributing_forward_backward_operation_ids: [fb.operation_id] });
    const optimMetrics = (optimDone.result as { metrics: Record<string, number> }).metrics;
    expect(optimMetrics.gradient_steps).toBe(1);
    expect(optimMetrics.grad_norm).toBeGreaterThan(0);
    // The same batch measured at the new weights: the step changed the policy.
    const again = await terminal(await submit(`/training/runs/${id}/forward_backward`, rlBody(`fb-${hex()}`, 2)));
    expect((again.result as { loss: { value: number } }).loss.value).not.toBeCloseTo(fbResult.loss.value, 6);

    const publish = await submit(`/training/runs/${id}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 3, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'saved_generation', model_alias: 'n3-rl' },
    });
    const published = (await terminal(publish)).result as { generation_id: string; checkpoint: { learner_version: number } };
    // train() returns generation_id as artifact_name: the served name.
    expect([published.generation_id, published.checkpoint.learner_version]).toEqual(['alice/p/n3-rl:step1', 1]);
    await servesWithLogprobs(published.generation_id);

    // Only the trainer knows the vocabulary: an id outside it fails the operation, naming it.
    const outside = rlMatrices();
    const ids = outside[0].rows[0] as { values: { data: number[] } };
    ids.values.data = [1, 40, 41, 42, 90, 91, 9_999_999];
    (outside[0].rows[1] as { values: { data: number[] } }).values.data = [40, 41, 42, 90, 91, 9_999_999, 0];
    const failed = await terminal(await submit(`/training/runs/${id}/forward_backward`, rlBody(`fb-${hex()}`, 4, outside)));
    expect([failed.status, failed.error?.code]).toEqual(['failed', expect.stringMatching(/token id 9999999 is outside the vocabulary/)]);
    expect((await post(`/training/runs/${id}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
  }, 300_000);
});
