import { defineConfig } from 'vitest/config';
import { assertSupportedNode } from './bin/node-version.js';

assertSupportedNode();

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Test files start real servers and worker processes of their own; on 2 cores, running two such files at
    // once oversubscribes the CPU and makes timing-bound fault tests flaky. One file at a time.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
  },
});
