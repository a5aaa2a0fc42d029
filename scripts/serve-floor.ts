// The least a streamed request can cost over HTTP to a worker process on this machine, whatever the server
// does: a bare node:http server that hands each request to a forked child over IPC; the child holds the CPU
// for `--busy-ms` (standing in for a prefill, so the server and client sleep as they would) and answers one
// SSE chunk, which the server forwards. No framework, no auth, no validation, no JSON beyond one parse.
// bench:serve runs it next to `hearth serve` and reports its overhead (time to first byte minus busy-ms)
// beside Hearth's, as the floor the API+queue overhead bar is measured against.
//   npx tsx scripts/serve-floor.ts --serve            prints the URL on stdout, serves until killed
//   import { measureServeFloor } from './serve-floor.js'
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);

function child(): void {
  process.on('message', (m: { id: number; busyMs: number }) => {
    const until = performance.now() + m.busyMs;
    while (performance.now() < until); // the engine's prefill holds the worker's thread the same way
    process.send!({ id: m.id, chunk: 'data: {"choices":[{"index":0,"text":"x"}]}\n\n' });
  });
}

function serve(): void {
  const worker = fork(SELF, ['--child'], { execArgv: process.execArgv });
  const waiting = new Map<number, http.ServerResponse>();
  let next = 0;
  worker.on('message', (m: { id: number; chunk: string }) => {
    const res = waiting.get(m.id)!;
    waiting.delete(m.id);
    res.end(m.chunk);
  });
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const { busy_ms: busyMs } = JSON.parse(body) as { busy_ms: number };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const id = next++;
      waiting.set(id, res);
      worker.send({ id, busyMs });
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}\n`));
  const stop = () => (worker.kill(), process.exit(0));
  process.on('SIGTERM', stop);
  process.on('disconnect', stop);
}

/** Median over `n` requests of (time to first byte − busyMs), against a floor server in its own process. */
export async function measureServeFloor(busyMs: number, n = 48): Promise<number> {
  const proc: ChildProcess = fork(SELF, ['--serve'], { execArgv: process.execArgv, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
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

if (process.argv.includes('--child')) child();
else if (process.argv.includes('--serve')) serve();
