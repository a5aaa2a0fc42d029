// Native training runs across failures: the training worker killed between an optim_step's checkpoint and its
// report (the operation fails visibly, the learner version is not committed, and the step is never applied
// twice), and the API restarted with operations in flight (runs, operations, their order and idempotency
// survive; an operation the restart interrupted ends failed, not stuck).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type StartOptions, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { NativeTrainingOperation } from '../helpers/art-native-models.js';

const BASE = 'hearth/tiny-random-llama';
const faultDir = tempHome('hearth-native-faults-');
const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: BASE, dtype: 'bfloat16', lora_rank: 4, lora_target_modules: ['q_proj', 'v_proj'] };
const fbBody = (sequenceId: number) => ({
  request_id: `fb-${hex()}`, sequence_id: sequenceId,
  batch: { kind: 'sft', trajectories: [{ messages_and_choices: [{ role: 'user', content: 'Hi?' }, { role: 'assistant', content: 'Hello' }], tools: null }] },
  loss: { name: 'cross_entropy' },
});

let s: TestServer;
let key: string;
afterAll(async () => s?.close());

async function start(home: string): Promise<void> {
  const opts: StartOptions = {
    home, realTraining: true, env: { HEARTH_WORKERS: 'training:cpu', HEARTH_HEARTBEAT_TIMEOUT: '5' },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '256', HEARTH_FAULT_DIR: faultDir } },
  };
  s = await startServer(opts);
  key = s.key('alice');
  await waitFor(() => s.ctx.queue!.liveWorkers('training').length > 0, 'a training worker', 30_000);
}
const post = (p: string, body?: unknown) => s.call('POST', `/v1${p}`, { key, ...(body === undefined ? {} : { body }) });
const get = (p: string) => s.call('GET', `/v1${p}`, { key });
const settled = (runId: string, opId: string) =>
  waitFor(async () => {
    const o = NativeTrainingOperation.parse((await get(`/training/runs/${runId}/operations/${opId}`)).body);
    return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
  }, `operation ${opId}`, 90_000, 50);

describe('native runs across a training-worker crash and an API restart', () => {
  it('a worker killed after the optim_step checkpoint, before its report: failed visibly, applied once when redone; state survives a restart', async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    await start(home);
    await post('/preview/models', { project: 'p', name: 'durable', base_model: BASE, return_existing: true });
    const run = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'durable', spec })).body;
    const fb0 = fbBody(0);
    const fb = (await post(`/training/runs/${run.run_id}/forward_backward`, fb0)).body;
    expect((await settled(run.run_id, fb.operation_id)).status).toBe('succeeded');

    // The optim_step's job stops right after renaming its checkpoint into place, and its worker is killed there.
    const arm = path.join(faultDir, 'checkpoint-after-rename');
    fs.writeFileSync(arm, '');
    const optim = (await post(`/training/runs/${run.run_id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 1, optimizer: { learning_rate: 1e-3 } })).body;
    expect(optim.reserved_output_learner_version).toBe(1);
    await waitFor(() => fs.existsSync(`${arm}.reached`), 'the worker to stop after the rename', 60_000, 20);
    const [victim] = (s.ctx.queue!.adapter as EmbeddedQueue).pids('training');
    process.kill(victim, 'SIGKILL');
    const failed = await settled(run.run_id, optim.operation_id);
    fs.rmSync(arm, { force: true });
    fs.rmSync(`${arm}.reached`, { force: true });
    expect(failed.status).toBe('failed');
    expect(JSON.stringify(failed.error)).toMatch(/worker/);
    // Not committed; the projection is back on the committed version, so a re-resolved client continues from it.
    const after = (await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, run_name: 'durable', spec })).body;
    expect(after).toMatchObject({ run_id: run.run_id, committed_learner_version: 0, projected_learner_version: 0, next_sequence_id: 2 });
    const learner = s.store.nativeRuns.runById(run.run_id)!.learnerModelId;
    expect(s.store.checkpoints.all(learner)).toEqual([]);

    // The gradient it did not apply is still pending: the redone optim_step applies it, once.
    await waitFor(() => s.ctx.queue!.liveWorkers('training').some((w) => w.pid !== victim), 'a respawned training worker', 30_000);
    const redo = (await post(`/training/runs/${run.run_id}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 2, optimizer: { learning_rate: 1e-3 } })).body;
    expect([redo.learner_parent_version, redo.reserved_output_learner_version]).toEqual([0, 1]);
    const redone = await settled(run.run_id, redo.operation_id);
    expect(redone.status, JSON.stringify(redone.error)).toBe('succeeded');
    expect(s.store.checkpoints.all(learner).map((c) => c.step)).toEqual([1]);

    // A command in flight when the API stops, then a restart on the same home.
    const inFlight = (await post(`/training/runs/${run.run_id}/forward_backward`, fbBody(3))).body;
    await s.close();
    await start(home);
    const restored = (await get(`/training/runs/${run.run_id}`)).body;
    expect(restored).toMatchObject({ status: 'open', next_sequence_id: 4, committed_learner_version: 1, projected_learner_version: 1 });
    // Finished operations keep their outcome; the interrupted one ends (failed visibly, or done if its job finished first).
    expect((await get(`/training/runs/${run.run_id}/operations/${redo.operation_id}/result`)).body.result.checkpoint.learner_version).toBe(1);
    const interrupted = await settled(run.run_id, inFlight.operation_id);
    if (interrupted.status === 'failed') expect(JSON.stringify(interrupted.error)).toMatch(/restarted/);
    else expect(interrupted.status).toBe('succeeded');
    // Idempotency survives: the first command's retry is the same operation; the order continues at 4.
    expect((await post(`/training/runs/${run.run_id}/forward_backward`, fb0)).body.operation_id).toBe(fb.operation_id);
    const next = await post(`/training/runs/${run.run_id}/forward_backward`, fbBody(4));
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect((await settled(run.run_id, next.body.operation_id)).status).toBe('succeeded');
  }, 240_000);
});
