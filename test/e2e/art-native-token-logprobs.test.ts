// N3's `return_token_logprobs: true` through the native runs API (docs/art.md "Token logprobs"), against a real
// server and training worker: forward and forward_backward over SFT and CISPO token matrices answer one
// `TokenLogprobs` per matrix (art.training's contract, validated as ART's client reads it), shaped as the matrix's
// `target_token_ids` [T, 1]; position t holds the learner's logprob of token_ids[t + 1] where t is trained, 0
// elsewhere. The values are checked against the same weights served by `/v1/completions` with echo and logprobs (the
// base model at learner version 0, the published adapter at version 1), on another engine (ONNX Runtime). A batch
// with loss weights other than 1 (both signs) measures the weighted mean of those values.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import {
  artRlTokenMatrix, artSftTokenMatrix, N3NativeTrainingRun, n3ClientOperation, TokenLogprobs44, tokenLogprobValues,
} from '../helpers/art-native-framing-models.js';

const hex = () => crypto.randomBytes(16).toString('hex');
const spec = { base_model: DEMO_MODEL, dtype: 'bfloat16', lora_rank: 8, lora_target_modules: ['linear_fc1', 'linear_fc2', 'linear_proj', 'linear_qkv'], seed: null };
const optimizer = { learning_rate: 5e-2, beta1: 0.9, beta2: 0.99, eps: 1e-13, weight_decay: 0.1, grad_clip_norm: 1 };
// Training (TF.js + ONNX Runtime GEMMs) and serving (ONNX Runtime) compute the same float32 model in different
// orders: measured at most 1.5e-6 apart here.
const ENGINE_TOLERANCE = 1e-4;

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await startDemoServer({ training: true });
  key = s.key('alice');
}, 120_000);
afterAll(async () => s?.close());

const post = (path: string, body: unknown) => s.call('POST', `/v1${path}`, { key, body });
const get = (path: string) => s.call('GET', `/v1${path}`, { key });
const body200 = (r: { status: number; body: unknown }) => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as Record<string, unknown>;
};
type Op = ReturnType<typeof n3ClientOperation>;
const submit = async (path: string, body: unknown) => n3ClientOperation(body200(await post(path, body)));
async function terminal(op: Op): Promise<Op> {
  const done = await waitFor(async () => {
    const o = n3ClientOperation(body200(await get(`/training/runs/${op.run_id}/operations/${op.operation_id}`)));
    return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
  }, `N3 ${op.kind} #${op.sequence_id}`, 180_000, 100);
  expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
  return done;
}

/** The public summary as sent (GET …/result), before ART's adapter fills defaults. */
const summary = async (op: Op) => body200(await get(`/training/runs/${op.run_id}/operations/${op.operation_id}/result`));

/** `/v1/completions` echo logprobs of `ids` on `model`: entry t + 1 is log p(ids[t + 1] | ids[..t]). */
async function servedLogprobs(model: string, ids: number[]): Promise<(number | null)[]> {
  const r = body200(await post('/completions', { model, prompt: ids, max_tokens: 1, temperature: 0, echo: true, logprobs: 0 }));
  const choice = (r.choices as { logprobs: { token_logprobs: (number | null)[] } }[])[0];
  return choice.logprobs.token_logprobs.slice(0, ids.length);
}

const sftMatrices = () => [
  artSftTokenMatrix('sft-0', [1, 40, 41, 42, 43, 90, 91, 92, 2], [-100, -100, -100, -100, -100, 90, 91, 92, 2]),
  artSftTokenMatrix('sft-1', [1, 50, 51, 52, 95, 96, 2], [-100, -100, -100, -100, 95, 96, 2]),
];
const sftIds = [[1, 40, 41, 42, 43, 90, 91, 92, 2], [1, 50, 51, 52, 95, 96, 2]];
const sftActive = (m: number, t: number) => t + 1 < sftIds[m].length && t >= (m === 0 ? 4 : 3);
const rlIds = [[1, 40, 41, 42, 90, 91, 2], [1, 40, 41, 42, 95, 96, 97, 2]];
const rlMatrices = () => [
  artRlTokenMatrix('rollout-0', rlIds[0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, -1.2, -0.8, -0.5], 1),
  artRlTokenMatrix('rollout-1', rlIds[1], [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, -2, -1.5, -1, -0.7], -1),
];
const rlActive = (_m: number, t: number) => t >= 3 && t + 1 < rlIds[_m].length;
const body = (requestId: string, sequenceId: number, matrices: unknown[], loss: Record<string, unknown>, returnTokenLogprobs: boolean) => ({
  request_id: requestId, sequence_id: sequenceId, batch: { kind: 'token_matrix', matrices, routes: [] }, loss,
  collect_packing_shapes: false, retain_packed_input: false, return_token_logprobs: returnTokenLogprobs,
});
const CE = { name: 'cross_entropy', normalize_advantages: false };
const CISPO = { name: 'cispo', normalize_advantages: false, clip_low_threshold: 0, clip_high_threshold: 5 };

/** The result's token logprobs, one per matrix, shaped [T, 1], as arrays of values. */
function matrixValues(result: Record<string, unknown>, ids: number[][]): number[][] {
  const tl = (result.token_logprobs as unknown[]).map((t) => TokenLogprobs44.parse(t));
  expect(tl.map((t) => t.shape)).toEqual(ids.map((row) => [row.length, 1]));
  return tl.map(tokenLogprobValues);
}

/** Trained positions hold the served model's logprob of the next token; the others 0. Returns the largest difference. */
async function expectServedValues(values: number[][], ids: number[][], active: (m: number, t: number) => boolean, model: string): Promise<number> {
  let worst = 0;
  for (const [m, row] of values.entries()) {
    const served = await servedLogprobs(model, ids[m]);
    row.forEach((v, t) => {
      if (!active(m, t)) return expect(v, `matrix ${m} position ${t} is not trained`).toBe(0);
      const expected = served[t + 1] as number;
      expect(v, `matrix ${m} position ${t}`).toBeLessThan(0);
      worst = Math.max(worst, Math.abs(v - expected));
      expect(Math.abs(v - expected), `matrix ${m} position ${t}: ${v} vs served ${expected}`).toBeLessThan(ENGINE_TOLERANCE);
    });
  }
  return worst;
}

describe('return_token_logprobs on N3 token matrices', () => {
  it('forward and forward_backward (SFT and CISPO) answer the learner logprob of every trained target, aligned with the matrix, at the measured weights', async () => {
    body200(await post('/preview/models', { entity: null, project: 'p', name: 'lp-model', base_model: DEMO_MODEL, return_existing: true }));
    const run = N3NativeTrainingRun.parse(body200(await post('/training/runs:resolve', { request_id: `resolve-${hex()}`, spec, initial_state: null })));
    const id = run.run_id;
    const runs = `/training/runs/${id}`;

    // Learner version 0: the base weights, served as :step0.
    const fb = await terminal(await submit(`${runs}/forward_backward`, body(`fb-${hex()}`, 0, sftMatrices(), CE, true)));
    const fbValues = matrixValues(fb.result!, sftIds);
    const worstBase = await expectServedValues(fbValues, sftIds, sftActive, 'wandb-artifact:///alice/p/lp-model:step0');
    // The loss is the mean NLL of exactly these values.
    const trained = fbValues.flatMap((row, m) => row.filter((_, t) => sftActive(m, t)));
    expect(trained).toHaveLength(7);
    expect((fb.result as { loss: { value: number } }).loss.value).toBeCloseTo(-trained.reduce((a, v) => a + v, 0) / trained.length, 4);

    // forward: the same measurement, without a gradient, the same values.
    const forward = await terminal(await submit(`${runs}/forward`, body(`forward-${hex()}`, 1, sftMatrices(), CE, true)));
    expect(matrixValues(forward.result!, sftIds)).toEqual(fbValues);

    // Without the flag nothing changes: the summary carries no token_logprobs at all.
    const plain = await terminal(await submit(`${runs}/forward_backward`, body(`fb-${hex()}`, 2, sftMatrices(), CE, false)));
    expect('token_logprobs' in (await summary(plain))).toBe(false);
    expect((await summary(fb)).token_logprobs).toEqual(fb.result!.token_logprobs);

    // One step, published: learner version 1 is served as the generation's name.
    await terminal(await submit(`${runs}/optim_step`, { request_id: `optim-${hex()}`, sequence_id: 3, optimizer }));
    const published = await terminal(await submit(`${runs}/save_weights_for_sampler`, {
      request_id: `publish-${hex()}`, sequence_id: 4, checkpoint_name: 'step-1', ttl_seconds: null, publication: { target: 'saved_generation', model_alias: 'lp-model' },
    }));
    const generation = `wandb-artifact:///${(published.result as { generation_id: string }).generation_id}`;

    // At version 1 the values are the trained weights' (they moved: the step learned these tokens).
    const after = await terminal(await submit(`${runs}/forward`, body(`forward-${hex()}`, 5, sftMatrices(), CE, true)));
    const afterValues = matrixValues(after.result!, sftIds);
    const worstTrained = await expectServedValues(afterValues, sftIds, sftActive, generation);
    const gained = afterValues.flatMap((row, m) => row.map((v, t) => (sftActive(m, t) ? v - fbValues[m][t] : 0)));
    expect(Math.max(...gained)).toBeGreaterThan(10 * ENGINE_TOLERANCE);

    // Loss weights other than 1, of both signs (ART's loss_weights row): the loss is Σ w · (−logprob) / N over the
    // N weighted targets, made of exactly the values above.
    const weightOf = (m: number, t: number) => [0.5, -1, 2, 1.5][(m + t) % 4];
    const weightedMatrices = sftMatrices().map((matrix, m) => ({
      ...matrix,
      rows: matrix.rows.map((row) => (row.name !== 'loss_weights' ? row : {
        ...row, values: { encoding: 'dense', data: sftIds[m].map((_, t) => (sftActive(m, t) ? weightOf(m, t) : 0)) },
      })),
    }));
    const weightedOp = await terminal(await submit(`${runs}/forward`, body(`forward-${hex()}`, 6, weightedMatrices, CE, true)));
    expect(matrixValues(weightedOp.result!, sftIds)).toEqual(afterValues);
    const weightedSum = afterValues.reduce((a, row, m) => a + row.reduce((b, v, t) => b + (sftActive(m, t) ? -v * weightOf(m, t) : 0), 0), 0);
    expect((weightedOp.result!.metrics as Record<string, number>).loss).toBeCloseTo(weightedSum / 7, 4);

    // CISPO token matrices: trained positions are those with an advantage.
    const rl = await terminal(await submit(`${runs}/forward_backward`, body(`fb-${hex()}`, 7, rlMatrices(), CISPO, true)));
    const worstRl = await expectServedValues(matrixValues(rl.result!, rlIds), rlIds, rlActive, generation);
    console.log(`token logprobs vs served: max |diff| base ${worstBase.toExponential(2)}, trained ${worstTrained.toExponential(2)}, rl ${worstRl.toExponential(2)}`);
    expect((await post(`/training/runs/${id}:close`, { request_id: `close-${hex()}` })).status).toBe(200);
  }, 400_000);
});
