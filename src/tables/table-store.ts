// SQLite repository for Weave tables.
//
// Storage model (all scoped by entity + project):
//   weave_table_rows   one row body per row digest (stored once, whatever the number of tables)
//   weave_table_chunks content-addressed pieces of digest lists (JSON arrays of ≤ CHUNK_ROWS digests)
//   weave_tables       one record per table version: its digest, row count and chunk index
// Every request runs in one transaction, so a failed request writes nothing.

import type Database from 'better-sqlite3';
import {
  ChunkedDigestList,
  decodeChunkIndex,
  encodeChunkIndex,
  type ChunkRef,
  type FinishedList,
} from './chunked-digest-list.js';
import { EMPTY_TABLE_DIGEST, type PreparedRow } from './digest.js';
import { digestMismatch, invalidRequest, tableNotFound } from './errors.js';
import { applyUpdates, type ResolvedUpdate } from './table-ops.js';

export const TABLES_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS weave_table_rows (
  entity TEXT NOT NULL,
  project TEXT NOT NULL,
  digest TEXT NOT NULL,
  val_json TEXT NOT NULL,
  UNIQUE (entity, project, digest)
);
CREATE TABLE IF NOT EXISTS weave_table_chunks (
  entity TEXT NOT NULL,
  project TEXT NOT NULL,
  hash BLOB NOT NULL,
  row_digests TEXT NOT NULL,
  UNIQUE (entity, project, hash)
);
CREATE TABLE IF NOT EXISTS weave_tables (
  entity TEXT NOT NULL,
  project TEXT NOT NULL,
  digest TEXT NOT NULL,
  row_count INTEGER NOT NULL,
  has_missing_rows INTEGER NOT NULL,
  chunk_index BLOB NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (entity, project, digest)
);
`;

/** Where a table lives: the `entity/project` of the API's project_id. */
export interface ProjectScope {
  entity: string;
  project: string;
}

export type TableUpdate =
  | { kind: 'append'; row: PreparedRow }
  | { kind: 'pop'; index: number }
  | { kind: 'insert'; index: number; row: PreparedRow };

export interface SortField {
  field: string; // dot path into the row
  direction: 'asc' | 'desc';
}

export interface TableQuery {
  rowDigests?: readonly string[]; // keep only rows with these digests (empty: no filter)
  sortBy?: readonly SortField[];
  limit?: number | null;
  offset?: number | null;
}

export interface StoredTableRow {
  digest: string;
  valJson: string; // the row as JSON text (see COMPACT_JSON)
  originalIndex: number; // 0-based position in the table
}

export interface TableStats {
  digest: string;
  count: number;
}

interface VersionRecord {
  row_count: number;
  has_missing_rows: number;
  chunk_index: Buffer;
}

export function projectIdOf(scope: ProjectScope): string {
  return `${scope.entity}/${scope.project}`;
}

function prepareStatements(db: Database.Database) {
  return {
    insertRow: db.prepare(
      'INSERT OR IGNORE INTO weave_table_rows (entity, project, digest, val_json) VALUES (?, ?, ?, ?)',
    ),
    getRow: db.prepare('SELECT val_json FROM weave_table_rows WHERE entity = ? AND project = ? AND digest = ?').pluck(),
    hasRow: db.prepare('SELECT 1 FROM weave_table_rows WHERE entity = ? AND project = ? AND digest = ?').pluck(),
    insertChunk: db.prepare(
      'INSERT OR IGNORE INTO weave_table_chunks (entity, project, hash, row_digests) VALUES (?, ?, ?, ?)',
    ),
    getChunk: db
      .prepare('SELECT row_digests FROM weave_table_chunks WHERE entity = ? AND project = ? AND hash = ?')
      .pluck(),
    insertVersion: db.prepare(
      // Re-creating an existing table changes nothing, except that it may now have all its rows.
      `INSERT INTO weave_tables (entity, project, digest, row_count, has_missing_rows, chunk_index)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (entity, project, digest) DO UPDATE SET has_missing_rows = min(has_missing_rows, excluded.has_missing_rows)`,
    ),
    getVersion: db.prepare(
      'SELECT row_count, has_missing_rows, chunk_index FROM weave_tables WHERE entity = ? AND project = ? AND digest = ?',
    ),
    countRows: db
      .prepare('SELECT row_count FROM weave_tables WHERE entity = ? AND project = ? AND digest = ?')
      .pluck(),
  };
}

export class TableStore {
  private readonly statements: ReturnType<typeof prepareStatements>;

  /** The schema (TABLES_SCHEMA_SQL) must already exist in `db`. */
  constructor(private readonly db: Database.Database) {
    this.statements = prepareStatements(db);
  }

  /** /table/create: store the rows and the table; returns the table digest and row digests in order. */
  createTable(
    scope: ProjectScope,
    rows: readonly PreparedRow[],
    expectedDigest?: string | null,
  ): { digest: string; rowDigests: string[] } {
    const rowDigests = rows.map((row) => row.digest);
    const finished = finishNewList(rowDigests);
    if (expectedDigest != null && expectedDigest !== finished.tableDigest) {
      throw digestMismatch(expectedDigest, finished.tableDigest);
    }
    this.db.transaction(() => {
      for (const row of rows) this.statements.insertRow.run(scope.entity, scope.project, row.digest, row.valJson);
      this.saveVersion(scope, finished, rowDigests.length, false);
    })();
    return { digest: finished.tableDigest, rowDigests };
  }

  /**
   * createTable for large tables: the rows go in one transaction per `perSlice` rows, with a turn of the event loop
   * between them, and the table version last. A request that fails midway leaves rows no table lists (stored
   * under their content digest, as a later request would store them), never a table without its rows.
   */
  async createTableInSlices(
    scope: ProjectScope,
    rows: readonly PreparedRow[],
    expectedDigest: string | null | undefined,
    perSlice: number,
    pause: () => Promise<void>,
  ): Promise<{ digest: string; rowDigests: string[] }> {
    const rowDigests = rows.map((row) => row.digest);
    const finished = finishNewList(rowDigests);
    if (expectedDigest != null && expectedDigest !== finished.tableDigest) {
      throw digestMismatch(expectedDigest, finished.tableDigest);
    }
    const insertSlice = this.db.transaction((slice: readonly PreparedRow[]) => {
      for (const row of slice) this.statements.insertRow.run(scope.entity, scope.project, row.digest, row.valJson);
    });
    for (let start = 0; start < rows.length; start += perSlice) {
      if (start > 0) await pause();
      insertSlice(rows.slice(start, start + perSlice));
    }
    this.db.transaction(() => this.saveVersion(scope, finished, rowDigests.length, false))();
    return { digest: finished.tableDigest, rowDigests };
  }

  /** /table/create_from_digests: rows are not required to exist (missing ones vanish from queries). */
  createTableFromDigests(scope: ProjectScope, rowDigests: readonly string[], expectedDigest?: string | null): string {
    const finished = finishNewList(rowDigests);
    if (expectedDigest != null && expectedDigest !== finished.tableDigest) {
      throw digestMismatch(expectedDigest, finished.tableDigest);
    }
    this.db.transaction(() => {
      const hasMissing = rowDigests.some((digest) => !this.statements.hasRow.get(scope.entity, scope.project, digest));
      this.saveVersion(scope, finished, rowDigests.length, hasMissing);
    })();
    return finished.tableDigest;
  }

  /** /table/update: apply updates in order on top of `baseDigest`; all-or-nothing. */
  updateTable(
    scope: ProjectScope,
    baseDigest: string,
    updates: readonly TableUpdate[],
  ): { digest: string; updatedRowDigests: string[] } {
    return this.db.transaction(() => {
      const base = this.getVersion(scope, baseDigest);
      if (!base) throw tableNotFound(projectIdOf(scope), baseDigest);
      if (updates.length === 0) return { digest: baseDigest, updatedRowDigests: [] };

      const list = new ChunkedDigestList(decodeChunkIndex(base.chunk_index), (hash) => this.loadChunk(scope, hash));
      const outcome = applyUpdates(list, updates.map(resolveUpdate));
      if (!outcome.ok) throw invalidRequest(outcome.reason);
      const finished = list.finish();

      for (const update of updates) {
        if (update.kind !== 'pop') {
          this.statements.insertRow.run(scope.entity, scope.project, update.row.digest, update.row.valJson);
        }
      }
      this.saveVersion(scope, finished, list.length, base.has_missing_rows === 1);
      return { digest: finished.tableDigest, updatedRowDigests: outcome.updatedRowDigests };
    })();
  }

  /** /table/query. An unknown table yields no rows (as the service does). */
  queryRows(scope: ProjectScope, digest: string, query: TableQuery = {}): StoredTableRow[] {
    const orderBy = (query.sortBy ?? []).map((sort) => ({ path: sortFieldPath(sort.field), direction: sort.direction }));
    const version = this.getVersion(scope, digest);
    if (!version) return [];
    // SQLite semantics (as the reference server): a negative LIMIT means none, a negative OFFSET means 0.
    const offset = Math.max(0, query.offset ?? 0);
    const limit = query.limit == null || query.limit < 0 ? Infinity : query.limit;
    const filtered = query.rowDigests !== undefined && query.rowDigests.length > 0;

    if (orderBy.length > 0) return this.queryWithSql(scope, version, query.rowDigests ?? [], orderBy, offset, limit);
    const refs = decodeChunkIndex(version.chunk_index);
    if (!filtered && version.has_missing_rows === 0) return this.readPage(scope, refs, offset, limit);
    return this.scanRows(scope, refs, filtered ? new Set(query.rowDigests) : null, offset, limit);
  }

  /** Row count of a table (duplicates counted), or null if it does not exist. */
  countRows(scope: ProjectScope, digest: string): number | null {
    const count = this.statements.countRows.get(scope.entity, scope.project, digest) as number | undefined;
    return count ?? null;
  }

  /** Counts of the tables that exist, in request order; unknown digests are left out. */
  statsBatch(scope: ProjectScope, digests: readonly string[]): TableStats[] {
    const stats: TableStats[] = [];
    for (const digest of new Set(digests)) {
      const count = this.countRows(scope, digest);
      if (count !== null) stats.push({ digest, count });
    }
    return stats;
  }

  /** Every row of a table in order, reading one chunk at a time (rows without a stored body are skipped). */
  *iterateRows(scope: ProjectScope, digest: string): Generator<StoredTableRow> {
    const version = this.getVersion(scope, digest);
    if (!version) throw tableNotFound(projectIdOf(scope), digest);
    let position = 0;
    for (const ref of decodeChunkIndex(version.chunk_index)) {
      for (const rowDigest of this.loadChunk(scope, ref.hash)) {
        const valJson = this.statements.getRow.get(scope.entity, scope.project, rowDigest) as string | undefined;
        if (valJson !== undefined) yield { digest: rowDigest, valJson, originalIndex: position };
        position++;
      }
    }
  }

  /** One row's JSON text by its digest, whatever table holds it (refs resolve rows this way), or undefined. */
  readRow(scope: ProjectScope, rowDigest: string): string | undefined {
    return this.statements.getRow.get(scope.entity, scope.project, rowDigest) as string | undefined;
  }

  tableExists(scope: ProjectScope, digest: string): boolean {
    return this.countRows(scope, digest) !== null;
  }

  private getVersion(scope: ProjectScope, digest: string): VersionRecord | undefined {
    return this.statements.getVersion.get(scope.entity, scope.project, digest) as VersionRecord | undefined;
  }

  private loadChunk(scope: ProjectScope, hash: Buffer): string[] {
    const body = this.statements.getChunk.get(scope.entity, scope.project, hash) as string | undefined;
    if (body === undefined) throw new Error(`table chunk ${hash.toString('hex')} is missing from the store`);
    return JSON.parse(body) as string[];
  }

  private saveVersion(scope: ProjectScope, finished: FinishedList, rowCount: number, hasMissing: boolean): void {
    for (const chunk of finished.newChunks) {
      this.statements.insertChunk.run(scope.entity, scope.project, chunk.hash, chunk.body);
    }
    this.statements.insertVersion.run(
      scope.entity,
      scope.project,
      finished.tableDigest,
      rowCount,
      hasMissing ? 1 : 0,
      encodeChunkIndex(finished.refs),
    );
  }

  /** Natural order, every row present: read only the chunks that overlap [offset, offset + limit). */
  private readPage(scope: ProjectScope, refs: readonly ChunkRef[], offset: number, limit: number): StoredTableRow[] {
    const rows: StoredTableRow[] = [];
    const end = offset + limit;
    let chunkStart = 0;
    for (const ref of refs) {
      const chunkEnd = chunkStart + ref.count;
      if (chunkStart >= end) break;
      if (chunkEnd > offset) {
        const digests = this.loadChunk(scope, ref.hash);
        const from = Math.max(offset, chunkStart) - chunkStart;
        const to = Math.min(end, chunkEnd) - chunkStart;
        for (let i = from; i < to; i++) {
          const valJson = this.statements.getRow.get(scope.entity, scope.project, digests[i]) as string | undefined;
          if (valJson === undefined) throw new Error(`row ${digests[i]} of a complete table is missing`);
          rows.push({ digest: digests[i], valJson, originalIndex: chunkStart + i });
        }
      }
      chunkStart = chunkEnd;
    }
    return rows;
  }

  /**
   * Table order with a digest filter, or with rows missing: walk the digest list and stop once the
   * page is full. Rows without a stored body do not count (the reference server inner-joins them away).
   */
  private scanRows(
    scope: ProjectScope,
    refs: readonly ChunkRef[],
    filter: ReadonlySet<string> | null,
    offset: number,
    limit: number,
  ): StoredTableRow[] {
    const rows: StoredTableRow[] = [];
    let matched = 0;
    let position = 0;
    for (const ref of refs) {
      if (rows.length >= limit) break;
      for (const digest of this.loadChunk(scope, ref.hash)) {
        if (rows.length >= limit) break;
        if (filter === null || filter.has(digest)) {
          const valJson = this.statements.getRow.get(scope.entity, scope.project, digest) as string | undefined;
          if (valJson !== undefined && matched++ >= offset) rows.push({ digest, valJson, originalIndex: position });
        }
        position++;
      }
    }
    return rows;
  }

  /**
   * Sorted queries: the reference server's query, run by SQLite over
   * the whole digest list (json_each gives the original 0-based position).
   */
  private queryWithSql(
    scope: ProjectScope,
    version: VersionRecord,
    rowDigests: readonly string[],
    orderBy: { path: string; direction: 'asc' | 'desc' }[],
    offset: number,
    limit: number,
  ): StoredTableRow[] {
    const bodies = decodeChunkIndex(version.chunk_index).map((ref) => {
      const body = this.statements.getChunk.get(scope.entity, scope.project, ref.hash) as string;
      return body.slice(1, -1);
    });
    const allDigests = `[${bodies.filter((body) => body.length > 0).join(',')}]`;
    const params: Record<string, unknown> = {
      digests: allDigests,
      entity: scope.entity,
      project: scope.project,
      limit: Number.isFinite(limit) ? limit : -1,
      offset,
    };
    let where = '';
    if (rowDigests.length > 0) {
      where = 'WHERE j.value IN (SELECT value FROM json_each(@filter))';
      params.filter = JSON.stringify(rowDigests);
    }
    const order = orderBy.map((sort, i) => {
      params[`path${i}`] = sort.path;
      return `json_extract(r.val_json, @path${i}) ${sort.direction === 'desc' ? 'DESC' : 'ASC'}`;
    });
    order.push('originalIndex');
    // CROSS JOIN fixes the loop order: walk the digest list, look each row up by its unique key
    // (left to itself the planner may scan the project's rows and json_each inside: quadratic).
    const sql = `
      SELECT j.value AS digest, r.val_json AS valJson, CAST(j.key AS INTEGER) AS originalIndex
      FROM json_each(@digests) AS j
      CROSS JOIN weave_table_rows AS r ON r.entity = @entity AND r.project = @project AND r.digest = j.value
      ${where}
      ORDER BY ${order.join(', ')}
      LIMIT @limit OFFSET @offset`;
    return this.db.prepare(sql).all(params) as StoredTableRow[];
  }
}

function finishNewList(rowDigests: readonly string[]): FinishedList {
  if (rowDigests.length === 0) return { refs: [], newChunks: [], tableDigest: EMPTY_TABLE_DIGEST };
  return ChunkedDigestList.fromDigests(rowDigests).finish();
}

function resolveUpdate(update: TableUpdate): ResolvedUpdate {
  switch (update.kind) {
    case 'append':
      return { kind: 'append', rowDigest: update.row.digest };
    case 'pop':
      return update;
    case 'insert':
      return { kind: 'insert', index: update.index, rowDigest: update.row.digest };
  }
}

/**
 * A sort field "a.b.c" as an SQLite JSON path `$."a"."b"."c"`. Empty components are rejected
 * like the reference server does (400); quotes cannot be expressed in an SQLite path label.
 */
export function sortFieldPath(field: string): string {
  const parts = field.split('.');
  if (parts.some((part) => part.trim() === '')) {
    throw invalidRequest(`Invalid sort field '${field}': field path components cannot be empty`);
  }
  if (parts.some((part) => part.includes('"'))) {
    throw invalidRequest(`Invalid sort field '${field}': field names cannot contain '"'`);
  }
  return `$${parts.map((part) => `."${part}"`).join('')}`;
}
