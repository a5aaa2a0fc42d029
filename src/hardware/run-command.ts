// Runs a vendor tool (nvidia-smi, rocm-smi) with a timeout and turns every way it can go wrong
// into a value: detection must never crash a worker because a driver is missing or hung.
import { execFile } from 'node:child_process';

export type CommandResult =
  | { status: 'ok'; stdout: string }
  | { status: 'absent'; detail: string }
  | { status: 'failed'; detail: string };

export interface RunOptions {
  /** Environment for the child; its PATH decides where the tool is looked up. */
  env?: NodeJS.ProcessEnv;
  timeoutMs: number;
}

export function runCommand(command: string, args: readonly string[], opts: RunOptions): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: opts.env, timeout: opts.timeoutMs, killSignal: 'SIGKILL', maxBuffer: 4 * 2 ** 20, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (!error) return resolve({ status: 'ok', stdout });
        const err = error as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null; code?: unknown };
        if (err.code === 'ENOENT') return resolve({ status: 'absent', detail: `${command} not found on PATH` });
        if (err.killed || err.signal === 'SIGKILL') {
          return resolve({ status: 'failed', detail: `${command} timed out after ${opts.timeoutMs} ms` });
        }
        const why = (stderr || stdout || err.message).trim().split('\n').slice(0, 3).join(' | ');
        resolve({ status: 'failed', detail: `${command} exited with ${String(err.code ?? err.signal)}: ${why}` });
      },
    );
  });
}
