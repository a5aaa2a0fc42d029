// Reading a stored table as training data.
//
// SFT jobs may name their data as `weave:///<entity>/<project>/table/<digest>` (parsed with the other Weave
// refs, src/weave-objects/weave-ref.ts); each row is then one example ({messages, tools?}). Rows are streamed
// chunk by chunk, never loaded whole.

import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import path from 'node:path';
import type { TableStore } from './table-store.js';

/**
 * The rows of a table, in table order, as plain JS objects (numbers become JS numbers).
 * Throws the store's 404 error if the table does not exist in that entity/project.
 * Sync iterable, so both `for ... of` and `for await ... of` work.
 */
export function* readTableRows(
  store: TableStore,
  entity: string,
  project: string,
  digest: string,
): Generator<Record<string, unknown>> {
  for (const row of store.iterateRows({ entity, project }, digest)) {
    yield parseRowJson(row.valJson, row.originalIndex);
  }
}

/**
 * Write a table as JSONL (one row per line), for workers that read files rather than hearth.db.
 * Written to a temporary name and renamed, so a reader never sees half a file. Returns the row count.
 */
export async function writeTableRowsJsonl(
  store: TableStore,
  entity: string,
  project: string,
  digest: string,
  file: string,
): Promise<number> {
  await mkdir(path.dirname(file), { recursive: true });
  const partial = `${file}.partial`;
  const out = createWriteStream(partial);
  let count = 0;
  try {
    for (const row of readTableRows(store, entity, project, digest)) {
      if (!out.write(`${JSON.stringify(row)}\n`)) await once(out, 'drain');
      count++;
    }
    out.end();
    await once(out, 'close');
  } catch (error) {
    // The stream opens its file asynchronously, so a table missing at once could see the file made after the rm:
    // it is removed once the stream has closed (before, 1–14% of such calls left a stray .partial file).
    out.destroy();
    await finished(out).catch(() => {});
    await rm(partial, { force: true });
    throw error;
  }
  await rename(partial, file);
  return count;
}

function parseRowJson(valJson: string, index: number): Record<string, unknown> {
  try {
    return JSON.parse(valJson) as Record<string, unknown>;
  } catch {
    // Python floats that overflowed (e.g. 1e400) are stored as Infinity, which JSON.parse refuses.
    throw new Error(`table row ${index} holds a value JSON cannot represent (NaN or Infinity)`);
  }
}
