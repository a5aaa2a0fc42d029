// /metrics without tenant identifiers (src/metrics/tenant-free.ts).
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.js';
import { metricsWithoutTenants } from '../../src/metrics/tenant-free.js';

describe('metricsWithoutTenants', () => {
  it('sums counters and takes the largest gauge over the model label, and keeps other series as they are', async () => {
    const m = createMetrics();
    m.tokensGenerated.inc({ model: '3f2a9c1e-alice-model' }, 5);
    m.tokensGenerated.inc({ model: 'bob/secret-run' }, 7);
    m.prefillChunkTokens.set({ worker: 'w1', model: 'a' }, 32);
    m.prefillChunkTokens.set({ worker: 'w1', model: 'b' }, 64);
    m.queueDepth.set({ queue: 'inference' }, 2);
    const text = await metricsWithoutTenants(m.registry);
    expect(text).not.toMatch(/alice|secret|model=/);
    expect(text).toContain('hearth_tokens_generated_total 12');
    expect(text).toContain('hearth_prefill_chunk_tokens{worker="w1"} 64');
    expect(text).toContain('hearth_queue_depth{queue="inference"} 2');
    expect(text).toContain('# TYPE hearth_tokens_generated_total counter');
    expect(text).toContain('hearth_http_request_duration_seconds'); // untouched metrics (a histogram) are all there
  });
});
