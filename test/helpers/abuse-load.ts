// Issue #44's mixed run, shared by `npm run test:abuse` (scripts/abuse-run.ts) and its short CI version
// (test/hardening/abuse-mixed.test.ts): against a real `hearth serve` on loopback, bob sends every abusive request
// of the items 1–6 in a loop (scaled in bytes to keep a shared machine's memory reasonable, same shapes)
// while alice sends 4-token chats one after another and queues a few small SFT jobs. Everything is bounded:
// the loops stop at a deadline, each request is one of a fixed list, and nothing leaves 127.0.0.1.
import fs from 'node:fs';
import os from 'node:os';
import { dbPath } from '../../src/config/config.js';
import { Store } from '../../src/store/sqlite/store.js';
import { ApiKeys } from '../../src/services/api-keys.js';
import { streamChat } from '../hardening/faults-helpers.js';

export const DEMO = 'hearth/tiny-random-llama';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Keys for alice and bob, written into the store before the server starts (as `hearth keys create` does). */
export function makeKeys(home: string): { alice: string; bob: string } {
  const store = Store.open(dbPath(home));
  try {
    const keys = new ApiKeys(store, null);
    return { alice: keys.create('alice').key, bob: keys.create('bob').key };
  } finally {
    store.close();
  }
}

export interface Answer {
  status: number;
  body: any;
}

/** One request; a broken connection is status 0 with the error's message as body. */
export async function call(url: string, key: string, method: string, p: string, body?: unknown, raw?: { text: string; type: string }): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  let payload: string | undefined;
  if (raw) {
    headers['content-type'] = raw.type;
    payload = raw.text;
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  try {
    const res = await fetch(url + p, { method, headers, body: payload, signal: AbortSignal.timeout(120_000) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* keep the text */
    }
    return { status: res.status, body: parsed };
  } catch (err) {
    return { status: 0, body: (err as Error).message };
  }
}

// ---- bob's requests (issue #44, items 1–6) ----

const tokenPrompt = (length: number, offset = 0) => Array.from({ length }, (_, i) => 5 + ((i + offset) % 200));

/** Definitions D0 … D(levels-1), each an object holding the next one twice (item 4: 24 levels, 2.8 KB). */
function chainedSchema(levels: number): Record<string, unknown> {
  const $defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++)
    $defs[`D${i}`] = i === levels - 1 ? { type: 'integer' } : { type: 'object', properties: { a: { $ref: `#/$defs/D${i + 1}` }, b: { $ref: `#/$defs/D${i + 1}` } }, required: ['a', 'b'] };
  return { $defs, $ref: '#/$defs/D0' };
}

export interface BobSetup {
  modelIds: string[];
  bigRef: string;
  datasetUrl: string;
}

/** What bob's loop needs stored first: models to post jobs on, one large object of his own, one dataset. */
export async function prepareBob(url: string, bob: string, objectBytes: number): Promise<BobSetup> {
  const modelIds: string[] = [];
  for (let i = 0; i < 3; i++) {
    const m = await call(url, bob, 'POST', '/v1/preview/models', { project: 'abuse', name: `bob-${i}`, base_model: DEMO });
    if (m.status !== 200) throw new Error(`bob's model: ${m.status} ${JSON.stringify(m.body)}`);
    modelIds.push(m.body.id);
  }
  const obj = await call(url, bob, 'POST', '/obj/create', { obj: { project_id: 'bob/abuse', object_id: 'big', val: { blob: 'x'.repeat(objectBytes) } } });
  if (obj.status !== 200) throw new Error(`bob's object: ${obj.status} ${JSON.stringify(obj.body)}`);
  const data = await call(url, bob, 'POST', '/v1/preview/datasets?project=abuse&name=bob-data', undefined, { text: sftRows('bob', BOB_JOB_ROWS).join('\n'), type: 'application/x-ndjson' });
  if (data.status !== 200) throw new Error(`bob's dataset: ${data.status} ${JSON.stringify(data.body)}`);
  return { modelIds, bigRef: `weave:///bob/abuse/object/big:${obj.body.digest}`, datasetUrl: data.body.url };
}

export const sftRows = (who: string, n = 8) =>
  Array.from({ length: n }, (_, i) => JSON.stringify({ messages: [{ role: 'user', content: `${who} question ${i}?` }, { role: 'assistant', content: `answer ${i}` }] }));

/** Rows of bob's training data; his jobs train one row a step, so each holds the one trainer for a while. */
const BOB_JOB_ROWS = 48;
/** Training jobs bob asks for in each round. */
const BOB_JOBS_PER_ROUND = 40;

export interface Scale {
  /** JSON values in the RL body of empty objects (item 1); the server refuses past HEARTH_TRAINING_MAX_JSON_VALUES. */
  rlEmptyObjects: number;
  /** {} rows in the refused table create (item 3); past HEARTH_MAX_JSON_VALUES. */
  tableEmptyRows: number;
  /** Rows of the legal table bob creates each round (item 3, served in slices). */
  tableLegalRows: number;
  /** Refs to bob's large object in one read_batch (item 2). */
  refs: number;
  /** Concurrent streams of bob's flood (item 6). */
  streams: number;
  /** Tokens each of those streams asks for. */
  streamTokens: number;
}

/** The probes' shapes at the server's default limits: every refused body just past its limit. */
export const DEFAULT_SCALE: Scale = { rlEmptyObjects: 8_000_001, tableEmptyRows: 2_000_001, tableLegalRows: 20_000, refs: 1000, streams: 50, streamTokens: 64 };

/** Bob's requests, one round: each an item of the issue, named for the summary. */
export function bobRound(url: string, bob: string, setup: BobSetup, scale: Scale): { name: string; send: (round: number) => Promise<Answer[]> }[] {
  // The large bodies are built once (tens of MB; rebuilding them each round would only load this process).
  const rlEmpty = (modelId: string) => `{"model_id":"${modelId}","trajectory_groups":[{"trajectories":[{"messages_and_choices":[${'{},'.repeat(scale.rlEmptyObjects - 1)}{}]}]}]}`;
  const rlBodies = setup.modelIds.map(rlEmpty);
  const tableEmpty = `{"table":{"project_id":"bob/abuse","rows":[${'{},'.repeat(scale.tableEmptyRows - 1)}{}]}}`;
  const legalRows = JSON.stringify({ table: { project_id: 'bob/abuse', rows: Array.from({ length: scale.tableLegalRows }, (_, i) => ({ i, s: `row ${i}` })) } });
  const one = async (p: Promise<Answer>) => [await p];
  return [
    { name: 'item1_rl_body_of_empty_objects', send: (r) => one(call(url, bob, 'POST', '/v1/preview/training-jobs', rlBodies[r % rlBodies.length])) },
    { name: 'item2_refs_batch_to_one_big_object', send: () => one(call(url, bob, 'POST', '/refs/read_batch', { refs: Array(scale.refs).fill(setup.bigRef) })) },
    { name: 'item3_table_create_of_empty_rows', send: () => one(call(url, bob, 'POST', '/table/create', tableEmpty)) },
    { name: 'item3_large_legal_table_create', send: () => one(call(url, bob, 'POST', '/table/create', legalRows)) },
    {
      name: 'item4_chained_ref_schema',
      send: () => one(call(url, bob, 'POST', '/v1/chat/completions', { model: DEMO, messages: [{ role: 'user', content: 'tree' }], max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'tree', schema: chainedSchema(24) } } })),
    },
    {
      name: 'item4_chained_ref_tool_parameters',
      send: () => one(call(url, bob, 'POST', '/v1/chat/completions', { model: DEMO, messages: [{ role: 'user', content: 'call it' }], max_tokens: 8, tools: [{ type: 'function', function: { name: 'tree', parameters: chainedSchema(24) } }], tool_choice: 'required' })),
    },
    {
      name: 'item5_echo_logprobs_n128',
      send: () => one(call(url, bob, 'POST', '/v1/completions', { model: DEMO, prompt: [0, 1, 2].map((i) => tokenPrompt(300, i)), echo: true, logprobs: 20, n: 128, max_tokens: 16 })),
    },
    {
      name: 'item5_echo_logprobs_n128_two_prompts',
      send: () => one(call(url, bob, 'POST', '/v1/completions', { model: DEMO, prompt: [0, 1].map((i) => tokenPrompt(300, i)), echo: true, logprobs: 20, n: 128, max_tokens: 16 })),
    },
    {
      name: 'item6_100_prompts_x_n128',
      send: () => one(call(url, bob, 'POST', '/v1/completions', { model: DEMO, prompt: Array.from({ length: 100 }, (_, i) => `p${i}`), n: 128, max_tokens: 16 })),
    },
    {
      name: 'item6_concurrent_streams',
      send: async (r) => {
        const outs = await Promise.all(
          Array.from({ length: scale.streams }, (_, i) => streamChat(url, bob, { model: DEMO, messages: [{ role: 'user', content: `Go on and on ${r}.${i}` }], max_tokens: scale.streamTokens, ignore_eos: true })),
        );
        // A stream that began and then ended with an error event or a broken connection was not served.
        return outs.map((o) => ({ status: o.broken ? 0 : o.status === 200 && (o.error || !o.done) ? 500 : o.status, body: o.error ?? o.broken }));
      },
    },
    {
      name: 'item8_many_training_jobs',
      send: async (r) => {
        const outs: Answer[] = [];
        // A burst past his per-entity cap (HEARTH_TRAINING_QUEUE_PER_ENTITY, 32) over several models: the jobs
        // beyond it are 429; those within it queue for the one trainer alice's jobs share.
        for (let j = 0; j < BOB_JOBS_PER_ROUND; j++) {
          const modelId = setup.modelIds[j % setup.modelIds.length];
          // A distinct learning rate each: the same data and config on the same model is one job (deduplicated).
          outs.push(await call(url, bob, 'POST', '/v1/preview/sft-training-jobs', { model_id: modelId, training_data_url: setup.datasetUrl, config: { batch_size: 1, learning_rate: 1e-3 + (r * BOB_JOBS_PER_ROUND + j) * 1e-9 } }));
        }
        return outs;
      },
    },
  ];
}

// ---- the record ----

export interface BobTally {
  /** Per request name: answers by status ("0" = connection broken). */
  byRequest: Record<string, Record<string, number>>;
  /** Per request name and status other than 200: the first answer's body (cut short), to show what was said. */
  samples: Record<string, Record<string, string>>;
  /** Answers that were neither served (2xx) nor a 4xx: status and body, first few. */
  bad: { name: string; status: number; body: string }[];
  rounds: number;
  /** The ids of bob's accepted training jobs. */
  jobIds: string[];
  /** When each of bob's requests ran (ms since the epoch), to tell which of them alice's slowest chats overlapped. */
  spans: { name: string; start: number; end: number }[];
}

export function newBobTally(): BobTally {
  return { byRequest: {}, samples: {}, bad: [], rounds: 0, jobIds: [], spans: [] };
}

export function tallyBob(t: BobTally, name: string, answers: Answer[]) {
  const counts = (t.byRequest[name] ??= {});
  for (const a of answers) {
    counts[a.status] = (counts[a.status] ?? 0) + 1;
    if (name === 'item8_many_training_jobs' && a.status === 200) t.jobIds.push(a.body.id);
    if (a.status !== 200) (t.samples[name] ??= {})[a.status] ??= JSON.stringify(a.body).slice(0, 240);
    if (!(a.status >= 200 && a.status < 300) && !(a.status >= 400 && a.status < 500) && t.bad.length < 20)
      t.bad.push({ name, status: a.status, body: JSON.stringify(a.body).slice(0, 300) });
  }
}

/** Bob's loop until the deadline (or `stop()`): every request of his round, then the next round. */
export async function runBob(url: string, bob: string, setup: BobSetup, scale: Scale, until: () => boolean, tally: BobTally) {
  const requests = bobRound(url, bob, setup, scale);
  for (let round = 0; !until(); round++) {
    for (const r of requests) {
      if (until()) break;
      const start = Date.now();
      const answers = await r.send(round);
      if (tally.spans.length < 10_000) tally.spans.push({ name: r.name, start, end: Date.now() });
      tallyBob(tally, r.name, answers);
      // A server that is down (the restart runs) refuses at once: back off as a client would, not spin.
      if (answers.some((a) => a.status === 0)) await sleep(200);
    }
    tally.rounds = round + 1;
  }
}

// ---- alice ----

export interface AliceRecord {
  latenciesMs: number[];
  /** Start (ms since the epoch) of each chat in latenciesMs, same order. */
  startsMs: number[];
  /** Answers other than 200: status and body, first few; and their count by status. */
  failures: { status: number; body: string; atMs: number }[];
  failuresByStatus: Record<string, number>;
}

export function newAliceRecord(): AliceRecord {
  return { latenciesMs: [], startsMs: [], failures: [], failuresByStatus: {} };
}

/** Alice's 4-token chats, one after another, until the deadline; each answer's latency. */
export async function runAliceChats(url: string, alice: string, until: () => boolean, rec: AliceRecord, count: (status: number) => boolean = () => true) {
  for (let i = 0; !until(); i++) {
    const started = performance.now();
    const startedAt = Date.now();
    const a = await call(url, alice, 'POST', '/v1/chat/completions', { model: DEMO, messages: [{ role: 'user', content: `Hi ${i}` }], max_tokens: 4, ignore_eos: true });
    const ms = performance.now() - started;
    if (a.status === 200 && a.body?.choices?.length === 1 && a.body.usage?.completion_tokens === 4) {
      rec.latenciesMs.push(ms);
      rec.startsMs.push(startedAt);
    }
    else if (count(a.status)) {
      rec.failuresByStatus[a.status] = (rec.failuresByStatus[a.status] ?? 0) + 1;
      if (rec.failures.length < 20) rec.failures.push({ status: a.status, body: JSON.stringify(a.body).slice(0, 300), atMs: Date.now() });
      await sleep(100);
    } else await sleep(100);
  }
}

/** Alice's small SFT jobs (one model each); their ids. */
export async function queueAliceJobs(url: string, alice: string, n: number): Promise<string[]> {
  const data = await call(url, alice, 'POST', '/v1/preview/datasets?project=abuse&name=alice-data', undefined, { text: sftRows('alice').join('\n'), type: 'application/x-ndjson' });
  if (data.status !== 200) throw new Error(`alice's dataset: ${data.status} ${JSON.stringify(data.body)}`);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const m = await call(url, alice, 'POST', '/v1/preview/models', { project: 'abuse', name: `alice-${i}-${Date.now()}`, base_model: DEMO });
    if (m.status !== 200) throw new Error(`alice's model: ${m.status} ${JSON.stringify(m.body)}`);
    const job = await call(url, alice, 'POST', '/v1/preview/sft-training-jobs', { model_id: m.body.id, training_data_url: data.body.url, config: { batch_size: 4, learning_rate: 1e-3 } });
    if (job.status !== 200) throw new Error(`alice's job: ${job.status} ${JSON.stringify(job.body)}`);
    ids.push(job.body.id);
  }
  return ids;
}

export interface JobTimes {
  /** Seconds from the job's creation to its start, and from its start to its end (null: not yet). */
  queued_s: number | null;
  ran_s: number | null;
}

/** Wait (bounded) for jobs to end; their final states, and how long each waited for the trainer and ran. */
export async function waitForJobs(url: string, key: string, ids: string[], timeoutMs: number): Promise<{ states: Record<string, string>; times: Record<string, JobTimes> }> {
  const deadline = Date.now() + timeoutMs;
  const states: Record<string, string> = {};
  const times: Record<string, JobTimes> = {};
  const secs = (a: string | null, b: string | null) => (a && b ? Math.round((Date.parse(b) - Date.parse(a)) / 100) / 10 : null);
  for (;;) {
    for (const id of ids) {
      const job = (await call(url, key, 'GET', `/v1/preview/training-jobs/${id}`)).body;
      states[id] = job?.status ?? 'unknown';
      times[id] = { queued_s: secs(job?.created_at, job?.started_at), ran_s: secs(job?.started_at, job?.finished_at) };
    }
    if (Object.values(states).every((s) => ['succeeded', 'failed', 'cancelled'].includes(s)) || Date.now() > deadline) return { states, times };
    await sleep(1000);
  }
}

// ---- numbers and processes ----

export const quantile = (xs: number[], p: number): number | null => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] * 10) / 10;
};

/** The worker children of `pid` (from their command line's --kind): kind and pid. */
export function workerPids(pid: number): { kind: string; pid: number }[] {
  const found: { kind: string; pid: number }[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== pid) continue;
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const k = argv.indexOf('--kind');
      if (k >= 0) found.push({ kind: argv[k + 1], pid: Number(entry) });
    } catch {
      /* exited meanwhile */
    }
  }
  return found.sort((a, b) => a.kind.localeCompare(b.kind) || a.pid - b.pid);
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** CPU model and its vector flags (the numbers depend on them). */
export function cpuLabel(): { model: string; cores: number; flags: string[] } {
  let flags: string[] = [];
  try {
    const m = /^flags\s*:\s*(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    flags = (m?.[1] ?? '').split(/\s+/).filter((f) => /^(avx|avx2|fma|f16c|avx512\w*|amx\w*)$/.test(f));
  } catch {
    /* not Linux */
  }
  return { model: os.cpus()[0]?.model?.trim() ?? 'unknown', cores: os.cpus().length, flags };
}
