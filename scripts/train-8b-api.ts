// npx tsx scripts/train-8b-api.ts [--work <dir>] [--gguf <file>] [--tokens 256] [--wait-free-gib 15] [--wait-chat-gib 10]
//                                  [--wait-max-s 1200] [--keep] [--cancel-after-s S]
//                                  [--shape 8b --type Q4_K] (another generated shape: a quick check of the plumbing)
// Issue #41's bar, end to end through the HTTP API: "an 8B Q4_K LoRA SFT job (rank 8, all seven projections,
// 1 × 256 tokens) runs through the API to a served checkpoint, peak RSS ≤ 14 GiB".
//
// 1. Generates the full-depth Llama-3.1-8B-shaped Q4_K GGUF (scripts/make-tiny-model.ts --shape 8b: ~4.5 GB, several
//    minutes; kept in <work>/model.gguf and reused by later runs) unless --gguf names one.
// 2. Makes an API key in a fresh HEARTH_HOME, imports the GGUF with `hearth models import` (as a user does), and
//    starts `hearth serve` (embedded queue, one inference and one training worker, as `npm start`).
// 3. Through the API: creates a trained model on that base (POST /v1/preview/models), uploads a one-row chat SFT
//    dataset of ~--tokens tokens (POST /v1/preview/datasets), starts an SFT job with the defaults (LoRA rank 8 on
//    q, k, v, o, gate, up, down: worker/training/lora.ts DEFAULT_LORA_CONFIG; batch 1), follows its events to
//    training_ended, then asks /v1/chat/completions for a few tokens from the checkpoint
//    (wandb-artifact:///<entity>/<project>/<name>:step1).
// 4. Before the job it waits for --wait-free-gib of MemAvailable (other work shares the machine), and before the
//    chat completion (the inference worker's first load of the 8B) for --wait-chat-gib, polling every 30 s up to
//    --wait-max-s each time, then goes ahead and says so in the result.
// 5. With --cancel-after-s, a first job is cancelled S seconds after its training_started (within its one micro-batch)
//    and the time to its `training_failed` {cancelled: true} is measured; then the job above runs on the same worker.
// Measures every process under the server (/proc/<pid>/status VmHWM and VmRSS, polled each second, plus VmHWM at
// the end): the training worker's and the API's peak RSS, the inference worker's, the step's seconds and tok/s.
// Progress goes to stderr, one JSON document to stdout; the server's own output to <work>/serve.log.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { dbPath } from '../src/config/config.js';
import { Store } from '../src/store/sqlite/store.js';
import { ApiKeys } from '../src/services/api-keys.js';
import { chatTemplateFromConfig } from '../src/runtime/chat-template.js';
import { loadTokenizer } from '../src/runtime/load-model.js';
import { chatTokenizerFrom } from '../worker/training/chat-tokenizer.js';
import { tokenizeSftRows } from '../worker/training/sft-data.js';
import { HEARTH_BIN, REPO, startServe } from '../test/helpers/process.js';
import { machineLabel } from './machine.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const WORK = path.resolve(arg('work', path.join(os.tmpdir(), 'hearth-train-8b-api')));
const GGUF = path.resolve(arg('gguf', path.join(WORK, 'model.gguf')));
const TOKENS = Number(arg('tokens', '256'));
const WAIT_FREE_GIB = Number(arg('wait-free-gib', '15'));
const WAIT_MAX_S = Number(arg('wait-max-s', '1200'));
const WAIT_CHAT_GIB = Number(arg('wait-chat-gib', '10'));
const KEEP = process.argv.includes('--keep');
const CANCEL_AFTER_S = process.argv.includes('--cancel-after-s') ? Number(arg('cancel-after-s', '30')) : null;
const SHAPE = arg('shape', '8b');
const TYPE = arg('type', 'Q4_K');
const MODEL_ID = `hearth/synthetic-llama-${SHAPE}-${TYPE.toLowerCase()}`;
const ENTITY = 'bench';
const PROJECT = 'train-8b';
const NAME = 'lora-8b';
// A step of the 8B on a shared 2-core CPU takes minutes with the worker's event loop blocked (measured 107–504 s);
// the worker's pulse thread sends its heartbeats meanwhile while the step's ONNX Runtime runs progress
// (worker/pulse.ts), so the timeouts stay at their defaults unless set here. Both printed in the result.
const SERVE_ENV: Record<string, string> = {
  ...(process.env.HEARTH_LOAD_TIMEOUT ? { HEARTH_LOAD_TIMEOUT: process.env.HEARTH_LOAD_TIMEOUT } : {}),
  ...(process.env.HEARTH_HEARTBEAT_TIMEOUT ? { HEARTH_HEARTBEAT_TIMEOUT: process.env.HEARTH_HEARTBEAT_TIMEOUT } : {}),
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
};

const GiB = 2 ** 30;
const t0 = Date.now();
const say = (line: string) => process.stderr.write(`[train-8b-api ${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

function memAvailableBytes(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) * 1024 : os.freemem();
}

// ---- processes under the server ----

interface ProcPeak { pid: number; kind: string; hwmBytes: number; rssMaxBytes: number; alive: boolean }

function statusBytes(pid: number, field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Every descendant of `root` with its kind: a worker's `--kind`, else its command. */
function descendants(root: number): { pid: number; kind: string }[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: { pid: number; kind: string }[] = [];
  const walk = (pid: number) => {
    for (const c of children.get(pid) ?? []) {
      let kind = 'child';
      try {
        const argv = fs.readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0');
        const k = argv.indexOf('--kind');
        kind = k >= 0 ? `${argv[k + 1]}-worker` : path.basename(argv[0] ?? 'child');
      } catch {
        /* exited */
      }
      out.push({ pid: c, kind });
      walk(c);
    }
  };
  walk(root);
  return out;
}

class RssWatch {
  readonly peaks = new Map<number, ProcPeak>();
  minAvailableBytes = Infinity;
  private timer: NodeJS.Timeout | null = null;
  constructor(private readonly apiPid: number) {}

  sample(): void {
    const procs = [{ pid: this.apiPid, kind: 'api' }, ...descendants(this.apiPid)];
    for (const p of this.peaks.values()) p.alive = false;
    for (const { pid, kind } of procs) {
      const hwm = statusBytes(pid, 'VmHWM');
      const rss = statusBytes(pid, 'VmRSS');
      if (hwm === null || rss === null) continue;
      const peak = this.peaks.get(pid) ?? { pid, kind, hwmBytes: 0, rssMaxBytes: 0, alive: true };
      peak.alive = true;
      peak.hwmBytes = Math.max(peak.hwmBytes, hwm);
      peak.rssMaxBytes = Math.max(peak.rssMaxBytes, rss);
      this.peaks.set(pid, peak);
    }
    this.minAvailableBytes = Math.min(this.minAvailableBytes, memAvailableBytes());
  }

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), 1000);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.sample();
  }

  /** VmRSS now of the live processes of a kind, in GiB (the largest). */
  residentOf(kind: string): number | null {
    const rss = [...this.peaks.values()].filter((p) => p.kind === kind && p.alive).map((p) => statusBytes(p.pid, 'VmRSS') ?? 0);
    return rss.length ? round(Math.max(...rss) / GiB, 3) : null;
  }

  /** Peak of the processes of a kind (a worker restarted mid-run counts with its successor: the larger). */
  peakOf(kind: string): { pid: number; gib: number; rss_max_gib: number; processes: number } | null {
    const ps = [...this.peaks.values()].filter((p) => p.kind === kind);
    if (!ps.length) return null;
    const top = ps.reduce((a, b) => (b.hwmBytes > a.hwmBytes ? b : a));
    return { pid: top.pid, gib: round(top.hwmBytes / GiB, 3), rss_max_gib: round(top.rssMaxBytes / GiB, 3), processes: ps.length };
  }
}

// ---- HTTP without client timeouts (an 8B's first request loads it: minutes on a shared CPU) ----

// A fresh connection per call: the script waits minutes between some calls, and a kept-alive socket the server has
// closed meanwhile answers the next write with EPIPE.
const agent = new http.Agent({ keepAlive: false });

async function call<T>(base: string, key: string, method: string, p: string, body?: unknown, ndjson?: string): Promise<T> {
  const url = new URL(p, base);
  const payload = ndjson ?? (body === undefined ? undefined : JSON.stringify(body));
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (payload !== undefined) headers['content-type'] = ndjson !== undefined ? 'application/x-ndjson' : 'application/json';
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(url, { method, headers, agent }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (data += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: data }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
  if (status < 200 || status >= 300) throw new Error(`${method} ${p} answered ${status}: ${text.slice(0, 1000)}`);
  return JSON.parse(text) as T;
}

// ---- steps ----

function ensureGguf(): { generated: boolean; seconds: number | null } {
  if (fs.existsSync(GGUF)) {
    say(`reusing ${GGUF} (${(fs.statSync(GGUF).size / 1e9).toFixed(2)} GB)`);
    return { generated: false, seconds: null };
  }
  fs.mkdirSync(path.dirname(GGUF), { recursive: true });
  const needed = 5.5e9;
  const free = fs.statfsSync(path.dirname(GGUF));
  if (free.bavail * free.bsize < 2 * needed) throw new Error(`${path.dirname(GGUF)} has ${(free.bavail * free.bsize / 1e9).toFixed(1)} GB free; the GGUF and its imported copy need ~${(2 * needed / 1e9).toFixed(0)} GB`);
  say(`generating the ${SHAPE} ${TYPE} GGUF at ${GGUF} (the 8B: minutes)`);
  const started = Date.now();
  const tmp = path.join(path.dirname(GGUF), `.partial-${path.basename(GGUF)}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(REPO, 'scripts/make-tiny-model.ts'), '--gguf', tmp, '--type', TYPE, '--shape', SHAPE], { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-tiny-model failed (${r.status})`);
  fs.renameSync(tmp, GGUF);
  return { generated: true, seconds: round((Date.now() - started) / 1000, 1) };
}

/** One chat row whose tokenized sequence is `tokens` long, as the job will tokenize it (same template and tokenizer). */
async function sftRow(modelDir: string, tokens: number): Promise<{ jsonl: string; tokens: number; trainable: number }> {
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8'));
  const tokenizer = chatTokenizerFrom(loadTokenizer(modelDir), chatTemplateFromConfig(tokenizerConfig));
  const words = 'the quiet river ran past the old mill where the miller kept his stones and his stories of the winter when the water froze'.split(' ');
  const row = (n: number) => ({
    messages: [
      { role: 'user', content: 'Tell me about the old mill by the river.' },
      { role: 'assistant', content: Array.from({ length: n }, (_, i) => words[i % words.length]).join(' ') },
    ],
  });
  const length = async (n: number) => {
    const { sequences } = await tokenizeSftRows([row(n)], tokenizer, {});
    return { ids: sequences[0].ids.length, trainable: sequences[0].lossMask.filter((m, t) => t > 0 && m).length };
  };
  // The largest answer whose sequence fits `tokens` (lengths grow with the word count).
  let lo = 1;
  let hi = 2;
  while ((await length(hi)).ids <= tokens) hi *= 2;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((await length(mid)).ids <= tokens) lo = mid;
    else hi = mid;
  }
  const got = await length(lo);
  return { jsonl: JSON.stringify(row(lo)) + '\n', tokens: got.ids, trainable: got.trainable };
}

async function waitForMemory(gib: number, what: string): Promise<{ waited_s: number; available_gib: number; went_ahead_below: boolean }> {
  const started = Date.now();
  for (;;) {
    const avail = memAvailableBytes() / GiB;
    if (avail >= gib) return { waited_s: round((Date.now() - started) / 1000, 0), available_gib: round(avail, 1), went_ahead_below: false };
    if (Date.now() - started >= WAIT_MAX_S * 1000) {
      say(`only ${avail.toFixed(1)} GiB available after ${WAIT_MAX_S} s of waiting for ${gib} before ${what}: going ahead anyway`);
      return { waited_s: round((Date.now() - started) / 1000, 0), available_gib: round(avail, 1), went_ahead_below: true };
    }
    say(`${avail.toFixed(1)} GiB available, waiting for ${gib} before ${what} (other work on the machine); next look in 30 s`);
    await sleep(30_000);
  }
}

function lscpu(): { model: string; avx512: string[] } {
  const r = spawnSync('lscpu', [], { encoding: 'utf8' });
  const model = /Model name:\s*(.+)/.exec(r.stdout ?? '')?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  const flags = /Flags:\s*(.+)/.exec(r.stdout ?? '')?.[1]?.split(/\s+/) ?? [];
  return { model, avx512: flags.filter((f) => f.startsWith('avx512')) };
}

function gitCommit(): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO, encoding: 'utf8' });
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO, encoding: 'utf8' }).stdout.trim() !== '';
  return `${r.stdout.trim()}${dirty ? '+dirty' : ''}`;
}

/** Cancel job `id` `afterS` seconds after its training_started; how long its `training_failed` took to come. */
async function cancelMidStep(url: string, key: string, id: string, afterS: number): Promise<Record<string, unknown>> {
  say(`job ${id}: to be cancelled ${afterS} s after training_started`);
  let after = '';
  let startedAt: number | null = null;
  let cancelledAt: number | null = null;
  for (;;) {
    const page = await call<{ data: { id: string; type: string; data: Record<string, unknown> }[] }>(url, key, 'GET', `/v1/preview/training-jobs/${id}/events?limit=100${after ? `&after=${after}` : ''}`);
    for (const e of page.data) {
      after = e.id;
      if (e.type === 'training_started') startedAt = Date.now();
      if (e.type === 'gradient_step') throw new Error(`the job to cancel finished its step first (cancel after ${afterS} s: too late)`);
      if (e.type === 'training_ended') throw new Error('the job to cancel ended');
      if (e.type === 'training_failed') {
        if (!cancelledAt || e.data.cancelled !== true) throw new Error(`the job to cancel failed: ${JSON.stringify(e.data)}`);
        const endedAfterMs = Date.now() - cancelledAt;
        const status = (await call<{ status: string }>(url, key, 'GET', `/v1/preview/training-jobs/${id}`)).status;
        say(`job ${id}: ${status} ${endedAfterMs} ms after the cancel`);
        return { job: id, cancelled_after_started_s: round((cancelledAt - startedAt!) / 1000, 1), ended_after_cancel_ms: endedAfterMs, status };
      }
    }
    if (startedAt && !cancelledAt && Date.now() - startedAt >= afterS * 1000) {
      await call(url, key, 'POST', `/v1/preview/training-jobs/${id}/cancel`);
      cancelledAt = Date.now();
      say(`job ${id}: cancel sent ${((cancelledAt - startedAt) / 1000).toFixed(1)} s after training_started`);
    }
    await sleep(cancelledAt ? 50 : 500);
  }
}

async function main() {
  fs.mkdirSync(WORK, { recursive: true });
  const cpu = lscpu();
  say(`${machineLabel()}; ${cpu.model}; avx512: ${cpu.avx512.join(' ') || 'none'}`);
  const gguf = ensureGguf();

  const home = fs.mkdtempSync(path.join(WORK, 'home-'));
  const store = Store.open(dbPath(home));
  const key = new ApiKeys(store, null).create(ENTITY).key;
  store.close();

  say(`hearth models import ${GGUF} --id ${MODEL_ID} (HEARTH_HOME=${home})`);
  const importStarted = Date.now();
  const imp = spawnSync(process.execPath, [HEARTH_BIN, 'models', 'import', GGUF, '--id', MODEL_ID], { env: { ...process.env, HEARTH_HOME: home }, encoding: 'utf8' });
  if (imp.status !== 0) throw new Error(`import failed (${imp.status}): ${imp.stderr}${imp.stdout}`);
  const importSeconds = round((Date.now() - importStarted) / 1000, 1);
  say(imp.stdout.trim());
  const modelDir = path.join(home, 'models', ...MODEL_ID.split('/'));
  if (!fs.existsSync(path.join(modelDir, 'config.json'))) throw new Error(`no imported model at ${modelDir}`);

  const row = await sftRow(modelDir, TOKENS);
  say(`SFT data: one chat row of ${row.tokens} tokens (${row.trainable} trained)`);

  say('starting hearth serve');
  const server = await startServe({ HEARTH_HOME: home, HOST: '127.0.0.1', ...SERVE_ENV }, 180_000);
  const logPath = path.join(WORK, 'serve.log');
  const logStream = fs.createWriteStream(logPath);
  logStream.write(server.output());
  server.child.stdout!.on('data', (d) => logStream.write(d));
  server.child.stderr!.on('data', (d) => logStream.write(d));
  // The training worker's own lines (engine, graphs built) on stderr too.
  const echo = (d: Buffer) => {
    for (const line of String(d).split('\n')) {
      if (!line.trim() || /"reqId"/.test(line)) continue; // request logs
      if (/"worker":"training"|"level":[456]0|killed|heartbeat/.test(line)) say(`serve: ${line.trim().slice(0, 400)}`);
    }
  };
  server.child.stdout!.on('data', echo);
  server.child.stderr!.on('data', echo);
  say(`serving at ${server.url} (pid ${server.child.pid}); log ${logPath}`);

  const watch = new RssWatch(server.child.pid!);
  watch.start();
  const result: Record<string, unknown> = {};
  try {
    for (let tries = 0; ; tries++) {
      const r = await fetch(`${server.url}/v1/system-check`);
      await r.text();
      if (r.status === 200) break;
      if (tries > 240) throw new Error('the workers did not come up within 120 s');
      await sleep(500);
    }
    const models = await call<{ data: { id: string }[] }>(server.url, key, 'GET', '/v1/models');
    if (!models.data.some((m) => m.id === MODEL_ID)) throw new Error(`/v1/models does not list ${MODEL_ID}: ${models.data.map((m) => m.id).join(', ')}`);

    const model = await call<{ id: string; entity: string }>(server.url, key, 'POST', '/v1/preview/models', { project: PROJECT, name: NAME, base_model: MODEL_ID });
    const dataset = await call<{ url: string }>(server.url, key, 'POST', `/v1/preview/datasets?project=${PROJECT}&name=one-row`, undefined, row.jsonl);
    say(`model ${model.id} on ${MODEL_ID}; dataset ${dataset.url}`);

    const memory = await waitForMemory(WAIT_FREE_GIB, 'the job');
    const startJob = () => call<{ id: string }>(server.url, key, 'POST', '/v1/preview/sft-training-jobs', {
      model_id: model.id, training_data_url: dataset.url, config: { batch_size: 1, learning_rate: 1e-4 },
    });
    if (CANCEL_AFTER_S !== null) result.cancel = await cancelMidStep(server.url, key, (await startJob()).id, CANCEL_AFTER_S);
    say(`${memory.available_gib} GiB available: starting the SFT job`);
    const jobStarted = Date.now();
    const job = await startJob();
    say(`job ${job.id}`);

    let after = '';
    let startedAt: number | null = null;
    let step: Record<string, unknown> | null = null;
    let stepAt: number | null = null;
    let lastNote = 0;
    for (;;) {
      const page = await call<{ data: { id: string; type: string; data: Record<string, unknown> }[]; has_more: boolean }>(
        server.url, key, 'GET', `/v1/preview/training-jobs/${job.id}/events?limit=100${after ? `&after=${after}` : ''}`,
      );
      let ended = false;
      for (const e of page.data) {
        after = e.id;
        if (e.type === 'training_started') { startedAt = Date.now(); say(`training_started after ${((startedAt - jobStarted) / 1000).toFixed(0)} s (load and graph build)`); }
        if (e.type === 'gradient_step') { step = e.data; stepAt = Date.now(); say(`gradient_step: ${JSON.stringify(e.data)}`); }
        if (e.type === 'training_failed') throw new Error(`the job failed: ${JSON.stringify(e.data)}`);
        if (e.type === 'training_ended') ended = true;
      }
      if (ended) break;
      if (!page.has_more) {
        if (Date.now() - lastNote > 60_000) {
          lastNote = Date.now();
          const w = watch.peakOf('training-worker');
          say(`waiting on the job (${((Date.now() - jobStarted) / 1000).toFixed(0)} s): training worker peak ${w?.gib ?? '?'} GiB, ${(memAvailableBytes() / GiB).toFixed(1)} GiB available`);
        }
        await sleep(2000);
      }
    }
    const endedAt = Date.now();
    const detail = await call<Record<string, unknown>>(server.url, key, 'GET', `/v1/preview/training-jobs/${job.id}`);
    const checkpoints = await call<{ data: { step: number }[] }>(server.url, key, 'GET', `/v1/preview/models/${model.id}/checkpoints?limit=1&order=desc`);
    const ckStep = checkpoints.data[0]?.step;
    if (ckStep === undefined) throw new Error('the job ended but the model has no checkpoint');
    const checkpointName = `wandb-artifact:///${model.entity}/${PROJECT}/${NAME}:step${ckStep}`;
    watch.sample();
    const trainingPeak = watch.peakOf('training-worker');
    say(`training_ended; checkpoint ${checkpointName}; training worker peak RSS ${trainingPeak?.gib} GiB`);
    // What the idle training worker still holds once its job is over (the engine gives its freed memory back:
    // worker/training/graph/freed-memory.ts), five seconds on.
    await sleep(5000);
    watch.sample();
    const trainingResidentAfter = watch.residentOf('training-worker');
    say(`training worker resident 5 s after the job: ${trainingResidentAfter} GiB`);

    // The inference worker's first load of the 8B peaks at ~12.4 GiB resident (part of it the model file's pages)
    // while the finished training worker still holds ~9.7 GiB: on a shared 24 GiB box that can meet someone else's
    // job. Wait for room; 10 GiB, since with the training worker's 9.7 GiB at most ~13 can ever be free, and the first
    // run's load took MemAvailable from ~9.5 to 4.7 GiB.
    const memoryBeforeChat = await waitForMemory(WAIT_CHAT_GIB, 'the first chat completion');
    say(`asking ${checkpointName} for 8 tokens (the inference worker's first load of the 8B: minutes)`);
    const chatStarted = Date.now();
    const chat = await call<{ choices: { message: { content: string | null }; finish_reason: string }[]; usage: Record<string, number>; model: string }>(
      server.url, key, 'POST', '/v1/chat/completions',
      { model: checkpointName, messages: [{ role: 'user', content: 'Tell me about the old mill by the river.' }], max_tokens: 8, temperature: 0, ignore_eos: true },
    );
    const chatSeconds = round((Date.now() - chatStarted) / 1000, 1);
    say(`answer in ${chatSeconds} s: ${JSON.stringify(chat.choices[0]?.message.content)}`);
    watch.stop();

    const tokens = Number(step?.num_tokens ?? NaN);
    const tps = Number(step?.tokens_per_second ?? NaN);
    Object.assign(result, {
      ok: true,
      date: new Date().toISOString(),
      machine: machineLabel(),
      cpu,
      commit: gitCommit(),
      serve_env: SERVE_ENV,
      gguf: { path: GGUF, bytes: fs.statSync(GGUF).size, ...gguf },
      import_s: importSeconds,
      data: { rows: 1, tokens: row.tokens, trained_tokens: row.trainable },
      memory_before_job: memory,
      memory_before_chat: memoryBeforeChat,
      min_available_gib: round(watch.minAvailableBytes / GiB, 1),
      job: {
        id: job.id,
        status: detail.status,
        to_training_started_s: startedAt ? round((startedAt - jobStarted) / 1000, 1) : null,
        started_to_step_s: startedAt && stepAt ? round((stepAt - startedAt) / 1000, 1) : null,
        step_to_ended_s: stepAt ? round((endedAt - stepAt) / 1000, 1) : null,
        total_s: round((endedAt - jobStarted) / 1000, 1),
        step,
        step_seconds: round(tokens / tps, 1),
        tokens_per_second: round(tps, 3),
      },
      checkpoint: checkpointName,
      chat: { seconds: chatSeconds, content: chat.choices[0]?.message.content ?? null, finish_reason: chat.choices[0]?.finish_reason, usage: chat.usage },
      peak_rss_gib: { training_worker: trainingPeak, api: watch.peakOf('api'), inference_worker: watch.peakOf('inference-worker') },
      training_worker_resident_after_job_gib: trainingResidentAfter,
      bar: { limit_gib: 14, training_worker_within: trainingPeak !== null && trainingPeak.gib <= 14 },
      processes: [...watch.peaks.values()].map((p) => ({ pid: p.pid, kind: p.kind, hwm_gib: round(p.hwmBytes / GiB, 3), alive: p.alive })),
      elapsed_s: round((Date.now() - t0) / 1000, 0),
    });
  } catch (err) {
    watch.stop();
    Object.assign(result, {
      ok: false,
      error: (err as Error).message,
      commit: gitCommit(),
      cpu,
      peak_rss_gib: { training_worker: watch.peakOf('training-worker'), api: watch.peakOf('api'), inference_worker: watch.peakOf('inference-worker') },
      processes: [...watch.peaks.values()].map((p) => ({ pid: p.pid, kind: p.kind, hwm_gib: round(p.hwmBytes / GiB, 3), alive: p.alive })),
      serve_log: logPath,
      elapsed_s: round((Date.now() - t0) / 1000, 0),
    });
    process.exitCode = 1;
  } finally {
    await server.stop();
    logStream.end();
    if (!KEEP) fs.rmSync(home, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
