// The least a streamed request can cost over HTTP when the engine runs off the server's event loop, whatever
// the server does: a bare node:http server that hands each request to a worker (a forked process over IPC, or
// with --thread a worker thread); the worker holds the CPU for `busy_ms` (standing in for a prefill, so the server
// and client sleep as they would) and answers one SSE chunk, which the server forwards. No framework, no auth, no
// validation, no JSON beyond one parse. bench:serve runs it next to `hearth serve` and reports its overhead (time
// to first byte minus busy_ms) beside Hearth's, as the floor the API+queue overhead bar is measured against.
//   npx tsx scripts/serve-floor.ts --measure --busy-ms 2.7 [--thread]   prints {"worker", "busy_ms", "overhead_ms"}
//   npx tsx scripts/serve-floor.ts --serve [--thread]                    prints the URL, serves until killed
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const SELF = fileURLToPath(import.meta.url);
const CHUNK = 'data: {"choices":[{"index":0,"text":"x"}]}\n\n';

type Job = { id: number; busyMs: number };

/** The worker's side: hold the CPU as a prefill would, then answer (the thread variant below does the same). */
function work(job: Job, reply: (id: number) => void): void {
  const until = performance.now() + job.busyMs;
  while (performance.now() < until);
  reply(job.id);
}

function serve(thread: boolean): void {
  const waiting = new Map<number, http.ServerResponse>();
  const done = (id: number) => {
    const res = waiting.get(id)!;
    waiting.delete(id);
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
    const child = fork(SELF, ['--child'], { execArgv: process.execArgv });
    child.on('message', (id: number) => done(id));
    send = (job) => child.send(job);
    stopWorker = () => child.kill();
  }
  let next = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const { busy_ms: busyMs } = JSON.parse(body) as { busy_ms: number };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const id = next++;
      waiting.set(id, res);
      send({ id, busyMs });
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}\n`));
  const stop = () => (stopWorker(), process.exit(0));
  process.on('SIGTERM', stop);
  process.on('disconnect', stop);
}

/** Median over `n` requests of (time to first byte − busyMs), against a floor server in its own process. */
export async function measureServeFloor(busyMs: number, n = 48, opts: { thread?: boolean } = {}): Promise<number> {
  const args = ['--serve', ...(opts.thread ? ['--thread'] : [])];
  const proc: ChildProcess = fork(SELF, args, { execArgv: process.execArgv, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  try {
    const url = new URL(await new Promise<string>((resolve, reject) => {
      let out = '';
      proc.stdout!.on('data', (d) => {
        out += d;
        const m = /listening on (\S+)/.exec(out);
        if (m) resolve(m[1]);
      });
      proc.once('exit', (code) => reject(new Error(`serve-floor exited with ${code}`)));
    }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // A prompt-sized body, as a completion request would send.
    const body = JSON.stringify({ busy_ms: busyMs, prompt: Array.from({ length: 64 }, () => 'once').join(' ') });
    const once = () =>
      new Promise<number>((resolve, reject) => {
        const t0 = performance.now();
        let first = 0;
        const req = http.request({ host: url.hostname, port: url.port, path: '/', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
          res.on('data', () => (first ||= performance.now() - t0));
          res.on('end', () => resolve(first - busyMs));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    for (let i = 0; i < 8; i++) await once();
    const overheads: number[] = [];
    for (let i = 0; i < n; i++) overheads.push(await once());
    agent.destroy();
    return overheads.sort((a, b) => a - b)[Math.floor(n / 2)];
  } finally {
    proc.kill();
  }
}

if (process.argv.includes('--child')) process.on('message', (job: Job) => work(job, (id) => process.send!(id)));
else if (process.argv.includes('--serve')) serve(process.argv.includes('--thread'));
else if (process.argv.includes('--measure')) {
  const i = process.argv.indexOf('--busy-ms');
  const busyMs = i >= 0 ? Number(process.argv[i + 1]) : 0;
  const thread = process.argv.includes('--thread');
  const overhead = await measureServeFloor(busyMs, 64, { thread });
  process.stdout.write(`${JSON.stringify({ worker: thread ? 'thread' : 'process', busy_ms: busyMs, overhead_ms: Math.round(overhead * 1000) / 1000 })}\n`);
}
