// OpenPipe ART's ServerlessBackend, call by call (../shared/notes/art-client-calls.md §2, docs/art.md), replayed
// against a real server with a real training worker. ART's client is an openai `AsyncAPIClient`; the same
// client class of the openai SDK here gives the same transport: Bearer auth, errors read from `error` (else
// the whole body), cursor pages that follow `has_more` with `after=<last id>`. Each step reads back exactly
// the fields ART reads, with ART's rules (float() on every gradient_step value, num_sequences required).
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { CursorPage } from 'openai/pagination';
import { nowIso } from '../../src/store/records.js';
import { DEMO_MODEL, startDemoServer } from '../helpers/demo-server.js';
import { installManifestOnly, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const BASE = DEMO_MODEL;
let s: TestServer;
let art: OpenAI;
/** The body of the last error response: ART's Python client reads `error` if present, else the whole body. */
let lastErrorBody: unknown = null;
const artErrorMessage = () => JSON.stringify((lastErrorBody as { error?: unknown } | null)?.error ?? lastErrorBody);

beforeAll(async () => {
  s = await startDemoServer({ training: true, maxContext: null, prepare: (home) => installManifestOnly(home, 'hearth/another-base') });
  art = new OpenAI({
    baseURL: `${s.url}/v1`, apiKey: s.key('alice'), maxRetries: 0,
    fetch: async (url, init) => {
      const res = await fetch(url as string, init as RequestInit);
      if (!res.ok) lastErrorBody = await res.clone().json().catch(() => null);
      return res;
    },
  });
}, 120_000);
afterAll(async () => s?.close());

interface Model { id: string; entity: string; project: string; name: string; base_model: string; run_id: string | null }
interface Checkpoint { id: string; step: number; metrics: Record<string, number> }
interface JobEvent { id: string; type: 'training_started' | 'gradient_step' | 'training_ended' | 'training_failed'; data: Record<string, unknown> }

/** #1 `models.create`: ART always sends return_existing and entity null. */
const register = (name: string, base = BASE) =>
  art.post<Model>('/preview/models', { body: { entity: null, project: 'p', name, base_model: base, return_existing: true } });

/** #2 `_get_step`: first item of limit=1&order=desc, step 0 when empty. */
async function getStep(model: Model): Promise<number> {
  const page = await art.get<{ data: Checkpoint[] }>(`/preview/models/${model.id}/checkpoints`, { query: { limit: 1, order: 'desc' } });
  return page.data[0]?.step ?? 0;
}

/** #3 `_delete_checkpoint_files`' listing: every page with the server's defaults, following has_more. */
async function allSteps(model: Model): Promise<{ steps: number[]; pages: number }> {
  const steps: number[] = [];
  let page = await art.getAPIList<Checkpoint, CursorPage<Checkpoint>>(`/preview/models/${model.id}/checkpoints`, CursorPage<Checkpoint>);
  let pages = 1;
  for (;;) {
    steps.push(...page.getPaginatedItems().map((c) => c.step));
    if (!page.hasNextPage()) break;
    page = await page.getNextPage();
    pages++;
  }
  return { steps, pages };
}

/** #9/#11 poll loop: events after the last one handled, until training_ended (or failed, which ART raises). */
async function pollToEnd(jobId: string): Promise<{ started: JobEvent; steps: Record<string, number>[] }> {
  let after: string | undefined;
  let started: JobEvent | null = null;
  const steps: Record<string, number>[] = [];
  let ended = false;
  await waitFor(async () => {
    const page = await art.get<{ data: JobEvent[]; has_more: boolean }>(`/preview/training-jobs/${jobId}/events`, { query: after ? { after } : {} });
    for (const e of page.data) {
      if (e.type === 'training_started') {
        expect(e.data).toHaveProperty('num_sequences'); // data["num_sequences"]: a KeyError in ART without it
        started = e;
        continue; // ART does not advance `after` past it
      }
      after = e.id;
      if (e.type === 'gradient_step') {
        // ART: {k: float(v) for k, v in event.data.items()}; null, strings and NaN-as-null abort the run.
        for (const [k, v] of Object.entries(e.data)) expect(typeof v === 'number' && Number.isFinite(v), `${k}=${JSON.stringify(v)}`).toBe(true);
        steps.push(e.data as Record<string, number>);
      }
      if (e.type === 'training_failed') throw new Error(`training failed: ${String(e.data.error_message)}`);
      if (e.type === 'training_ended') ended = true;
    }
    return ended;
  }, `job ${jobId} to end`, 120_000, 50);
  return { started: started!, steps };
}

/** Every experimental_config key ART 0.5.18 sends, unset ones null, its defaults otherwise. */
function artExperimentalConfig(overrides: Record<string, unknown> = {}) {
  return {
    advantage_balance: 0.0, allow_training_without_logprobs: false, epsilon: null, epsilon_high: null, importance_sampling_level: 'token',
    kimi_k2_tau: null, kl_penalty_coef: 0.0, kl_penalty_reference_step: null, kl_penalty_source: 'current_learner', kl_penalty_step_lag: null,
    kl_ref_adapter_path: null, learning_rate: 1e-2, logprob_calculation_chunk_size: 1024, loss_fn: 'cispo', mask_prob_ratio: false,
    max_negative_advantage_importance_sampling_weight: null, normalize_advantages: true, num_trajectories_learning_rate_multiplier_power: 0.0,
    packed_sequence_length: null, plot_tensors: false, ppo: false, precalculate_logprobs: false, scale_learning_rate_by_reward_std_dev: false,
    scale_rewards: true, truncated_importance_sampling: null, ...overrides,
  };
}

/** #12 rollouts on the model's inference name; the Choice is kept whole (model_dump) in the trajectory. */
async function rolloutGroup(model: Model, n: number) {
  const messages = [{ role: 'user' as const, content: 'Say something nice.' }];
  const trajectories = [];
  for (let i = 0; i < n; i++) {
    const r = await art.chat.completions.create({ model: `wandb-artifact:///${model.entity}/${model.project}/${model.name}`, messages, max_tokens: 6, temperature: 1, seed: i });
    const choice = r.choices[0];
    for (const lp of choice.logprobs!.content!) expect(lp.token).toMatch(/^token_id:\d+$/); // split(":")[1] in ART's tokenizer
    trajectories.push({ messages_and_choices: [...messages, JSON.parse(JSON.stringify(choice))], tools: null, additional_histories: [], reward: i % 2, metrics: {}, metadata: {}, logs: [] });
  }
  return { trajectories, exceptions: [], metadata: {}, metrics: {}, logs: [] };
}

describe("ART's calls, in ART's order", () => {
  it('(a) registers idempotently with every field ART copies, and refuses the same name over another base (409)', async () => {
    const m = await register('agent');
    expect(m).toMatchObject({ entity: 'alice', project: 'p', name: 'agent', base_model: BASE, run_id: 'agent' });
    expect(typeof m.id).toBe('string');
    expect((await register('agent')).id).toBe(m.id);
    const err = await register('agent', 'hearth/another-base').then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect(artErrorMessage()).toContain('already exists with base model \\"hearth/tiny-random-llama\\"');
    // The newest spec's base-model list (no auth), which ART does not call yet.
    const bases = await fetch(`${s.url}/v1/preview/base-models`).then((r) => r.json());
    expect(bases).toEqual(expect.arrayContaining([BASE, 'hearth/another-base']));
  });

  it('(b) one RL step: get_step 0, rollouts, training job, events to the end, get_step 1', async () => {
    const m = await register('rl');
    expect(await getStep(m)).toBe(0);
    const groups = [await rolloutGroup(m, 4), await rolloutGroup(m, 4)];
    const job = await art.post<{ id: string }>('/preview/training-jobs', { body: { model_id: m.id, trajectory_groups: groups, experimental_config: artExperimentalConfig({ advantage_balance: 0.25 }) } });
    const { started, steps } = await pollToEnd(job.id);
    expect(steps).toHaveLength(started.data.num_sequences as number);
    // Keys ART renames (backend.py _UPSTREAM_TRAIN_METRIC_KEYS): one step_trainer_tokens source, the job's trajectories.
    expect(steps[0]).toMatchObject({ num_trajectories: 8, num_groups_submitted: 2 });
    expect(steps[0]).not.toHaveProperty('train_tokens');
    expect(steps[0].num_trainable_tokens).toBeGreaterThan(0);
    expect(await getStep(m)).toBe(1);
    // A second step with a KL penalty against step 1 (ART's kl_penalty_reference_step; PipelineTrainer sends it
    // from its lag): the reference's LoRA factors are swapped in for the reference pass.
    const klJob = await art.post<{ id: string }>('/preview/training-jobs', {
      body: { model_id: m.id, trajectory_groups: groups, experimental_config: artExperimentalConfig({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 1 }) },
    });
    const kl = await pollToEnd(klJob.id);
    expect(kl.steps[0].kl_policy_ref).toEqual(expect.any(Number));
    expect(await getStep(m)).toBe(2);
    const missing = await art.post<{ id: string }>('/preview/training-jobs', {
      body: { model_id: m.id, trajectory_groups: groups, experimental_config: artExperimentalConfig({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 9 }) },
    });
    await expect(pollToEnd(missing.id)).rejects.toThrow('kl_penalty_reference_step 9: this model has no checkpoint at step 9');
    expect(await getStep(m)).toBe(2);
    // scale_learning_rate_by_reward_std_dev reads the model's history as ART's LocalBackend does: each job's
    // averaged metrics at its step (0.5 at steps 1 and 2: rewards 0,1,0,1 per group) plus logged train groups
    // (rewards 0, 0.2 at step 2: std 0.1), averaged per step {1: 0.5, 2: 0.3}; the fitted line 0.7 − 0.2·step
    // gives 0.3 / 0.7 at step 2.
    const trained = await art.get<{ data: Checkpoint[] }>(`/preview/models/${m.id}/checkpoints`, { query: { order: 'asc' } });
    expect(trained.data[0].metrics['train/reward_std_dev']).toBeCloseTo(0.5, 12);
    const logged = { trajectories: [0, 0.2].map((reward) => ({ messages_and_choices: [{ role: 'user', content: 'hi' }], reward, metrics: {} })) };
    await art.post(`/preview/models/${m.id}/log`, { body: { split: 'train', trajectory_groups: [logged] } });
    const scaledJob = await art.post<{ id: string }>('/preview/training-jobs', {
      body: { model_id: m.id, trajectory_groups: groups, experimental_config: artExperimentalConfig({ scale_learning_rate_by_reward_std_dev: true }) },
    });
    const scaled = await pollToEnd(scaledJob.id);
    expect(scaled.steps[0].learning_rate).toBeCloseTo(1e-2 * (0.3 / 0.7), 12);
    expect(await getStep(m)).toBe(3);
    // The trained step serves: ART's next rollouts use the same name (latest) or a pinned :step1.
    const r = await art.chat.completions.create({ model: 'wandb-artifact:///alice/p/rl:step1', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
    expect(r.choices[0].logprobs!.content!.length).toBeGreaterThan(0);
  });

  it('(b) a job whose choices carry no logprobs fails as ART\'s trainer does, and writes no checkpoint', async () => {
    const m = await register('no-logprobs');
    const group = await rolloutGroup(m, 2);
    for (const t of group.trajectories) delete (t.messages_and_choices[1] as { logprobs?: unknown }).logprobs;
    const job = await art.post<{ id: string }>('/preview/training-jobs', { body: { model_id: m.id, trajectory_groups: [group], experimental_config: artExperimentalConfig() } });
    await expect(pollToEnd(job.id)).rejects.toThrow(/Chat completion choices must have logprobs: 2 choice\(s\) have none/);
    expect(await getStep(m)).toBe(0);
  });

  it('(c) SFT: data uploaded under the name ART builds, job on the SFT path, events on the RL path, step +1', async () => {
    const m = await register('sft');
    // ART uploads `{name}-sft-data-{uuid hex[:12]}` as a W&B artifact; offline the same file goes to Hearth (docs/art.md).
    const artifact = `${m.name}-sft-data-${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const rows = Array.from({ length: 5 }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `q${i}` }, { role: 'assistant', content: `a${i}` }] })).join('\n');
    const upload: { url: string } = await fetch(`${s.url}/v1/preview/datasets?project=p&name=${artifact}`, {
      method: 'POST', headers: { authorization: `Bearer ${art.apiKey}`, 'content-type': 'application/x-ndjson' }, body: rows,
    }).then((r) => r.json() as Promise<{ url: string }>);
    expect(upload.url).toBe(`wandb-artifact:///alice/p/${artifact}:v0`);
    const job = await art.post<{ id: string }>('/preview/sft-training-jobs', {
      body: { model_id: m.id, training_data_url: upload.url, config: { learning_rate: [1e-3, 1e-3, 1e-3], batch_size: 2 } },
    });
    const { steps } = await pollToEnd(job.id);
    expect(steps).toHaveLength(3); // 5 rows in batches of 2
    expect(await getStep(m)).toBe(1);
  });

  it('(e) lists checkpoints across pages and deletes all but the latest; then deletes the model with no body', async () => {
    const m = await register('many');
    // 23 checkpoint rows (what 23 training jobs leave), so the server's default page of 20 is crossed.
    const record = s.store.models.findByName('alice', 'p', 'many')!;
    for (let step = 1; step <= 23; step++) s.store.checkpoints.insert({ id: crypto.randomUUID(), modelId: record.id, step, metrics: {}, path: null, createdAt: nowIso() });
    const { steps, pages } = await allSteps(m);
    expect(pages).toBe(2);
    expect(steps).toEqual(Array.from({ length: 23 }, (_, i) => i + 1));
    const latest = await getStep(m);
    expect(latest).toBe(23);
    // #5: JSON body on DELETE, every step but the latest.
    const deleted = await art.delete<{ deleted_count: number; not_found_steps: number[] }>(`/preview/models/${m.id}/checkpoints`, { body: { steps: [...steps.filter((x) => x !== latest), 99] } });
    expect(deleted).toEqual({ deleted_count: 22, not_found_steps: [99] });
    expect((await allSteps(m)).steps).toEqual([23]);
    // #6: DELETE with Content-Type: application/json and no body.
    await art.delete(`/preview/models/${m.id}`, { headers: { 'content-type': 'application/json' } });
    const gone = await getStep(m).then(() => null, (e: unknown) => e);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
    expect(artErrorMessage()).toBe(JSON.stringify({ detail: `Model ${m.id} not found` }));
  });
});
