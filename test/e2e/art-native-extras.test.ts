// Native runs beyond train_sft's default path (docs/art.md "The native training-runs API"), through real HTTP and a
// real training worker: SFT batches with assistant_turns "last" train only each trajectory's final assistant turn;
// the publication modes Hearth cannot honour are refused with nothing stored; DELETE /v1/training/runs/{id} removes a
// run, its learner and its files (409 with nothing deleted while an operation is in flight, 404 for another entity)
// while what it published keeps serving; deleting a model takes the runs that published only into it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { parseAs } from '../helpers/art-native-client.js';
import { startDemoServer } from '../helpers/demo-server.js';
import { tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { ForwardBackwardResult, NativeTrainingOperation, NativeTrainingResult, OptimStepResult, SamplerWeightsResult, SaveStateResult } from '../helpers/art-native-models.js';

const BASE = 'hearth/tiny-random-llama';
const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: BASE, dtype: 'bfloat16', lora_rank: 4, lora_target_modules: ['linear_qkv', 'linear_proj'] };
const loss = { name: 'cross_entropy', normalize_advantages: true, values: {} };
const optimizer = { learning_rate: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, grad_clip_norm: 1 };
// Two assistant turns; the second one is a Choice, as ART's trajectories hold the sampled ones.
const twoTurns = {
  messages_and_choices: [
    { role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'Paris, a large city on the Seine.' },
    { role: 'user', content: 'And of Italy?' }, { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'Rome' }, logprobs: null },
  ],
  tools: null,
};

// The busy-run checks hold the training worker at its job's load (src/runtime/fault-points.ts) while they ask for a
// delete, so that the operation is still in flight whatever the machine's speed.
const faultDir = tempHome('hearth-native-extras-faults-');
const holdTrainingJobs = () => {
  const arm = path.join(faultDir, 'training-model-load');
  fs.writeFileSync(arm, '');
  return () => {
    fs.rmSync(arm, { force: true });
    fs.rmSync(`${arm}.reached`, { force: true });
  };
};

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await startDemoServer({ training: true, workerEnv: { HEARTH_FAULT_DIR: faultDir } });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());
const post = (p: string, body?: unknown) => s.call('POST', `/v1${p}`, { key, body });
const get = (p: string) => s.call('GET', `/v1${p}`, { key });

const parse = parseAs;

/** A resolved run and ART's client bookkeeping for it: each command takes the run's next sequence_id. */
async function resolveRun(runName: string) {
  const id: string = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: runName, spec })).body.run_id;
  let seq = 0;
  const submit = async (kind: string, body: Record<string, unknown>) => {
    const r = await post(`/training/runs/${id}/${kind}`, { request_id: `${kind}-${hex()}`, sequence_id: seq, ...body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    seq++;
    return parse(NativeTrainingOperation, r.body);
  };
  const result = async <T extends z.ZodType>(op: { operation_id: string; kind: string }, schema: T): Promise<z.output<T>> => {
    const done = await waitFor(async () => {
      const o = (await get(`/training/runs/${id}/operations/${op.operation_id}`)).body;
      return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
    }, op.kind, 120_000, 50);
    expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
    return parse(schema, parse(NativeTrainingResult, (await get(`/training/runs/${id}/operations/${op.operation_id}/result`)).body).result);
  };
  /** One learner version from one SFT batch, published into the model named `alias`. */
  const trainAndPublish = async (alias: string) => {
    await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'all' }, loss });
    const step = await result(await submit('optim_step', { optimizer }), OptimStepResult);
    const publication = { mode: 'versioned_lora', model_alias: alias };
    return result(await submit('save_weights_for_sampler', { checkpoint_name: `step-${step.checkpoint.learner_version}`, ttl_seconds: null, publication }), SamplerWeightsResult);
  };
  return { id, submit, result, trainAndPublish, seq: () => seq };
}

describe('native runs: assistant_turns "last", publication modes, deleting runs', () => {
  it('"last" trains only the final assistant turn; unsupported publications 501', async () => {
    const home = s.home;
    const { id, submit, result, seq } = await resolveRun('extras');

    // assistant_turns: the same trajectory trains both turns ("all") or only the last; "last" counts exactly the
    // tokens of the final turn, which the one-turn trajectory that ends the same way also trains.
    const fbAll = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'all' }, loss });
    const fbLast = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'last' }, loss });
    const lastOnly = { messages_and_choices: twoTurns.messages_and_choices.slice(2), tools: null };
    const fbLastOnly = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [lastOnly], assistant_turns: 'all' }, loss });
    const all = (await result(fbAll, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    const last = (await result(fbLast, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    const final = (await result(fbLastOnly, ForwardBackwardResult)).packing.trainable_assistant_tokens;
    expect(last).toBeGreaterThan(0);
    expect(all).toBeGreaterThan(last);
    expect(last).toBe(final);
    // The "last" batch's kept inputs mark the earlier turn as context, and the optim_step applies all three batches.
    const kept = fs.readFileSync(path.join(home, 'native-runs', id, `1-${fbLast.operation_id}.jsonl`), 'utf8');
    expect(JSON.parse(kept).messages.map((m: { weight?: number }) => m.weight)).toEqual([undefined, 0, undefined, undefined]);
    const step = await result(await submit('optim_step', { optimizer }), OptimStepResult);
    expect(step.contributing_forward_backward_operation_ids).toEqual([fbAll.operation_id, fbLast.operation_id, fbLastOnly.operation_id]);
    expect(step.metrics.num_trainable_tokens).toBe(all + last + final);

    // Publication modes Hearth cannot honour: 501 naming why, nothing stored, the sequence does not advance.
    for (const mode of ['merged_weights', 'external_lora']) {
      const r = await post(`/training/runs/${id}/save_weights_for_sampler`, {
        request_id: `publish-${hex()}`, sequence_id: seq(), checkpoint_name: 'step-1', ttl_seconds: null, publication: { mode, model_alias: 'extras' },
      });
      expect([r.status, r.body.detail]).toEqual([501, expect.stringContaining(`publication mode "${mode}" is not implemented by this server: `)]);
    }
    expect((await get(`/training/runs/${id}`)).body.next_sequence_id).toBe(seq());
  }, 300_000);

  it('DELETE a run: 409 while busy, 404 for another entity; then run, learner, inputs and states are gone and the publication serves', async () => {
    const home = s.home;
    const model = (await post('/preview/models', { project: 'p', name: 'deleted-run', base_model: BASE, return_existing: true })).body;
    const { id, submit, result, trainAndPublish } = await resolveRun('deleted-run');
    const published = await trainAndPublish('deleted-run');
    expect(published.lora).toBe('alice/p/deleted-run:step1');
    await result(await submit('save_state', { checkpoint_name: 'kept', ttl_seconds: null, overwrite: false }), SaveStateResult);
    const learnerId = s.store.nativeRuns.runById(id)!.learnerModelId;
    const learnerDir = s.ctx.models.modelCheckpointDir(learnerId);
    const inputsDir = path.join(home, 'native-runs', id);
    const statesDir = path.join(home, 'native-runs', 'states', id);
    expect(fs.existsSync(path.join(learnerDir, 'step-1'))).toBe(true);
    expect(fs.readdirSync(statesDir)).toHaveLength(1);

    // An operation in flight (its job held at its load): 409, nothing deleted.
    const release = holdTrainingJobs();
    const inFlight = await submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'last' }, loss });
    const refused = await s.call('DELETE', `/v1/training/runs/${id}`, { key });
    release();
    expect([refused.status, refused.body.detail]).toEqual([409, expect.stringMatching(/admitted or running \(sequence_id 4\).*Nothing was deleted/)]);
    expect(fs.existsSync(path.join(inputsDir, `4-${inFlight.operation_id}.jsonl`))).toBe(true);
    await result(inFlight, ForwardBackwardResult);
    expect((await get(`/training/runs/${id}`)).status).toBe(200);
    expect((await s.call('DELETE', `/v1/training/runs/${id}`, { key: s.key('bob') })).status).toBe(404);
    expect((await s.call('DELETE', `/v1/training/runs/${id}:close`, { key })).status).toBe(404);
    expect((await s.call('DELETE', '/v1/training/runs/no-such-run', { key })).status).toBe(404);

    const deleted = await s.call('DELETE', `/v1/training/runs/${id}`, { key });
    expect([deleted.status, deleted.body]).toEqual([200, { run_id: id, deleted: true, deleted_learner_versions: 1, deleted_states: 1 }]);
    expect((await get(`/training/runs/${id}`)).status).toBe(404);
    expect((await get(`/training/runs/${id}/operations/${inFlight.operation_id}`)).status).toBe(404);
    expect((await s.call('DELETE', `/v1/training/runs/${id}`, { key })).status).toBe(404);
    expect(s.store.models.getById(learnerId)).toBeNull();
    expect(s.store.nativeRuns.ops(id)).toEqual([]);
    for (const gone of [learnerDir, inputsDir, statesDir]) expect(fs.existsSync(gone), gone).toBe(false);
    // What it published is the user's: listed and served as before.
    expect((await get(`/preview/models/${model.id}/checkpoints`)).body.data.map((c: { step: number }) => c.step)).toEqual([1]);
    const served = await post('/chat/completions', { model: `wandb-artifact:///${published.lora}`, messages: [{ role: 'user', content: 'And of Italy?' }], max_tokens: 2 });
    expect(served.status, JSON.stringify(served.body)).toBe(200);
    // The name resolves again, to a new run from the base weights.
    const again = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'deleted-run', spec })).body;
    expect(again.run_id).not.toBe(id);
    expect(again).toMatchObject({ status: 'open', next_sequence_id: 0, committed_learner_version: 0 });
  }, 300_000);

  it('DELETE a model (ART backend.delete): the runs that published only into it go along, others stay; 409 with nothing deleted while one is busy', async () => {
    const own = (await post('/preview/models', { project: 'q', name: 'own', base_model: BASE, return_existing: true })).body;
    await post('/preview/models', { project: 'q', name: 'other', base_model: BASE, return_existing: true });
    const only = await resolveRun('only-into-own');
    await only.trainAndPublish('own');
    const both = await resolveRun('into-both');
    await both.trainAndPublish('own');
    await both.trainAndPublish('other');
    const unpublished = await resolveRun('never-published');
    const onlyLearnerDir = s.ctx.models.modelCheckpointDir(s.store.nativeRuns.runById(only.id)!.learnerModelId);

    const release = holdTrainingJobs();
    const inFlight = await only.submit('forward_backward', { batch: { kind: 'sft', trajectories: [twoTurns], assistant_turns: 'all' }, loss });
    const refused = await s.call('DELETE', `/v1/preview/models/${own.id}`, { key });
    release();
    expect([refused.status, JSON.stringify(refused.body)]).toEqual([409, expect.stringContaining(`Training run ${only.id} has 1 operation(s) admitted or running`)]);
    expect((await get(`/preview/models/${own.id}`)).status).toBe(200);
    expect((await get(`/training/runs/${only.id}`)).status).toBe(200);
    await only.result(inFlight, ForwardBackwardResult);

    const deleted = await s.call('DELETE', `/v1/preview/models/${own.id}`, { key });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect((await get(`/training/runs/${only.id}`)).status).toBe(404);
    expect(fs.existsSync(onlyLearnerDir)).toBe(false);
    for (const kept of [both.id, unpublished.id]) expect((await get(`/training/runs/${kept}`)).status).toBe(200);
    const servedElsewhere = await post('/chat/completions', { model: 'wandb-artifact:///alice/q/other:step1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    expect(servedElsewhere.status, JSON.stringify(servedElsewhere.body)).toBe(200);
  }, 300_000);
});
