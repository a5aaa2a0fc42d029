// Digesting and storing a large table without holding the API's only thread: a million rows take seconds of
// canonical JSON, sha256 and SQLite inserts, during which no other tenant's request would be answered. The work
// goes in slices with a turn of the event loop between them.
import { prepareRow, type PreparedRow } from './digest.js';

/** Rows one /table/create or /table/update request may carry (a Weave client sends large tables in pieces). */
export const MAX_TABLE_ROWS_PER_REQUEST = 1_000_000;

/** Rows digested (or inserted) between two turns of the event loop: a few milliseconds of work. */
export const ROWS_PER_SLICE = 1000;

/** Let pending I/O and timers run before the next slice. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** prepareRow over `rows`, yielding to the event loop every `perSlice` rows. */
export async function prepareRowsYielding(rows: readonly Record<string, unknown>[], perSlice: number = ROWS_PER_SLICE): Promise<PreparedRow[]> {
  const prepared: PreparedRow[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    if (i > 0 && i % perSlice === 0) await yieldToEventLoop();
    prepared[i] = prepareRow(rows[i]);
  }
  return prepared;
}
