// A Hearth server with the demo model, training and inference workers, and helpers that make what the
// console shows (a dataset, models, SFT jobs, a table) through the public API. Used by the browser tests
// and by scripts/console-screenshots.ts.
import { DEMO_MODEL, startDemoServer } from './demo-server.js';
import type { TestServer } from './server.js';

export const DEMO = DEMO_MODEL;

export interface ConsoleFixture {
  s: TestServer;
  key: string;
  entity: string;
  /** Upload `rows` SFT examples (three facts repeated) and return the dataset URL. */
  dataset(name: string, rows: number): Promise<string>;
  model(project: string, name: string): Promise<{ id: string }>;
  sftJob(modelId: string, dataUrl: string, batchSize: number): Promise<string>;
  /** A table of `rows` rows {i, question, score} in `project`; returns its digest. */
  table(project: string, rows: number): Promise<string>;
  jobStatus(id: string): Promise<string>;
  /** The queue's and workers' log lines so far (the last 500), for a failed test's diagnostics. */
  serverLog(): string;
  close(): Promise<void>;
}

const FACTS: [string, string][] = [
  ['What is the capital of France?', 'Paris'],
  ['What color is the sky?', 'blue'],
  ['Who wrote Hamlet?', 'Shakespeare'],
];

export async function startConsoleFixture(entity = 'alice'): Promise<ConsoleFixture> {
  const log: string[] = [];
  const s = await startDemoServer({
    training: true,
    homePrefix: 'hearth-console-',
    log: (m) => {
      log.push(`${new Date().toISOString()} ${m}`);
      if (log.length > 500) log.shift();
    },
  });
  const key = s.key(entity);
  const ok = <T>(r: { status: number; body: T }, what: string): T => {
    if (r.status !== 200) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  return {
    s, key, entity,
    async dataset(name, rows) {
      const lines = Array.from({ length: rows }, (_, i) => {
        const [q, a] = FACTS[i % FACTS.length];
        return JSON.stringify({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] });
      });
      const r = await s.call('POST', `/v1/preview/datasets?project=demo&name=${name}`, { key, rawBody: lines.join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
      return ok(r, 'dataset upload').url as string;
    },
    async model(project, name) {
      return ok(await s.call('POST', '/v1/preview/models', { key, body: { project, name, base_model: DEMO, return_existing: true } }), 'model');
    },
    async sftJob(modelId, dataUrl, batchSize) {
      const r = await s.call('POST', '/v1/preview/sft-training-jobs', { key, body: { model_id: modelId, training_data_url: dataUrl, config: { batch_size: batchSize, learning_rate: 5e-3 } } });
      return ok(r, 'SFT job').id as string;
    },
    async table(project, rows) {
      const body = { table: { project_id: `${entity}/${project}`, rows: Array.from({ length: rows }, (_, i) => ({ i, question: FACTS[i % 3][0], score: (i * 37) % 101 })) } };
      return ok(await s.call('POST', '/table/create', { key, body }), 'table').digest as string;
    },
    async jobStatus(id) {
      return ok(await s.call('GET', `/v1/preview/training-jobs/${id}`, { key }), 'job').status as string;
    },
    serverLog: () => log.join('\n'),
    close: () => s.close(),
  };
}
