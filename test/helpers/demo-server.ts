// A Hearth server on the generated demo model with real worker processes: the set-up the end-to-end and
// browser tests share (one place for the worker kinds, their environment and the wait for them to be live).
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { startServer, tempHome, type StartOptions, type TestServer } from './server.js';
import { waitFor } from './wait.js';

export const DEMO_MODEL = 'hearth/tiny-random-llama';

export interface DemoServerOptions {
  /** Also a training worker, with this build's real training policy (SFT and RL jobs run). Default false. */
  training?: boolean;
  /** HEARTH_MAX_CONTEXT of the workers. Default 256 with training, else 512; null: the model's own. */
  maxContext?: number | null;
  /** Runs on the new HEARTH_HOME after the demo model is written, before the server starts (more models). */
  prepare?: (home: string) => Promise<void> | void;
  /** Prefix of the temporary HEARTH_HOME. */
  homePrefix?: string;
  /** Receives the queue's log lines (dropped by default). */
  log?: (m: string) => void;
  /** How long the workers may take to come up. Default 60 s. */
  workersTimeoutMs?: number;
  /** More environment for the worker processes (e.g. HEARTH_FAULT_DIR for src/runtime/fault-points.ts). */
  workerEnv?: Record<string, string>;
  /** More environment for the API (e.g. HEARTH_METRICS_KEY). */
  env?: Record<string, string>;
}

export async function startDemoServer(opts: DemoServerOptions = {}): Promise<TestServer> {
  const home = tempHome(opts.homePrefix);
  await ensureDemoModel(home);
  await opts.prepare?.(home);
  const training = opts.training ?? false;
  const start: StartOptions = {
    home,
    realTraining: training,
    env: { HEARTH_WORKERS: training ? 'inference:cpu,training:cpu' : 'inference:cpu', ...opts.env },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', ...opts.workerEnv }, log: opts.log },
  };
  const maxContext = opts.maxContext === undefined ? (training ? 256 : 512) : opts.maxContext;
  if (maxContext !== null) start.queue!.workerEnv!.HEARTH_MAX_CONTEXT = String(maxContext);
  const s = await startServer(start);
  const kinds = training ? (['inference', 'training'] as const) : (['inference'] as const);
  await waitFor(() => kinds.every((k) => s.ctx.queue!.liveWorkers(k).length > 0), `${kinds.join(' and ')} workers to be live`, opts.workersTimeoutMs ?? 60_000);
  return s;
}
