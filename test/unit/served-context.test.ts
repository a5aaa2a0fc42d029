// The served context rule (worker/runtime/served-context.ts), as docs/configuration.md states it.
import { describe, expect, it } from 'vitest';
import { servedContext } from '../../src/runtime/served-context.js';

describe('servedContext', () => {
  it('a model is served at its trained positions between 512 and 8192, with no note', () => {
    expect(servedContext(2048)).toEqual({ positions: 2048, note: null, beyondTrained: false });
  });
  it('a small model is served at 512, beyond its trained positions, with a warning', () => {
    const s = servedContext(128);
    expect(s).toMatchObject({ positions: 512, beyondTrained: true });
    expect(s.note).toMatch(/served at 512 positions \(the served minimum of 512\), beyond the 128 it was trained on/);
  });
  it('a large model is capped at 8192, said in a note', () => {
    expect(servedContext(131_072)).toMatchObject({ positions: 8192, beyondTrained: false, note: expect.stringContaining('the cap of 8192') });
  });
  it('HEARTH_MAX_CONTEXT wins, and warns when beyond the trained positions', () => {
    expect(servedContext(2048, 1024)).toMatchObject({ positions: 1024, beyondTrained: false, note: expect.stringContaining('HEARTH_MAX_CONTEXT=1024') });
    expect(servedContext(2048, 4096)).toMatchObject({ positions: 4096, beyondTrained: true, note: expect.stringContaining('HEARTH_MAX_CONTEXT=4096') });
  });
  it('a sliding window caps the context', () => {
    expect(servedContext(32_768, undefined, 4096)).toMatchObject({ positions: 4096, beyondTrained: false, note: expect.stringContaining('sliding window of 4096') });
  });
});
