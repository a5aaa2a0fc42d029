// The device a training thread trains on (the worker's --device): where the graph engine loads its layer and head
// graphs, and where the TF.js engine sends the frozen base's products. Set once per training thread, before its job.
import { parseDevice } from '../../src/domain/device-name.js';
import { executionProvidersFor } from '../../src/runtime/runner.js';
import { DeviceFrozenProducts } from './device-products.js';
import { setFrozenProductsDevice } from './frozen-linear.js';
import { setTrainingProviders } from './graph/graph-session.js';

/**
 * On a GPU, the graph engine (LoRA without dropout, the default) loads its graphs on the device; where ONNX Runtime
 * cannot load them there, graph-session.ts says so in one line and trains on the CPU. The TF.js engine (full
 * fine-tuning, LoRA with dropout) runs the frozen base's products on the device (device-products.ts); LoRA, norms,
 * attention and the optimizer stay on its backend, which says in one log line what it chose. `log` gets the line
 * saying where the thread trains, and the one a device that fails to load says.
 */
export function useTrainingDevice(device: string, log: (line: string) => void): void {
  if (device === 'cpu') return;
  const providers = executionProvidersFor(parseDevice(device));
  setFrozenProductsDevice(new DeviceFrozenProducts(device, providers));
  setTrainingProviders(device, providers, log);
  const names = providers.map((p) => (typeof p === 'string' ? p : p.name)).join(', ');
  log(`training on ${device}: graph engine (LoRA) runs its layer and head graphs on ${device} (ONNX Runtime providers ${names}); TF.js engine (full fine-tuning, LoRA dropout): frozen base products on the device, LoRA, norms and optimizer on the TF.js backend`);
}
