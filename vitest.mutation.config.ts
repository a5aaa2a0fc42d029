// The unit tests Stryker runs against its mutants (npm run test:mutation, stryker.config.mjs): only the fast,
// pure tests of the modules under mutation, so each mutant costs seconds, not the whole suite.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/unit/inference-sampler.test.ts',
      'test/unit/inference-stop.test.ts',
      'test/unit/inference-request-params.test.ts',
      'test/unit/training-rl.test.ts',
      'test/unit/training-losses.test.ts',
      'test/unit/api-pure.test.ts',
      'test/unit/api-keys.test.ts',
      'test/unit/tables-digest.test.ts',
      'test/unit/tables-ops.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // These tests share no state through modules: reusing the module graph between runs saves seconds a mutant.
    isolate: false,
  },
});
