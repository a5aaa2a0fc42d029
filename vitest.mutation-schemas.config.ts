// Stryker's run over the request schemas (stryker.schemas.config.mjs): their mutants are static (zod builds the
// schemas when the module loads), so each needs a fresh module graph and cannot use a per-test filter
// (Stryker's vitest runner activates a filtered static mutant after the module loaded: stryker-js#6144). This
// config holds only the schemas' own unit test, so running it whole per mutant costs a second or two.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/unit/schemas-training.test.ts'],
    testTimeout: 60_000,
  },
});
