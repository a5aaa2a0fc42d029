// The handlers a worker runs unless told otherwise: the real inference and training engines.
// Engines load lazily so a worker of one kind never pays for the other's dependencies.
import type { Handlers } from './handlers.js';
import type { WorkerKind } from '../src/protocol/messages.js';
import { ModelLoads } from './model-loads.js';

export async function createDefaultHandlers(kind: WorkerKind, device: string, log: (m: string) => void, loads = new ModelLoads()): Promise<Handlers> {
  const engineModule = kind === 'inference' ? './inference/worker-handler.js' : './training/worker-handler.js';
  try {
    const mod = (await import(engineModule)) as { createHandlers: (device: string, log: (m: string) => void, loads: ModelLoads) => Promise<Handlers> };
    return await mod.createHandlers(device, log, loads);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes('worker-handler')) {
      log(`no ${kind} engine in this build; this worker answers health pings only`);
      return {};
    }
    throw err;
  }
}
