// Embedded queue: `hearth serve` starts its own worker child processes and feeds them over IPC.
// Pending training jobs live in the SQLite store (the scheduler reads them), so a restart resumes them.
// A child that exits is replaced; whatever it held fails at once (no waiting for a heartbeat timeout).
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { QueueAdapter, QueueHealth } from './port.js';
import type { ApiToWorker, InferenceEventMessage, InferenceTask, IpcPiece, TrainingTask, WorkerKind, WorkerMessage } from '../protocol/messages.js';
import { WorkerMessage as WorkerMessageSchema } from '../protocol/messages.js';

const HEARTH_BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/hearth.js');

/**
 * Node flags of a worker child. Inference workers default to `--single-threaded-gc`: ONNX Runtime keeps a
 * thread per core busy during each step, and V8's concurrent marking threads preempt those threads, so every
 * parallel section waits for the preempted one (measured on ~20M at 8 streams on 2 cores: ITL p99/p50 1.7–2.2
 * against 2.3–2.9, a third of the full GCs; docs/benchmarks.md). HEARTH_INFERENCE_NODE_FLAGS replaces the
 * default (empty: none). V8 cannot change this after start, hence a flag of the child, not code in it.
 */
export function workerNodeFlags(kind: WorkerKind, env: NodeJS.ProcessEnv = process.env): string[] {
  if (kind !== 'inference') return [];
  const given = env.HEARTH_INFERENCE_NODE_FLAGS;
  return (given ?? '--single-threaded-gc').split(/\s+/).filter(Boolean);
}

/**
 * An `inference.event` message carrying a chunk, as WorkerMessage's schema has it: a request id, a chunk event with
 * any data, and maybe the worker's time.
 */
export function isChunk(raw: unknown): raw is InferenceEventMessage {
  if (typeof raw !== 'object' || raw === null) return false;
  const m = raw as { type?: unknown; requestId?: unknown; workerMs?: unknown; event?: unknown };
  if (m.type !== 'inference.event' || typeof m.requestId !== 'string' || (m.workerMs !== undefined && typeof m.workerMs !== 'number')) return false;
  const e = m.event as { type?: unknown } | null | undefined;
  return typeof e === 'object' && e !== null && e.type === 'chunk' && 'data' in e;
}

/**
 * Joins the pieces a worker sends a large answer in (worker/transport-ipc.ts ipcFrames): a request's pieces come in
 * order; the last one gives the whole message, parsed, or an error for that request when it cannot be read.
 */
export class PieceAssembler {
  private readonly parts = new Map<string, string[]>();

  push(piece: IpcPiece): unknown | null {
    const parts = this.parts.get(piece.requestId) ?? [];
    parts.push(piece.text);
    if (!piece.last) {
      this.parts.set(piece.requestId, parts);
      return null;
    }
    this.parts.delete(piece.requestId);
    try {
      return JSON.parse(parts.join(''));
    } catch (err) {
      return {
        type: 'inference.event', requestId: piece.requestId,
        event: { type: 'error', status: 500, message: `the worker's answer could not be read (${(err as Error).message}); ask for a smaller answer` },
      } satisfies WorkerMessage;
    }
  }
}

function isPiece(raw: unknown): raw is IpcPiece {
  return typeof raw === 'object' && raw !== null && (raw as { type?: unknown }).type === 'ipc.piece' && typeof (raw as IpcPiece).requestId === 'string' && typeof (raw as IpcPiece).text === 'string';
}

interface Child {
  slot: number;
  kind: WorkerKind;
  device: string;
  proc: ChildProcess;
  workerId: string | null;
  /** Task ids sent to this child and not finished. */
  tasks: Set<string>;
  load: number;
  /** Why the API declared it dead and killed it (workerDeclaredDead); it gets no new work meanwhile. */
  killedBecause?: string;
}

export interface EmbeddedOptions {
  workers: { kind: WorkerKind; device: string }[];
  /** On shutdown, how long running training jobs may take to finish before they are cancelled (ms). */
  shutdownGraceMs?: number;
  env?: NodeJS.ProcessEnv;
  log?: (msg: string) => void;
}

export class EmbeddedQueue implements QueueAdapter {
  readonly name = 'embedded' as const;
  readonly durable = false;
  private readonly children = new Map<number, Child>();
  private sink: (msg: WorkerMessage) => void = () => {};
  private onExit: (workerId: string, reason: string, tasks: string[]) => void = () => {};
  private closing = false;
  private readonly backoffMs = new Map<number, number>();
  /** Inference tasks that arrived while no inference worker was ready (at start, or during a restart). */
  private waitingInference: InferenceTask[] = [];
  private readonly log: (msg: string) => void;

  constructor(private readonly opts: EmbeddedOptions) {
    this.log = opts.log ?? ((m) => process.stderr.write(`${m}\n`));
  }

  async start(sink: (msg: WorkerMessage) => void, onWorkerExit: (workerId: string, reason: string, tasks?: string[]) => void): Promise<void> {
    this.sink = sink;
    this.onExit = onWorkerExit;
    this.opts.workers.forEach((w, slot) => this.spawnChild(slot, w.kind, w.device));
  }

  private spawnChild(slot: number, kind: WorkerKind, device: string): void {
    // fd 4: a socket pair with the worker's pulse thread, which repeats its heartbeats while a load or a training step
    // blocks the worker's main thread, and hears training cancels meanwhile (worker/pulse.ts); a thread cannot use
    // the IPC channel.
    const env = { ...process.env, ...this.opts.env, HEARTH_PULSE_FD: '4' };
    const proc = spawn(process.execPath, [...workerNodeFlags(kind, env), HEARTH_BIN, 'worker', '--kind', kind, '--device', device, '--ipc'], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'],
      env,
    });
    const child: Child = { slot, kind, device, proc, workerId: null, tasks: new Set(), load: 0 };
    this.children.set(slot, child);
    // A worker sends the messages it made in one tick as one array (worker/transport-ipc.ts).
    proc.on('message', (raw) => (Array.isArray(raw) ? raw.forEach(receive) : receive(raw)));
    const pieces = new PieceAssembler();
    const receive = (raw: unknown): void => {
      if (isPiece(raw)) {
        const whole = pieces.push(raw);
        return whole === null ? undefined : receive(whole);
      }
      // A chunk (one per stream and model step, the most frequent message) only travels on to its request,
      // its data as the worker made it: its shape is checked here, without the schema (a cold parse cost
      // ~0.05 ms of a 1.1B request's time to first token).
      if (isChunk(raw)) return this.sink(raw);
      const parsed = WorkerMessageSchema.safeParse(raw);
      if (!parsed.success) return this.log(`embedded queue: ignoring a malformed message from worker ${slot}`);
      const msg = parsed.data;
      if (msg.type === 'heartbeat') {
        child.workerId = msg.worker.id;
        child.load = msg.worker.load;
        this.backoffMs.delete(slot);
        if (child.kind === 'inference' && this.waitingInference.length) {
          for (const task of this.waitingInference.splice(0)) void this.startInference(task);
        }
      }
      if (msg.type === 'training.event' && (msg.event.type === 'training_ended' || msg.event.type === 'training_failed')) child.tasks.delete(msg.jobId);
      if (msg.type === 'inference.event' && msg.event.type !== 'chunk') child.tasks.delete(msg.requestId);
      this.sink(msg);
    };
    const pulses = proc.stdio[4];
    if (pulses) {
      pulses.on('error', () => {}); // a cancel written to a child that just died (its exit is handled below)
      createInterface({ input: pulses as Readable }).on('line', (line) => {
        try {
          const raw = JSON.parse(line) as { type?: unknown };
          if (raw.type === 'heartbeat') receive(raw); // only heartbeats travel this way
        } catch {
          this.log(`embedded queue: ignoring a malformed pulse from worker ${slot}`);
        }
      });
    }
    proc.on('exit', (code, signal) => {
      if (this.children.get(slot) === child) this.children.delete(slot);
      const reason = child.killedBecause ?? (signal ? `killed by ${signal}` : `exited with code ${code}`);
      if (child.workerId || child.tasks.size) this.onExit(child.workerId ?? `slot-${slot}`, reason, [...child.tasks]);
      if (this.closing) return;
      const wait = this.backoffMs.get(slot) ?? 500;
      this.backoffMs.set(slot, Math.min(wait * 2, 30_000));
      this.log(`embedded queue: ${kind} worker ${reason}; starting a new one in ${wait} ms`);
      setTimeout(() => !this.closing && this.spawnChild(slot, kind, device), wait).unref();
    });
  }

  private ready(kind: WorkerKind): Child[] {
    return [...this.children.values()].filter((c) => c.kind === kind && c.workerId && c.proc.connected && !c.killedBecause);
  }

  /**
   * The API found this child silent past its heartbeat timeout (blocked: a runaway computation, a hung load): kill
   * it. Its exit then fails what it held and a new child takes the slot, as after any exit (spawnChild).
   */
  workerDeclaredDead(workerId: string, reason: string): void {
    for (const c of this.children.values()) {
      if (c.workerId !== workerId || c.killedBecause || c.proc.exitCode !== null || c.proc.signalCode !== null) continue;
      c.killedBecause = reason;
      this.log(`embedded queue: ${c.kind} worker ${workerId} (pid ${c.proc.pid}) ${reason}`);
      c.proc.kill('SIGKILL');
    }
  }

  private send(child: Child, msg: ApiToWorker): Promise<void> {
    return new Promise((resolve, reject) => child.proc.send(msg, (err) => (err ? reject(err) : resolve())));
  }

  canStartTraining(): boolean {
    return this.ready('training').some((c) => c.tasks.size === 0);
  }

  async startTraining(task: TrainingTask): Promise<void> {
    const child = this.ready('training').find((c) => c.tasks.size === 0);
    if (!child) throw new Error('no idle training worker');
    child.tasks.add(task.jobId);
    await this.send(child, { type: 'training.run', task });
  }

  async cancelTraining(jobId: string): Promise<void> {
    for (const c of this.children.values()) if (c.tasks.has(jobId)) await this.cancelTrainingOn(c, jobId);
  }

  /**
   * Both ways in: the pulse thread's socket is heard while the job's compute blocks the worker's main thread (it stops
   * the micro-batch within one ONNX Runtime run); IPC is heard by the main thread between micro-batches.
   */
  private cancelTrainingOn(child: Child, jobId: string): Promise<void> {
    const pulses = child.proc.stdio[4] as Writable | null;
    if (pulses?.writable) pulses.write(`${JSON.stringify({ type: 'training.cancel', jobId } satisfies ApiToWorker)}\n`);
    return this.send(child, { type: 'training.cancel', jobId });
  }

  async startInference(task: InferenceTask): Promise<void> {
    const candidates = this.ready('inference');
    if (candidates.length === 0) {
      if (!this.opts.workers.some((w) => w.kind === 'inference')) throw new Error('this server runs no inference worker (HEARTH_WORKERS)');
      // One is starting or restarting: hold the task (the gateway fails it after HEARTH_QUEUE_TIMEOUT).
      this.waitingInference.push(task);
      return;
    }
    const child = candidates.reduce((a, b) => (a.tasks.size <= b.tasks.size ? a : b));
    child.tasks.add(task.requestId);
    // The child holds the request from here on, so it counts as started now; the child's own `started`
    // report stays home (worker/transport-ipc.ts): one pipe write less before the request's prefill.
    this.sink({ type: 'inference.started', requestId: task.requestId, workerId: child.workerId! });
    await this.send(child, { type: 'inference.run', task });
  }

  async cancelInference(requestId: string): Promise<void> {
    this.waitingInference = this.waitingInference.filter((t) => t.requestId !== requestId);
    for (const c of this.children.values()) {
      if (c.tasks.has(requestId)) {
        c.tasks.delete(requestId);
        await this.send(c, { type: 'inference.cancel', requestId }).catch(() => {});
      }
    }
  }

  async health(): Promise<QueueHealth> {
    return { ok: true, error: null, durationMs: 0 };
  }

  /**
   * Stop the workers. Running training jobs first get `shutdownGraceMs` to finish (their events still reach
   * the store), then are cancelled (within one ONNX Runtime run); then every child is asked to exit, and killed if it
   * has not within `timeoutMs`.
   */
  async close(timeoutMs = 5000): Promise<void> {
    this.closing = true;
    const busy = () => [...this.children.values()].filter((c) => c.kind === 'training' && c.tasks.size > 0 && c.proc.exitCode === null);
    const waitIdle = async (ms: number) => {
      const deadline = Date.now() + ms;
      while (busy().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    };
    if (busy().length) {
      const grace = this.opts.shutdownGraceMs ?? 60_000;
      this.log(`embedded queue: waiting up to ${Math.round(grace / 1000)} s for ${busy().length} running training job(s) to finish`);
      await waitIdle(grace);
      for (const c of busy()) for (const jobId of c.tasks) await this.cancelTrainingOn(c, jobId).catch(() => {});
      await waitIdle(timeoutMs);
    }
    const exits = [...this.children.values()].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.proc.exitCode !== null || c.proc.signalCode !== null) return resolve();
          const t = setTimeout(() => c.proc.kill('SIGKILL'), timeoutMs);
          c.proc.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          if (c.proc.connected) c.proc.send({ type: 'shutdown' } satisfies ApiToWorker, () => {});
          else c.proc.kill('SIGTERM');
        }),
    );
    await Promise.all(exits);
  }

  startingWorkers(kind: WorkerKind): number {
    return [...this.children.values()].filter((c) => c.kind === kind && !c.workerId && c.proc.exitCode === null).length;
  }

  /** Test and fault-injection hook: the pids of the running children. */
  pids(kind?: WorkerKind): number[] {
    return [...this.children.values()].filter((c) => !kind || c.kind === kind).map((c) => c.proc.pid!).filter(Boolean);
  }
}
