import { describe, expect, it } from 'vitest';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { hearthSync } from '../helpers/process.js';
import { tempHome } from '../helpers/server.js';

describe('hearth bench hardware', () => {
  it('measures the model on this device and prints throughput and prices as JSON', async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    const r = hearthSync(['bench', 'hardware', '--model', 'hearth/tiny-random-llama'], { HEARTH_HOME: home });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.device).toBe('cpu');
    expect(out.prefill_tokens_per_second).toBeGreaterThan(out.decode_tokens_per_second);
    expect(out.decode_tokens_per_second).toBeGreaterThan(0);
    expect(out.hardware).toHaveLength(1);
    expect(out.hardware[0].specs.decode_tokens_per_second).toBe(String(out.decode_tokens_per_second));
    expect(out.hardware[0].pricing.cents_per_million_output_tokens).toBeGreaterThan(0);
  }, 60_000);

  it('explains wrong usage and unknown models', () => {
    const home = tempHome();
    expect(hearthSync(['bench', 'hardware'], { HEARTH_HOME: home }).status).toBe(2);
    const unknown = hearthSync(['bench', 'hardware', '--model', 'no/such'], { HEARTH_HOME: home });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('not installed');
  });
});
