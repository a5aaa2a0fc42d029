import { describe, expect, it } from 'vitest';
import { baseModelRow } from '../../src/services/listings.js';
import type { WorkerInfo } from '../../src/queue/port.js';

const worker = (id: string, kind: WorkerInfo['kind'], extra: Partial<WorkerInfo> = {}): WorkerInfo => ({ id, kind, device: 'cpu', host: 'h', pid: 1, load: 0, lastSeenMs: 0, tasks: [], ...extra });

describe('base model rows (console Models page)', () => {
  it('gives the stored type, context and where the model is loaded', () => {
    const manifest = { format: 'generated', architecture: 'llama', parameters: 1000, sizeBytes: 4000, config: { maxPositionEmbeddings: 2048 } };
    const workers = [
      worker('a', 'inference', { stats: { loadedModels: ['hearth/tiny'] } }),
      worker('b', 'inference', { loading: [{ model: 'hearth/tiny', sinceMs: 0 }] }),
      worker('c', 'inference', { stats: { loadedModels: ['other/model'] } }),
      worker('t', 'training', { stats: { loadedModels: ['hearth/tiny'] } }),
    ];
    expect(baseModelRow('hearth/tiny', manifest, workers)).toEqual({
      id: 'hearth/tiny', parameters: 1000, size_bytes: 4000, format: 'generated', quantization: 'F32', architecture: 'llama', context_length: 2048,
      loaded_on: [{ worker_id: 'a', device: 'cpu', host: 'h' }], loading_on: [{ worker_id: 'b', device: 'cpu', host: 'h' }],
    });
  });

  it("prefers a GGUF's own quantization and leaves unknowns null", () => {
    const row = baseModelRow('x/gguf', { format: 'gguf', parameters: 1000, sizeBytes: 600, quantization: 'Q4_K' }, []);
    expect(row.quantization).toBe('Q4_K');
    expect(row.context_length).toBeNull();
    expect(baseModelRow('x/bare', {}, []).quantization).toBeNull();
    expect(baseModelRow('x/half', { parameters: 1000, sizeBytes: 2000 }, []).quantization).toBe('F16/BF16');
  });
});
