// The least a streamed request can cost over HTTP when the engine runs off the server's event loop, whatever
// the server does: a bare node:http server that hands each request to a worker (a forked process over IPC, or
// with --thread a worker thread); the worker holds the CPU for `busy_ms` (standing in for a prefill, so the server
// and client sleep as they would) and answers one SSE chunk, which the server forwards. No framework, no auth, no
// validation, no JSON beyond one parse. bench:serve runs it next to `hearth serve` and reports its overhead (time
// to first byte minus busy_ms) beside Hearth's, as the floor the API+queue overhead bar is measured against.
// Streaming (--itl, measureServeFloorItl): the worker runs one step loop for all open streams, as an engine does:
// it holds the CPU for `step_ms`, then sends one message naming the streams that got a token, and the server
// writes each of them a chunk. Closed-loop clients measure the inter-token latency: what HTTP, IPC, the
// processes sharing the cores and the operating system add to a steady step time, with no model, sampler or
// garbage behind it. Its ITL p99 / p50 is the least any server with a worker process shows here at that step
// time; bench:serve reports it beside the ITL bar.
//   npx tsx scripts/serve-floor.ts --measure --busy-ms 2.7 [--thread]   prints {"worker", "busy_ms", "overhead_ms"}
//   npx tsx scripts/serve-floor.ts --itl --step-ms 0.7 [--tokens 64] [--concurrency 8]   prints {"step_ms", "itl_ms": {p50, p99}}
//   npx tsx scripts/serve-floor.ts --serve [--thread | --model <dir> [--fastify]]     prints the URL, serves until killed
//     (--model: the worker answers each request with a one-token completion of its `prompt` on that model;
//      --fastify: the server is Fastify with a bearer-key hook, answering POST /v1/completions bodies that pass the
//      completion request's zod schema: the stack Hearth's API is built on, without Hearth's code)
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { workerNodeFlags } from '../src/queue/embedded.js';

const SELF = fileURLToPath(import.meta.url);
const CHUNK = 'data: {"choices":[{"index":0,"text":"x"}]}\n\n';

type Job = { id: number; busyMs: number; stepMs?: number; tokens?: number; prompt?: string };
/** The engine worker's answer: the job, and its time from taking the job to the first token (as Hearth's Server-Timing `worker`). */
type EngineReply = { id: number; workerMs: number };

/** The worker's side: hold the CPU as a prefill would, then answer (the thread variant below does the same). */
function work(job: Job, reply: (id: number) => void): void {
  const until = performance.now() + job.busyMs;
  while (performance.now() < until);
  reply(job.id);
}

/**
 * The worker's streaming side: one loop over all open streams, each step holding the CPU for stepMs and then
 * reporting [ids that got a token, ids that finished] in one message (the engine's one IPC write per step).
 */
function streamSteps(send: (msg: [number[], number[]]) => void): (job: Job) => void {
  const open = new Map<number, number>();
  let stepMs = 0, looping = false;
  const loop = () => {
    if (open.size === 0) return void (looping = false);
    const until = performance.now() + stepMs;
    while (performance.now() < until);
    const ids = [...open.keys()], finished: number[] = [];
    for (const id of ids) {
      const left = open.get(id)! - 1;
      if (left === 0) (open.delete(id), finished.push(id));
      else open.set(id, left);
    }
    send([ids, finished]);
    setImmediate(loop); // new streams join between steps
  };
  return (job) => {
    stepMs = job.stepMs!;
    open.set(job.id, job.tokens!);
    if (!looping) (looping = true, setImmediate(loop));
  };
}

/**
 * The worker's side with a real engine (--model): each job is a one-token streamed completion of its prompt on the
 * model, answered at its first chunk. This floor pays what the engine itself pays in a worker process: a 1.1B
 * model's request there, over IPC, took 0.7 ms more than in process and its engine ran up to 1.7 ms slower
 * (a busy loop that touches nothing, or reads through 0.6 GB, shows neither).
 */
async function engineWork(modelDir: string): Promise<(job: Job, reply: (id: number | EngineReply) => void) => void> {
  const { loadModel } = await import('../src/runtime/load-model.js');
  const { createEngineFromRuntime } = await import('../worker/inference/openai-adapter.js');
  const hearth = createEngineFromRuntime(await loadModel(modelDir, { lora: true }), { kvCacheBytes: 2 ** 28 });
  return (job, reply) => {
    const t0 = performance.now();
    let answered = false;
    const body = { model: 'm', prompt: job.prompt ?? 'once', max_tokens: 1, temperature: 0, ignore_eos: true, stream: true };
    void hearth.submit({ kind: 'completion', body, model: 'm', adapter: null }, (e) => {
      if (!answered) (answered = true), reply({ id: job.id, workerMs: performance.now() - t0 });
    });
  };
}

async function serve(thread: boolean, modelDir: string | null, framework: boolean): Promise<void> {
  if (thread && modelDir) throw new Error('serve-floor: --model runs the engine in a worker process; it does not go with --thread');
  const waiting = new Map<number, http.ServerResponse>();
  const done = (msg: number | EngineReply | [number[], number[]]) => {
    if (Array.isArray(msg)) {
      for (const id of msg[0]) waiting.get(id)!.write(CHUNK);
      for (const id of msg[1]) (waiting.get(id)!.end(), waiting.delete(id));
      return;
    }
    const id = typeof msg === 'number' ? msg : msg.id;
    const res = waiting.get(id)!;
    waiting.delete(id);
    // The engine worker's time goes out as Hearth's does (Server-Timing), so bench:serve can set both servers'
    // time outside their engines side by side.
    if (typeof msg !== 'number') res.setHeader('server-timing', `worker;dur=${msg.workerMs.toFixed(2)}`);
    res.end(CHUNK);
  };
  let send: (job: Job) => void, stopWorker: () => void;
  if (thread) {
    // Plain JS, evaluated: a worker thread does not inherit the TypeScript loader this script runs under.
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       parentPort.on('message', (job) => { const until = performance.now() + job.busyMs; while (performance.now() < until); parentPort.postMessage(job.id); });`,
      { eval: true },
    );
    worker.on('message', (id: number) => done(id));
    send = (job) => worker.postMessage(job);
    stopWorker = () => void worker.terminate();
  } else {
    // The worker runs with the Node flags of Hearth's inference workers (--single-threaded-gc by default): without
    // them the floor's engine ran 1.5 ms slower than Hearth's on ~20M's 64-word prompts, and Hearth "beat" its floor.
    const child = fork(SELF, ['--child', ...(modelDir ? ['--model', modelDir] : [])], { execArgv: [...process.execArgv, ...workerNodeFlags('inference')] });
    child.on('message', (msg: number | EngineReply | [number[], number[]]) => done(msg));
    send = (job) => child.send(job);
    stopWorker = () => child.kill();
  }
  let next = 0;
  const dispatch = (res: http.ServerResponse, { busy_ms: busyMs, step_ms: stepMs, tokens, prompt }: { busy_ms: number; step_ms?: number; tokens?: number; prompt?: string }) => {
    res.setHeader('content-type', 'text/event-stream'); // sent with the answer
    const id = next++;
    waiting.set(id, res);
    send({ id, busyMs, stepMs, tokens, prompt });
  };
  if (framework) {
    // The same, on the stack Hearth's API is built on: Fastify, a bearer-key hook, the completion body's zod schema.
    const { default: Fastify } = await import('fastify');
    const { CompletionRequest } = await import('../src/protocol/openai.js');
    const app = Fastify();
    app.addHook('onRequest', async (request, reply) => {
      if (!request.headers.authorization?.startsWith('Bearer ')) return reply.code(401).send({ error: 'no key' });
    });
    app.post('/v1/completions', async (request, reply) => {
      const parsed = CompletionRequest.safeParse(request.body);
      if (!parsed.success) return reply.code(422).send({ detail: parsed.error.issues });
      reply.hijack();
      dispatch(reply.raw, request.body as { busy_ms: number; prompt?: string });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    process.stdout.write(`listening on http://127.0.0.1:${(app.server.address() as { port: number }).port}\n`);
  } else {
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => dispatch(res, JSON.parse(body)));
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}\n`));
  }
  const stop = () => (stopWorker(), process.exit(0));
  process.on('SIGTERM', stop);
  process.on('disconnect', stop);
}

/** A floor server in its own process (its worker running the model in `modelDir`, if given), and its URL. */
export async function startFloor(thread = false, modelDir: string | null = null, framework = false): Promise<{ proc: ChildProcess; url: URL }> {
  const proc: ChildProcess = fork(SELF, ['--serve', ...(thread ? ['--thread'] : []), ...(modelDir ? ['--model', modelDir] : []), ...(framework ? ['--fastify'] : [])], { execArgv: process.execArgv, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const url = new URL(await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.once('exit', (code) => reject(new Error(`serve-floor exited with ${code}`)));
  }));
  return { proc, url };
}

/** `total` calls of `task` from `clients` closed-loop clients: each starts its next call when its last one ends. */
export async function closedLoopCalls(clients: number, total: number, task: () => Promise<unknown>): Promise<void> {
  let started = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (started++ < total) await task();
  }));
}

/**
 * Inter-token latency through the floor server (worker process) at a steady step time: `concurrency` closed-loop
 * clients, `requests` streams of `tokens` tokens each; p50 and p99 of the gaps between chunks, in ms.
 */
export async function measureServeFloorItl(stepMs: number, opts: { tokens?: number; concurrency?: number; requests?: number } = {}): Promise<{ p50: number; p99: number }> {
  const { tokens = 64, concurrency = 8, requests = 48 } = opts;
  const { proc, url } = await startFloor();
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    const body = JSON.stringify({ busy_ms: 0, step_ms: stepMs, tokens, prompt: Array.from({ length: 64 }, () => 'once').join(' ') });
    const gaps: number[] = [];
    const once = () =>
      new Promise<void>((resolve, reject) => {
        let last = 0, buffer = '';
        const req = http.request({ host: url.hostname, port: url.port, path: '/', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (part: string) => {
            const now = performance.now();
            buffer += part;
            let i: number;
            while ((i = buffer.indexOf('\n\n')) >= 0) {
              JSON.parse(buffer.slice(6, i)); // the client's parse, as bench:serve's clients do
              buffer = buffer.slice(i + 2);
              if (last) gaps.push(now - last);
              last = now;
            }
          });
          res.on('end', () => resolve());
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    await closedLoopCalls(concurrency, requests, once);
    agent.destroy();
    gaps.sort((a, b) => a - b);
    return { p50: gaps[Math.floor(gaps.length / 2)], p99: gaps[Math.min(gaps.length - 1, Math.floor(0.99 * gaps.length))] };
  } finally {
    proc.kill();
  }
}

/** One request to a floor server: ms from sending `body` to the response's first byte (the response is read to its end). */
export async function firstByteMs(url: URL, agent: http.Agent, body: string): Promise<number> {
  return (await firstByte(url, agent, body)).ms;
}

/** firstByteMs, and the engine worker's own time (its Server-Timing `worker`; NaN from a busy-loop worker). */
export function firstByte(url: URL, agent: http.Agent, body: string): Promise<{ ms: number; workerMs: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = 0;
    const req = http.request({ host: url.hostname, port: url.port, path: '/', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.on('data', () => (first ||= performance.now() - t0));
      res.on('end', () => resolve({ ms: first, workerMs: serverTimingDur(res.headers['server-timing'], 'worker') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A metric's `dur` in a Server-Timing header (NaN when absent). */
export function serverTimingDur(header: string | string[] | undefined, name: string): number {
  const text = Array.isArray(header) ? header.join(', ') : (header ?? '');
  const m = new RegExp(`(?:^|,)\\s*${name};(?:[^,]*;)?dur=([\\d.]+)`).exec(text);
  return m ? Number(m[1]) : NaN;
}

/**
 * Median over `n` requests of (time to first byte − busyMs), against a floor server in its own process, after
 * `warmup` requests (8 at a time): V8 optimizes the server's request path only after some hundreds of them.
 */
export async function measureServeFloor(busyMs: number, n = 48, opts: { thread?: boolean; warmup?: number } = {}): Promise<number> {
  const { proc, url } = await startFloor(opts.thread);
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // A prompt-sized body, as a completion request would send.
    const body = JSON.stringify({ busy_ms: busyMs, prompt: Array.from({ length: 64 }, () => 'once').join(' ') });
    const once = async () => (await firstByteMs(url, agent, body)) - busyMs;
    // The warm-up is for the server's request path: its worker does not hold the CPU for it (a real-size model's
    // busyMs is ~1 s, and the worker takes one job at a time).
    const warmAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const warmBody = JSON.stringify({ busy_ms: 0, prompt: Array.from({ length: 64 }, () => 'once').join(' ') });
    await closedLoopCalls(8, opts.warmup ?? 0, () => firstByteMs(url, warmAgent, warmBody));
    warmAgent.destroy();
    for (let i = 0; i < 8; i++) await once();
    const overheads: number[] = [];
    for (let i = 0; i < n; i++) overheads.push(await once());
    agent.destroy();
    return overheads.sort((a, b) => a - b)[Math.floor(n / 2)];
  } finally {
    proc.kill();
  }
}

const modelArg = process.argv.includes('--model') ? process.argv[process.argv.indexOf('--model') + 1] : null;
if (process.argv.includes('--child')) {
  const stream = streamSteps((msg) => process.send!(msg));
  // With a model, jobs queue until it is loaded (the server starts at once; the bench warms it up).
  const run = modelArg ? engineWork(modelArg) : Promise.resolve(work);
  process.on('message', (job: Job) => (job.stepMs ? stream(job) : void run.then((w) => w(job, (reply) => process.send!(reply)))));
} else if (process.argv.includes('--itl')) {
  const flag = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback);
  const stepMs = flag('--step-ms', 1);
  const itl = await measureServeFloorItl(stepMs, { tokens: flag('--tokens', 64), concurrency: flag('--concurrency', 8) });
  const r = (x: number) => Math.round(x * 1000) / 1000;
  process.stdout.write(`${JSON.stringify({ step_ms: stepMs, itl_ms: { p50: r(itl.p50), p99: r(itl.p99) }, p99_over_p50: r(itl.p99 / itl.p50) })}\n`);
}
else if (process.argv.includes('--serve')) await serve(process.argv.includes('--thread'), modelArg, process.argv.includes('--fastify'));
else if (process.argv.includes('--measure')) {
  const i = process.argv.indexOf('--busy-ms');
  const busyMs = i >= 0 ? Number(process.argv[i + 1]) : 0;
  const thread = process.argv.includes('--thread');
  const overhead = await measureServeFloor(busyMs, 64, { thread });
  process.stdout.write(`${JSON.stringify({ worker: thread ? 'thread' : 'process', busy_ms: busyMs, overhead_ms: Math.round(overhead * 1000) / 1000 })}\n`);
}
