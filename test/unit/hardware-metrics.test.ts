import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { createMetrics, recordEngineStats, recordHeartbeat } from '../../src/metrics/metrics.js';
import { metricsPlugin, registerMetrics } from '../../src/api/plugins/metrics.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A strict reader of the Prometheus text exposition format (0.0.4): HELP/TYPE comments, then
 * samples `name{label="value",…} number`. Throws on any line it does not understand, and on
 * samples whose family has no TYPE line.
 */
function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"/y;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^# HELP (${name}) .*$`).exec(line))) continue;
    if ((m = new RegExp(`^# TYPE (${name}) (counter|gauge|histogram|summary|untyped)$`).exec(line))) {
      types.set(m[1], m[2]);
      continue;
    }
    m = new RegExp(`^(${name})(\\{(.*)\\})? (\\S+)( -?\\d+)?$`).exec(line);
    if (!m) throw new Error(`not exposition format: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[3] ?? '';
    let at = 0;
    while (at < body.length) {
      labelRe.lastIndex = at;
      const l = labelRe.exec(body);
      if (!l) throw new Error(`bad labels in: ${line}`);
      labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
      at = labelRe.lastIndex;
      if (body[at] === ',') at += 1;
    }
    // Values are Go floats (strconv.ParseFloat): NaN and Inf are accepted in any letter case.
    const raw = m[4];
    const value = /^[+]?inf$/i.test(raw) ? Infinity : /^-inf$/i.test(raw) ? -Infinity : /^nan$/i.test(raw) ? NaN : Number(raw);
    if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`bad value in: ${line}`);
    const family = [m[1], m[1].replace(/_(bucket|sum|count)$/, '')].find((n) => types.has(n));
    if (!family) throw new Error(`sample without TYPE: ${line}`);
    samples.push({ name: m[1], labels, value });
  }
  return { types, samples };
}

function value(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

async function scrape(app: ReturnType<typeof Fastify>) {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(res.body);
}

describe('metrics plugin', () => {
  it('counts requests by method, route and status, and times them', async () => {
    const metrics = createMetrics();
    const app = Fastify();
    registerMetrics(app, metrics);
    app.get('/items/:id', async (req) => ({ id: (req.params as { id: string }).id }));
    app.post('/fail', async (_req, reply) => reply.code(422).send({ detail: [] }));

    await app.inject({ method: 'GET', url: '/items/1' });
    await app.inject({ method: 'GET', url: '/items/2' });
    await app.inject({ method: 'POST', url: '/fail', payload: {} });
    await app.inject({ method: 'GET', url: '/no/such/path/42' });

    const { types, samples } = await scrape(app);
    expect(types.get('hearth_http_requests_total')).toBe('counter');
    expect(types.get('hearth_http_request_duration_seconds')).toBe('histogram');
    expect(value(samples, 'hearth_http_requests_total', { method: 'GET', route: '/items/:id', status: '200' })).toBe(2);
    expect(value(samples, 'hearth_http_requests_total', { method: 'POST', route: '/fail', status: '422' })).toBe(1);
    expect(value(samples, 'hearth_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(value(samples, 'hearth_http_request_duration_seconds_count', { route: '/items/:id' })).toBe(2);
    expect(value(samples, 'hearth_http_request_duration_seconds_bucket', { route: '/items/:id', le: '+Inf' })).toBe(2);

    // The scrape itself is counted once it has been answered.
    const again = await scrape(app);
    expect(value(again.samples, 'hearth_http_requests_total', { route: '/metrics', status: '200' })).toBe(1);
    await app.close();
  });

  it('exposes the metrics other parts update', async () => {
    const metrics = createMetrics();
    const app = Fastify();
    registerMetrics(app, metrics);
    metrics.queueDepth.set({ queue: 'inference' }, 3);
    metrics.tokensGenerated.inc({ model: 'meta-llama/Llama-3.2-1B' }, 17);
    metrics.tokensGenerated.inc({ model: 'meta-llama/Llama-3.2-1B' }, 5);
    metrics.batchSize.observe(4);
    metrics.batchSize.observe(9);
    metrics.trainingSteps.inc({ model: 'wandb/my-run' });
    recordHeartbeat(metrics, { kind: 'inference', device: 'cuda:0', host: 'gpu-1' }, 1_790_000_000_500);

    const { types, samples } = await scrape(app);
    expect(value(samples, 'hearth_queue_depth', { queue: 'inference' })).toBe(3);
    expect(value(samples, 'hearth_tokens_generated_total', { model: 'meta-llama/Llama-3.2-1B' })).toBe(22);
    expect(value(samples, 'hearth_batch_size_bucket', { le: '8' })).toBe(1);
    expect(value(samples, 'hearth_batch_size_count', {})).toBe(2);
    expect(value(samples, 'hearth_training_steps_total', { model: 'wandb/my-run' })).toBe(1);
    expect(value(samples, 'hearth_worker_last_seen_timestamp_seconds', { kind: 'inference', device: 'cuda:0', host: 'gpu-1' })).toBe(1_790_000_000.5);
    expect(types.get('hearth_worker_last_seen_timestamp_seconds')).toBe('gauge');
    await app.close();
  });

  it('engine stats from heartbeats: steps since the previous heartbeat by batch size, and each model\'s mixed-step budget as it is now', async () => {
    const metrics = createMetrics();
    const app = Fastify();
    registerMetrics(app, metrics);
    recordEngineStats(metrics, 'w1', { '1': 3, '8': 10 }, { 'bench/s20': 32 });
    recordEngineStats(metrics, 'w1', { '1': 3, '8': 12 }, { 'bench/s20': 27, 'karpathy/stories260K': 64 });
    recordEngineStats(metrics, 'w2', undefined, { 'bench/s20': 19 });
    const { types, samples } = await scrape(app);
    expect(value(samples, 'hearth_batch_size_count', {})).toBe(15);
    expect(value(samples, 'hearth_batch_size_bucket', { le: '4' })).toBe(3);
    expect(types.get('hearth_prefill_chunk_tokens')).toBe('gauge');
    expect(value(samples, 'hearth_prefill_chunk_tokens', { worker: 'w1', model: 'bench/s20' })).toBe(27);
    expect(value(samples, 'hearth_prefill_chunk_tokens', { worker: 'w1', model: 'karpathy/stories260K' })).toBe(64);
    expect(value(samples, 'hearth_prefill_chunk_tokens', { worker: 'w2', model: 'bench/s20' })).toBe(19);
    await app.close();
  });

  it('as a registered plugin still sees routes in other plugin contexts', async () => {
    const metrics = createMetrics({ defaultMetrics: true });
    const app = Fastify();
    await app.register(metricsPlugin, { metrics });
    await app.register(async (child) => {
      child.get('/child', async () => 'ok');
    });
    await app.inject({ method: 'GET', url: '/child' });
    const { samples } = await scrape(app);
    expect(value(samples, 'hearth_http_requests_total', { route: '/child', status: '200' })).toBe(1);
    expect(samples.some((s) => s.name === 'hearth_process_cpu_user_seconds_total')).toBe(true);
    await app.close();
  });

  it('the exposition checker rejects malformed text (so the checks above mean something)', () => {
    expect(() => parseExposition('# TYPE a counter\na{b="c" 1\n')).toThrow();
    expect(() => parseExposition('x 1\n')).toThrow(/without TYPE/);
    expect(() => parseExposition('# TYPE a gauge\na one\n')).toThrow();
    expect(parseExposition('# TYPE a gauge\na{b="q\\"x"} 2\n').samples[0].labels.b).toBe('q"x');
  });
});
