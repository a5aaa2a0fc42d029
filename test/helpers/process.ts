// Run the real `hearth` CLI as a child process (what users run), for restart and fault tests.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const HEARTH_BIN = path.join(REPO, 'bin/hearth.js');

export function hearthSync(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, [HEARTH_BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/** Start `hearth serve` and wait until it prints its URL. */
export async function startServe(env: Record<string, string>, timeoutMs = 30_000): Promise<ServeProcess> {
  const port = env.PORT ?? String(await freePort());
  // REDIS_URL from the caller's environment (CI exports one) would switch serve to BullMQ: embedded unless asked.
  const child = spawn(process.execPath, [HEARTH_BIN, 'serve'], { env: { ...process.env, REDIS_URL: '', LOG_LEVEL: 'warn', ...env, PORT: port }, stdio: ['ignore', 'pipe', 'pipe'] });
  // A test that times out never reaches its `finally`: take the server down with the test process.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.once('exit', () => process.removeListener('exit', reap));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hearth serve did not start in ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`hearth serve exited with ${code}:\n${out}`));
    });
  });
  return {
    child,
    url,
    output: () => out,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill(signal);
      }),
  };
}
