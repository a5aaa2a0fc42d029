// Mutation testing (docs/testing.md): does each test fail when the code it covers is changed? Run on demand
// with `npm run test:mutation` (up to ~40 min on 2 cores), or one module group with
// `npx stryker run --mutate worker/inference/sampler.ts`. Results: reports/mutation/mutation.json.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  // The modules whose bugs would corrupt results silently.
  mutate: [
    'worker/inference/sampler.ts', // sampling
    'worker/inference/stop.ts', // stop sequences
    'worker/inference/request-params.ts', // request → sampling params, finish-reason inputs
    'worker/training/rl-data.ts', // RL data assembly
    'worker/training/advantages.ts', // advantages
    'worker/training/losses.ts', // loss functions
    'src/services/pagination.ts', // cursor pagination
    'src/tables/digest.ts', // table digests
    'src/tables/table-ops.ts', // table updates
    'src/services/api-keys.ts', // auth and entity checks
    // Request schemas (src/protocol/training.ts): their mutants are all static, so they have their own run
    // without a per-test filter: stryker.schemas.config.mjs (npm run test:mutation runs both).
  ],
  coverageAnalysis: 'perTest',
  concurrency: 1, // the machine is shared
  timeoutMS: 30_000,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
