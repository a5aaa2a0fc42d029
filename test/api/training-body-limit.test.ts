// Training uploads take a larger body than the rest of the API (ART sends every completion token back
// with its logprobs: ~700k tokens filled the general 64 MiB limit): an RL job past 64 MiB is accepted with
// the default HEARTH_TRAINING_BODY_LIMIT, and a body past the training limit answers 413 naming the setting.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingDispatcher } from '../../src/queue/port.js';
import type { TrainingJobRecord } from '../../src/store/records.js';
import { installManifestOnly, startServer, type TestServer } from '../helpers/server.js';

const BASE = 'test/base';
const MiB = 1024 * 1024;

/** An ART-shaped RL body of about `bytes`: one group of two trajectories whose choices carry logprobs. */
function rlBody(modelId: string, bytes: number): string {
  const token = (i: number) => `{"token":"token_id:${i % 500}","logprob":-0.6931471805599453,"bytes":[104,105],"top_logprobs":[]}`;
  const perTrajectory = Math.ceil(bytes / 2 / token(123).length);
  const choice = (reward: number) => {
    const content = Array.from({ length: perTrajectory }, (_, i) => token(i)).join(',');
    return `{"messages_and_choices":[{"role":"user","content":"hi"},{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"hi"},"logprobs":{"content":[${content}]}}],"reward":${reward}}`;
  };
  return `{"model_id":"${modelId}","trajectory_groups":[{"trajectories":[${choice(0)},${choice(1)}]}]}`;
}

async function postText(server: TestServer, path: string, key: string, text: string): Promise<{ status: number; body: any }> {
  const res = await fetch(server.url + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: text });
  return { status: res.status, body: await res.json() };
}

async function withModel(server: TestServer, key: string): Promise<string> {
  installManifestOnly(server.home, BASE);
  const model = await server.call('POST', '/v1/preview/models', { key, body: { project: 'p', name: 'big', base_model: BASE } });
  expect(model.status).toBe(200);
  return model.body.id;
}

function recordingDispatcher(jobs: TrainingJobRecord[]): TrainingDispatcher {
  return { admitTraining: () => {}, enqueueTraining: async (job) => void jobs.push(job), cancelTraining: async () => {} };
}

describe('defaults', () => {
  let server: TestServer;
  const queued: TrainingJobRecord[] = [];
  beforeAll(async () => {
    server = await startServer({ realTraining: true, container: { dispatcher: recordingDispatcher(queued) } });
  });
  afterAll(async () => server.close());

  it('accepts an RL job body past the old 64 MiB limit', async () => {
    const key = server.key('alice');
    const modelId = await withModel(server, key);
    const text = rlBody(modelId, 66 * MiB);
    expect(text.length).toBeGreaterThan(64 * MiB);
    const res = await postText(server, '/v1/preview/training-jobs', key, text);
    expect(res.status).toBe(200);
    expect(queued.map((j) => j.id)).toEqual([res.body.id]);
  }, 120_000);
});

describe('a small HEARTH_TRAINING_BODY_LIMIT', () => {
  let server: TestServer;
  let key: string;
  let modelId: string;
  beforeAll(async () => {
    server = await startServer({
      env: { HEARTH_BODY_LIMIT: String(64 * 1024), HEARTH_TRAINING_BODY_LIMIT: String(1 * MiB) },
      realTraining: true, container: { dispatcher: recordingDispatcher([]) },
    });
    key = server.key('alice');
    modelId = await withModel(server, key);
  });
  afterAll(async () => server.close());

  it('takes training bodies over the general limit, up to its own', async () => {
    expect((await postText(server, '/v1/preview/training-jobs', key, rlBody(modelId, 512 * 1024))).status).toBe(200);
    const datasets = await fetch(`${server.url}/v1/preview/datasets?project=p&name=big`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-ndjson' },
      body: `${JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(200 * 1024) }, { role: 'assistant', content: 'y' }] })}\n`,
    });
    expect(datasets.status).toBe(200);
  });

  it('answers 413 past it, naming the limit and the setting that raises it', async () => {
    const res = await postText(server, '/v1/preview/training-jobs', key, rlBody(modelId, 2 * MiB));
    expect(res).toEqual({ status: 413, body: { detail: `Request body exceeds the limit of ${1 * MiB} bytes (HEARTH_TRAINING_BODY_LIMIT on the server)` } });
  });

  it('leaves the other routes at HEARTH_BODY_LIMIT', async () => {
    const chat = await postText(server, '/v1/chat/completions', key, JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'x'.repeat(200 * 1024) }] }));
    expect(chat.status).toBe(413);
    expect(chat.body.error.message).toBe(`Request body exceeds the limit of ${64 * 1024} bytes (HEARTH_BODY_LIMIT on the server)`);
  });
});
