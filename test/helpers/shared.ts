// The ../shared folder beside the repository: the contract documents (spec/) and small real models
// (models/). CI always checks it out next to the clone, so a test that needs one of its files fails
// with a message naming the missing path instead of skipping: a checkout without it must not report
// green with those checks gone.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SHARED_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared');

/** The absolute path of `parts` under ../shared; throws naming it when it is missing. */
export function sharedPath(...parts: string[]): string {
  const p = path.join(SHARED_DIR, ...parts);
  if (!fs.existsSync(p)) {
    throw new Error(`${p} is missing: this test needs the ../shared folder (contract documents and small real models) checked out beside the repository`);
  }
  return p;
}
