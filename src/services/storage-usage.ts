// The bytes an entity stores (its storage quota's measure, storage-quota.ts): its dataset files, and the values of
// its Weave table rows, table chunk lists and Weave objects as stored in SQLite.
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../store/sqlite/database.js';

/** Sizes of the files under `dir`, recursively (0 when it does not exist). */
export function folderBytes(dir: string): number {
  let total = 0;
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += folderBytes(p);
    else if (e.isFile()) total += fs.statSync(p).size;
  }
  return total;
}

const STORED_VALUES: [table: string, column: string][] = [
  ['weave_table_rows', 'val_json'],
  ['weave_table_chunks', 'row_digests'],
  ['weave_objects', 'val_json'],
];

/** Bytes of `entity`'s values in the Weave stores (a store not created yet holds nothing). */
export function weaveBytes(db: Db, entity: string): number {
  let total = 0;
  for (const [table, column] of STORED_VALUES) {
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table);
    if (!exists) continue;
    const row = db.prepare(`SELECT coalesce(sum(length(CAST(${column} AS BLOB))), 0) AS n FROM ${table} WHERE entity = ?`).get(entity) as { n: number };
    total += row.n;
  }
  return total;
}
