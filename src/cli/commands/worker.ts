// hearth worker --kind inference|training [--device cpu|cuda[:N]|webgpu[:N]|auto] [--redis <url>] [--ipc]
// One worker per device and kind. With --redis it pulls jobs from BullMQ (any host); with --ipc it was
// started by `hearth serve` (embedded queue). The worker code is the same either way.
import { parseArgs, stringFlag } from '../args.js';
import { WorkerHost, newWorkerIdentity } from '../../../worker/host.js';
import { createDefaultHandlers } from '../../../worker/default-handlers.js';
import type { Handlers } from '../../../worker/handlers.js';
import { ModelLoads } from '../../../worker/model-loads.js';
import { Pulse } from '../../../worker/pulse.js';
import { positiveIntSetting } from '../../domain/positive-int-setting.js';
import { ipcSend, serveOverIpc } from '../../../worker/transport-ipc.js';
import { detectDevices } from '../../hardware/detect.js';
import type { WorkerKind } from '../../protocol/messages.js';
import { normalizeDeviceRequest } from '../../domain/device-name.js';
import { jsonLog, logLine } from '../../domain/log-line.js';
import { chooseDevice, ortDeviceProbes, type DeviceProbes } from '../../runtime/device-choice.js';

/** `--device cpu` needs no probe (and loads no ONNX Runtime before the handlers do). */
const cpuOnlyProbes: DeviceProbes = {
  cuda: async () => 'not probed',
  webgpu: async () => 'not probed',
};

const USAGE = 'usage: hearth worker --kind inference|training [--device cpu|cuda[:N]|webgpu[:N]|auto] [--redis <url>] [--ipc]';

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['ipc']);
  const kind = stringFlag(args, 'kind') as WorkerKind | undefined;
  if (kind !== 'inference' && kind !== 'training') {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const requested = stringFlag(args, 'device') ?? 'cpu';
  try {
    normalizeDeviceRequest(requested);
  } catch (err) {
    process.stderr.write(`hearth worker: --device: ${(err as Error).message}\n`);
    return 2;
  }
  const redisUrl = stringFlag(args, 'redis') ?? (args.flags.ipc ? undefined : process.env.REDIS_URL);
  // JSON lines with their time, as the API's (src/domain/log-line.ts).
  const early = jsonLog({ worker: kind, device: requested });

  // Detect devices before anything else: the device choice names the GPU it found, and the first heartbeat
  // carries the report, so the API always knows what this worker runs on.
  const devices = await detectDevices().catch((err: Error) => {
    early(`device detection failed: ${err.message}`);
    return undefined;
  });
  // The device actually used, decided once: it names the worker, its heartbeats and the hardware it is priced as.
  let device: string;
  try {
    const choice = await chooseDevice(requested, requested === 'cpu' ? cpuOnlyProbes : ortDeviceProbes(), devices?.gpus ?? []);
    device = choice.device;
    early(choice.line);
  } catch (err) {
    process.stderr.write(`hearth worker: ${(err as Error).message}\n`);
    return 2;
  }
  const identity = newWorkerIdentity(kind, device);
  const log = jsonLog({ worker: kind, device, workerId: identity.id });

  // Development and tests may swap the engines for other handlers (a module exporting createHandlers).
  const handlersModule = stringFlag(args, 'handlers') ?? process.env.HEARTH_WORKER_HANDLERS;
  // Loads the handlers announce; the host sends each start and end as a heartbeat at once.
  const loads = new ModelLoads();
  const handlers: Handlers = handlersModule
    ? await (await import(handlersModule)).createHandlers(device, log, loads)
    : await createDefaultHandlers(kind, device, log, loads);

  let host!: WorkerHost;
  const heartbeatMs = Number(process.env.HEARTH_HEARTBEAT_INTERVAL_MS || 1000);
  let stopping = false;
  const shutdown = async (code = 0) => {
    if (stopping) return;
    stopping = true;
    await handlers.close?.().catch(() => {});
    process.exit(code);
  };

  // As the API reads it (seconds): the longest a model load may hold its job, and the pulse thread's stall limit.
  const loadTimeoutMs = positiveIntSetting(process.env, 'HEARTH_LOAD_TIMEOUT', 600) * 1000;
  if (args.flags.ipc) {
    // The embedded queue opens a socket pair with the pulse thread: its heartbeats out, cancels in (src/queue/embedded.ts, worker/pulse.ts).
    const pulseFd = Number(process.env.HEARTH_PULSE_FD);
    const pulse = Number.isInteger(pulseFd) && pulseFd > 2 ? Pulse.start({ kind: 'ipc', fd: pulseFd }, heartbeatMs, loadTimeoutMs, log) : null;
    host = new WorkerHost(identity, handlers, ipcSend, log, loads, pulse);
    host.setDevices(devices);
    serveOverIpc(host, heartbeatMs, () => shutdown(0));
  } else {
    if (!redisUrl) {
      process.stderr.write(`hearth worker: give --redis <url> (or REDIS_URL); without Redis, workers are started by "hearth serve" itself\n`);
      return 2;
    }
    const { serveOverBullmq } = await import('../../../worker/transport-bullmq.js');
    const stop = await serveOverBullmq({ identity, handlers, redisUrl, heartbeatMs, log, loads, loadTimeoutMs, hostRef: (h) => (host = h).setDevices(devices) });
    const graceful = async (signal: string) => {
      log(`${signal}: finishing the current job, then exiting`);
      await stop();
      await shutdown(0);
    };
    process.on('SIGTERM', () => void graceful('SIGTERM'));
    process.on('SIGINT', () => void graceful('SIGINT'));
    process.stdout.write(logLine('info', `Hearth worker ${identity.id} (${kind}, ${device}) serving BullMQ at ${redisUrl}`, { worker: kind, device, workerId: identity.id }));
  }
  return new Promise<number>(() => {});
}
