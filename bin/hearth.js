#!/usr/bin/env node
// Entry for `npx hearth …`: loads the TypeScript CLI in-process through tsx's loader,
// so a checkout needs no build step and signals reach the real process.
import { register } from 'tsx/esm/api';
import { assertSupportedNode } from './node-version.js';

try {
  assertSupportedNode();
} catch (error) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
register();
await import('../src/cli/main.ts');
