import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import sharp from 'sharp';
import { installManifestOnly, startServer, type TestServer } from '../helpers/server.js';
import { nowIso } from '../../src/store/records.js';
import { formatTick, seriesFromEvents } from '../../src/services/training-plot.js';

let s: TestServer;
let alice: string;
let jobId: string;

beforeAll(async () => {
  s = await startServer();
  installManifestOnly(s.home, 'pub/base');
  alice = s.key('alice');
  const model = (await s.call('POST', '/v1/preview/models', { key: alice, body: { project: 'p', name: 'plotted', base_model: 'pub/base' } })).body;
  jobId = crypto.randomUUID();
  s.store.jobs.insert({ id: jobId, entity: 'alice', modelId: model.id, kind: 'rl', status: 'queued', payload: { trajectory_groups: [] }, dedupKey: null, errorMessage: null, createdAt: nowIso(), startedAt: null, finishedAt: null });
  s.ctx.trainingJobs.recordEvent(jobId, 'training_started', { num_sequences: 20 });
  for (let i = 0; i < 20; i++) s.ctx.trainingJobs.recordEvent(jobId, 'gradient_step', { loss: 2 / (i + 1), reward: i / 20, learning_rate: 1e-5 * Math.min(1, (i + 1) / 5) });
  s.ctx.trainingJobs.recordEvent(jobId, 'training_ended', {});
});
afterAll(async () => s.close());

describe('training plot', () => {
  it('renders loss, reward and learning rate as a PNG', async () => {
    const res = await fetch(`${s.url}/v1/preview/training-jobs/${jobId}/plot.png`, { headers: { authorization: `Bearer ${alice}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    const png = Buffer.from(await res.arrayBuffer());
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const meta = await sharp(png).metadata();
    expect(meta.width).toBe(900);
    expect(meta.height).toBeGreaterThan(600);
    // The loss curve is drawn in red: some pixels must be (close to) #d62728.
    const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    let red = 0;
    for (let i = 0; i < data.length; i += info.channels) if (Math.abs(data[i] - 0xd6) < 8 && Math.abs(data[i + 1] - 0x27) < 8 && Math.abs(data[i + 2] - 0x28) < 8) red++;
    expect(red).toBeGreaterThan(100);
  });

  it("answers 404 for another entity's job", async () => {
    const bob = s.key('bob');
    const r = await s.call('GET', `/v1/preview/training-jobs/${jobId}/plot.png`, { key: bob });
    expect(r.status).toBe(404);
  });

  it('extracts series by step and formats ticks', () => {
    const events = [
      { type: 'training_started', data: { num_sequences: 2 } },
      { type: 'gradient_step', data: { loss: 1.5 } },
      { type: 'gradient_step', data: { loss: 0.5, reward: 1 } },
    ];
    expect(seriesFromEvents(events, 'loss')).toEqual([[1, 1.5], [2, 0.5]]);
    expect(seriesFromEvents(events, 'reward')).toEqual([[2, 1]]);
    expect(formatTick(1.23456e-5)).toBe('1.2e-5');
    expect(formatTick(0.034567)).toBe('0.0346');
    expect(formatTick(0)).toBe('0');
  });
});
