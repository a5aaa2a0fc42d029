// The Node versions the CLI and the test runner accept (bin/node-version.js): package.json's `engines` floor.
import { describe, expect, it } from 'vitest';
import { assertSupportedNode } from '../../bin/node-version.js';

describe('supported Node versions', () => {
  it('refuses Node below 22.20 with a message naming the version, accepts 22.20+ and 24', () => {
    for (const old of ['20.20.2', '22.19.0', '18.20.8']) expect(() => assertSupportedNode(old), old).toThrow(`this is ${old}`);
    for (const ok of ['22.20.0', '22.23.3', '24.21.0', '26.12.1']) expect(() => assertSupportedNode(ok), ok).not.toThrow();
    expect(() => assertSupportedNode()).not.toThrow(); // the Node running this test
  });
});
