// Mutation testing of the request schemas alone (docs/testing.md): `npx stryker run stryker.schemas.config.mjs`.
// Their mutants are static, so this run uses no per-test filter (see vitest.mutation-schemas.config.ts).
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: ['src/protocol/training.ts'],
  vitest: { configFile: 'vitest.mutation-schemas.config.ts' },
  coverageAnalysis: 'off',
  jsonReporter: { fileName: 'reports/mutation/schemas.json' },
};
