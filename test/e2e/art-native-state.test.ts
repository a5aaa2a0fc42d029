// The native run commands beyond train_sft's (docs/art.md "States, forward, and the optimizer"), through real HTTP and
// a real training worker: forward measures like forward_backward and changes nothing; optim_step honours ART's
// AdamConfig and carries Adam's moments from version to version (the optimizer state file's step count, and a
// second update that differs from a fresh-moment one but is reproduced exactly from restored moments); save_state /
// load_state[_with_optimizer] return the learner to saved weights as version parent + 1, replay idempotently, refuse
// an unknown state with nothing applied, drop pending gradients, and survive an API restart. Answers are checked
// against the zod copies of ART's models (test/helpers/art-native-models.ts).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { parseAs } from '../helpers/art-native-client.js';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { decodeSafetensors } from '../../src/runtime/safetensors.js';
import { decodeOptimizerState, OPTIMIZER_STATE_FILE } from '../../src/runtime/optimizer-state.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import {
  ForwardBackwardResult, ForwardResult, LoadStateResult, NativeTrainingOperation, NativeTrainingResult, OptimStepResult, SamplerWeightsResult,
  SaveStateResult,
} from '../helpers/art-native-models.js';

const BASE = 'hearth/tiny-random-llama';
const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: BASE, dtype: 'bfloat16', lora_rank: 4, lora_target_modules: ['linear_qkv', 'linear_proj'] };
const trajectory = (q: string, a: string) => ({ messages_and_choices: [{ role: 'user', content: q }, { role: 'assistant', content: a }], tools: null });
const batch = { kind: 'sft', trajectories: [trajectory('What is the capital of France?', 'Paris'), trajectory('What color is the sky?', 'blue')] };
const loss = { name: 'cross_entropy', normalize_advantages: true, values: {} };
const optimizer = { learning_rate: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.1, grad_clip_norm: 1 };

let s: TestServer;
let key: string;
afterAll(async () => s?.close());

async function start(home: string): Promise<void> {
  s = await startServer({
    home, realTraining: true, env: { HEARTH_WORKERS: 'training:cpu' }, queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '256' } },
  });
  key = s.key('alice');
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0, 'a training worker', 60_000);
}
const post = (p: string, body: unknown) => s.call('POST', `/v1${p}`, { key, body });
const get = (p: string) => s.call('GET', `/v1${p}`, { key });
const parse = parseAs;

type Op = z.output<typeof NativeTrainingOperation>;

describe('native runs: forward, the carried optimizer, save_state and load_state', () => {
  it('forward changes nothing; moments carry; states restore weights (with or without moments) as parent + 1, replay once, survive a restart', async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    await start(home);
    await post('/preview/models', { project: 'p', name: 'stateful', base_model: BASE, return_existing: true });
    const run = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'stateful', spec })).body;
    const id: string = run.run_id;
    let seq = 0;
    /** Submit the run's next command; ART's OperationRef rule is checked on every admission. */
    const submit = async (kind: string, body: Record<string, unknown>): Promise<Op> => {
      const r = await post(`/training/runs/${id}/${kind}`, { request_id: `${kind}-${hex()}`, sequence_id: seq, ...body });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      seq++;
      return parse(NativeTrainingOperation, r.body);
    };
    const result = async <T extends z.ZodType>(op: Op, schema: T): Promise<z.output<T>> => {
      const done = await waitFor(async () => {
        const o = parse(NativeTrainingOperation, (await get(`/training/runs/${id}/operations/${op.operation_id}`)).body);
        return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
      }, `${op.kind} #${op.sequence_id}`, 120_000, 50);
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
      const envelope = parse(NativeTrainingResult, (await get(`/training/runs/${id}/operations/${op.operation_id}/result`)).body);
      expect(envelope.kind).toBe(op.kind);
      return parse(schema, envelope.result);
    };
    const learnerId = () => s.store.nativeRuns.runById(id)!.learnerModelId;
    const learnerDir = (version: number) => s.store.checkpoints.byStep(learnerId(), version)!.path!;
    const adapterOf = (dir: string) => decodeSafetensors(fs.readFileSync(path.join(dir, 'adapter_model.safetensors'))).tensors;
    const adapter = (version: number) => adapterOf(learnerDir(version));
    const adamStep = (version: number) => {
      const file = path.join(learnerDir(version), OPTIMIZER_STATE_FILE);
      return fs.existsSync(file) ? decodeOptimizerState(fs.readFileSync(file), adapter(version)).step : null;
    };
    const maxDiff = (a: number, b: number) => {
      const x = adapter(a);
      const y = adapter(b);
      expect([...x.keys()].sort()).toEqual([...y.keys()].sort());
      let d = 0;
      for (const [name, t] of x) t.data.forEach((v, i) => (d = Math.max(d, Math.abs(v - y.get(name)!.data[i]))));
      return d;
    };
    const runState = async () => (await get(`/training/runs/${id}`)).body;
    /** forward_backward then optim_step on the same batch: one learner version. */
    const trainStep = async () => {
      const fb = await submit('forward_backward', { batch, loss, return_token_logprobs: false, retain_packed_input: false });
      const optim = await submit('optim_step', { optimizer });
      expect(optim.reserved_output_learner_version).toBe(optim.learner_parent_version + 1);
      return { fb: await result(fb, ForwardBackwardResult), optim: await result(optim, OptimStepResult) };
    };

    // forward: the loss forward_backward measures at the same weights; no gradient kept, no version, nothing reserved.
    const fb0 = await submit('forward_backward', { batch, loss });
    const fwd0 = await submit('forward', { batch, loss });
    expect(fwd0.reserved_output_learner_version).toBeNull();
    const measured = await result(fb0, ForwardBackwardResult);
    const forwarded = await result(fwd0, ForwardResult);
    expect(forwarded.metrics.loss).toBeCloseTo(measured.metrics.loss, 5);
    expect(forwarded.metrics.num_trainable_tokens).toBe(measured.metrics.num_trainable_tokens);
    expect(await runState()).toMatchObject({ committed_learner_version: 0, projected_learner_version: 0, next_sequence_id: 2 });
    // Only the forward_backward's inputs are kept (for its optim_step); the forward kept nothing.
    expect(fs.readdirSync(path.join(home, 'native-runs', id))).toEqual([`0-${fb0.operation_id}.jsonl`]);
    const tokenizedForward = await post(`/training/runs/${id}/forward`, {
      request_id: `forward-${hex()}`, sequence_id: seq, batch: { kind: 'tokenized', datums: [{}] }, loss: { name: 'cross_entropy' },
    });
    expect(tokenizedForward.status).toBe(501);

    // optim_step: AdamConfig out of range is a 422 in the training API's shape, nothing applied.
    for (const bad of [{ beta1: 1 }, { beta2: -0.1 }, { eps: 0 }, { weight_decay: -1 }, { grad_clip_norm: -1 }, { learning_rate: -1 }]) {
      const r = await post(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: seq, optimizer: { ...optimizer, ...bad } });
      expect(r.status, JSON.stringify(bad)).toBe(422);
      expect(Array.isArray(r.body.detail)).toBe(true);
    }
    expect((await runState()).next_sequence_id).toBe(seq);
    // The forward contributed nothing: the step applies the forward_backward's gradient only.
    const optim1 = await submit('optim_step', { optimizer });
    const step1 = await result(optim1, OptimStepResult);
    expect(step1.contributing_forward_backward_operation_ids).toEqual([fb0.operation_id]);
    expect(step1.checkpoint.learner_version).toBe(1);
    expect(adamStep(1)).toBe(1);

    // save_state: a named snapshot of version 1 (weights and moments); a retry is the same operation; the name is taken.
    const saveBody = { request_id: `save-${hex()}`, sequence_id: seq, checkpoint_name: 'v1', ttl_seconds: null, overwrite: false };
    const save = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/save_state`, saveBody)).body);
    seq++;
    expect(save.reserved_output_learner_version).toBeNull();
    expect((await post(`/training/runs/${id}/save_state`, saveBody)).body.operation_id).toBe(save.operation_id);
    const saved = await result(save, SaveStateResult);
    expect(saved.checkpoint).toMatchObject({ run_id: id, learner_version: 1, checkpoint_id: save.operation_id });
    const savedDir = path.join(home, saved.lora);
    expect(decodeOptimizerState(fs.readFileSync(path.join(home, saved.optimizer_state)), adapterOf(savedDir)).step).toBe(1);
    const taken = await post(`/training/runs/${id}/save_state`, { ...saveBody, request_id: `save-${hex()}`, sequence_id: seq });
    expect(taken.status).toBe(409);

    // Two optim_steps in a row: the second continues the first's AdamW (step count 2).
    await trainStep();
    expect(adamStep(2)).toBe(2);
    // Only the committed version keeps its moments (they serve the next step alone); version 1's adapter stays.
    expect(adamStep(1)).toBeNull();
    expect(adapter(1).size).toBeGreaterThan(0);

    // load_state (no optimizer): version 3 = the saved weights, fresh moments. A retry is the same operation, and an
    // unknown state is refused with nothing applied.
    const unknown = await post(`/training/runs/${id}/load_state`, { request_id: `load-${hex()}`, sequence_id: seq, checkpoint: 'nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toMatch(/no saved state "nope"/);
    const loadBody = { request_id: `load-${hex()}`, sequence_id: seq, checkpoint: 'v1', restore_optimizer: false };
    const load = parse(NativeTrainingOperation, (await post(`/training/runs/${id}/load_state`, loadBody)).body);
    seq++;
    expect([load.learner_parent_version, load.reserved_output_learner_version]).toEqual([2, 3]);
    expect((await post(`/training/runs/${id}/load_state`, loadBody)).body.operation_id).toBe(load.operation_id);
    const loaded = await result(load, LoadStateResult);
    expect(loaded).toMatchObject({ optimizer_restored: false, checkpoint: { learner_version: 3 } });
    expect(await runState()).toMatchObject({ committed_learner_version: 3, projected_learner_version: 3 });
    expect(maxDiff(3, 1)).toBe(0);
    expect(adamStep(3)).toBeNull();

    // From the same weights and data: a fresh AdamW's step (v4) differs from the carried one (v2) ...
    await trainStep();
    expect(adamStep(4)).toBe(1);
    expect(maxDiff(4, 2)).toBeGreaterThan(1e-3);
    // ... and restoring the saved moments reproduces the carried step (v6 = v2).
    const loadWith = await submit('load_state_with_optimizer', { checkpoint: save.operation_id });
    expect([loadWith.kind, loadWith.reserved_output_learner_version]).toEqual(['load_state', 5]);
    expect((await result(loadWith, LoadStateResult)).optimizer_restored).toBe(true);
    expect(adamStep(5)).toBe(1);
    expect(adamStep(4)).toBeNull();
    await trainStep();
    expect(adamStep(6)).toBe(2);
    expect(maxDiff(6, 2)).toBeLessThan(1e-6);

    // A load_state drops the gradients pending before it: no optim_step can apply them afterwards.
    const pending = await submit('forward_backward', { batch, loss });
    await result(pending, ForwardBackwardResult);
    await result(await submit('load_state', { checkpoint: 'v1' }), LoadStateResult);
    const noGradients = await post(`/training/runs/${id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: seq, optimizer });
    expect(noGradients.status).toBe(409);
    expect(fs.readdirSync(path.join(home, 'native-runs', id))).toEqual([]);

    // A load_state cancelled before it starts (its turn waits on a forward whose worker is stopped) applies nothing and
    // gives its reserved version back.
    const [worker] = (s.ctx.queue!.adapter as EmbeddedQueue).pids('training');
    process.kill(worker, 'SIGSTOP');
    let busy: Op;
    try {
      busy = await submit('forward', { batch, loss });
      const queued = await submit('load_state', { checkpoint: 'v1' });
      expect([queued.status, queued.reserved_output_learner_version]).toEqual(['admitted', 8]);
      const cancel = await s.call('POST', `/v1/training/runs/${id}/operations/${queued.operation_id}:cancel`, { key, rawBody: '', headers: { 'content-type': 'application/json' } });
      expect(parse(NativeTrainingOperation, cancel.body).status).toBe('cancelled');
      expect(await runState()).toMatchObject({ committed_learner_version: 7, projected_learner_version: 7 });
    } finally {
      process.kill(worker, 'SIGCONT');
    }
    await result(busy, ForwardResult);

    // The states and their files survive an API restart: v1 restores after it (version 8 = v1's weights).
    await s.close();
    await start(home);
    expect(await runState()).toMatchObject({ committed_learner_version: 7, next_sequence_id: seq });
    const afterRestart = await submit('load_state', { checkpoint: 'v1', restore_optimizer: true });
    expect((await result(afterRestart, LoadStateResult)).checkpoint.learner_version).toBe(8);
    expect(maxDiff(8, 1)).toBe(0);
    expect(adamStep(8)).toBe(1);

    // Publishing copies the adapter only: AdamW's moments stay with the run.
    const publish = await submit('save_weights_for_sampler', { checkpoint_name: 'step-8', ttl_seconds: null, publication: { mode: 'versioned_lora', model_alias: 'stateful' } });
    const published = await result(publish, SamplerWeightsResult);
    const model = s.store.models.listByEntity('alice').find((m) => m.name === 'stateful')!;
    const servedDir = s.store.checkpoints.latest(model.id)!.path!;
    expect(published.checkpoint.learner_version).toBe(8);
    expect(fs.readdirSync(servedDir).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    // The published adapter is the learner version's file under a second name (src/runtime/checkpoint-files.ts) where
    // the filesystem has hard links (HEARTH_HOME's is probed), else a copy of its bytes.
    const [served, learned] = [path.join(servedDir, 'adapter_model.safetensors'), path.join(learnerDir(8), 'adapter_model.safetensors')];
    const probe = path.join(home, 'link-probe');
    fs.writeFileSync(probe, '');
    let links = true;
    try {
      fs.linkSync(probe, `${probe}-2`);
    } catch {
      links = false;
    }
    fs.rmSync(probe, { force: true });
    fs.rmSync(`${probe}-2`, { force: true });
    if (links) expect(fs.statSync(served).ino).toBe(fs.statSync(learned).ino);
    expect(fs.readFileSync(served).equals(fs.readFileSync(learned))).toBe(true);
  }, 300_000);
});
