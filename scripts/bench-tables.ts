// Table store benchmark: `npx tsx scripts/bench-tables.ts` (npm run bench:tables). Prints JSON.
//
// Measures, on a file-backed SQLite database (WAL, as the server runs it):
//   - create of 10k rows (request-body parse + digests + store), rows/s
//   - append of 1 row to tables of 10k, 100k and 1M rows, ms (p50 / p90 over repeated appends)
//     and the bytes each append adds to the database
//   - filter by one row digest and a sorted page on the largest table, ms
//   - query of one 100-row page in the middle of the 1M-row table, ms
// Set BENCH_TABLES_MAX_ROWS to cap the largest table (default 1000000).

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareRow, type PreparedRow } from '../src/tables/digest.js';
import { parseLosslessJson } from '../src/tables/lossless-parse.js';
import { TABLES_SCHEMA_SQL, TableStore, type ProjectScope } from '../src/tables/table-store.js';
import { machineLabel } from './machine.js';

const scope: ProjectScope = { entity: 'bench', project: 'tables' };
const maxRows = Number(process.env.BENCH_TABLES_MAX_ROWS ?? 1_000_000);
const APPEND_REPEATS = 21;
const QUERY_REPEATS = 21;

function exampleRow(i: number): Record<string, unknown> {
  return {
    messages: [
      { role: 'user', content: `Question number ${i}: what is ${i} + ${i}?` },
      { role: 'assistant', content: `The answer is ${2 * i}.` },
    ],
    score: i / 7,
    id: i,
  };
}

/** Rows as the server sees them: parsed losslessly from request text, then digested. */
function prepareRows(start: number, count: number): PreparedRow[] {
  const body = JSON.stringify(Array.from({ length: count }, (_, k) => exampleRow(start + k)));
  return (parseLosslessJson(body) as Record<string, unknown>[]).map(prepareRow);
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return Number(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))].toFixed(2));
}

/** Logical size of the database (WAL included), to see what an update adds. */
function databaseBytes(db: Database.Database): number {
  return (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
}

function time(fn: () => void): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-bench-tables-'));
  const db = new Database(join(dir, 'bench.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(TABLES_SCHEMA_SQL);
  const store = new TableStore(db);
  const results: Record<string, unknown> = { date: new Date().toISOString(), machine: machineLabel() };

  try {
    // Create of 10k rows, parse included (the HTTP layer adds little beyond this). The first run
    // includes JIT warm-up; a running server is warm, so the p50 of the later runs is the figure.
    const createRuns: number[] = [];
    for (let run = 0; run < 6; run++) {
      const createText = JSON.stringify(Array.from({ length: 10_000 }, (_, i) => exampleRow(1_000_000_000 + run * 10_000 + i)));
      createRuns.push(
        time(() => {
          const rows = (parseLosslessJson(createText) as Record<string, unknown>[]).map(prepareRow);
          store.createTable(scope, rows);
        }),
      );
    }
    const warmMs = percentile(createRuns.slice(1), 0.5);
    results.create_10k = {
      cold_ms: Number(createRuns[0].toFixed(1)),
      p50_ms: warmMs,
      rows_per_s: Math.round(10_000 / (warmMs / 1000)),
    };

    // Grow one table to each size (rows appended in batches), then time single-row appends.
    const appends: Record<string, unknown> = {};
    let digest = store.createTable(scope, []).digest;
    let size = 0;
    let buildMs = 0;
    for (const target of [10_000, 100_000, 1_000_000].filter((n) => n <= maxRows)) {
      while (size < target) {
        const batch = Math.min(50_000, target - size);
        const rows = prepareRows(size, batch);
        buildMs += time(() => {
          digest = store.updateTable(scope, digest, rows.map((row) => ({ kind: 'append' as const, row }))).digest;
        });
        size += batch;
      }
      const samples: number[] = [];
      const bytesBefore = databaseBytes(db);
      let base = digest;
      for (let i = 0; i < APPEND_REPEATS; i++) {
        const text = JSON.stringify(exampleRow(-1 - i - target));
        samples.push(
          time(() => {
            const row = prepareRow(parseLosslessJson(text) as Record<string, unknown>);
            base = store.updateTable(scope, base, [{ kind: 'append', row }]).digest;
          }),
        );
      }
      appends[`rows_${target}`] = {
        p50_ms: percentile(samples, 0.5),
        p90_ms: percentile(samples, 0.9),
        stored_bytes_per_append: Math.round((databaseBytes(db) - bytesBefore) / APPEND_REPEATS),
      };
    }
    results.append_1_row = appends;
    results.build_rows_per_s = Math.round(size / (buildMs / 1000));

    // One 100-row page from the middle of the largest table.
    const querySamples: number[] = [];
    for (let i = 0; i < QUERY_REPEATS; i++) {
      const offset = Math.floor(size / 2) + i * 1000;
      querySamples.push(time(() => store.queryRows(scope, digest, { offset, limit: 100 })));
    }
    results.query_page_100 = { table_rows: size, p50_ms: percentile(querySamples, 0.5), p90_ms: percentile(querySamples, 0.9) };

    // Filter by one row digest and sort by a field: both scan the whole digest list in SQLite.
    const someRow = store.queryRows(scope, digest, { offset: 12_345, limit: 1 })[0];
    results.query_filter_1_digest_ms = {
      table_rows: size,
      ms: Number(time(() => store.queryRows(scope, digest, { rowDigests: [someRow.digest] })).toFixed(1)),
    };
    results.query_sorted_page_100_ms = {
      table_rows: size,
      ms: Number(time(() => store.queryRows(scope, digest, { sortBy: [{ field: 'score', direction: 'desc' }], limit: 100 })).toFixed(1)),
    };

    // Insert near the front of the largest table: re-hashes everything after it (one pass over n digests).
    const insertText = JSON.stringify(exampleRow(-5));
    const insertMs = time(() => {
      const row = prepareRow(parseLosslessJson(insertText) as Record<string, unknown>);
      store.updateTable(scope, digest, [{ kind: 'insert', index: 1, row }]);
    });
    results.insert_at_front_ms = { table_rows: size, ms: Number(insertMs.toFixed(1)) };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(results, null, 2));
}

main();
