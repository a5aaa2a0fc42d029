// /table/*: the Weave trace server's table API (create, update, create_from_digests, query, stats),
// digest for digest compatible with the hosted service so the Weave client works unchanged.
// Errors answer `{"reason": ...}` like the trace server; validation stays FastAPI's 422.
import { defineRoute, type RouteDef } from '../route.js';
import { runInProject, runInProjectAsync, weaveProjectScope } from '../weave-project.js';
import type { AppContext } from '../context.js';
import { HttpError } from '../errors.js';
import {
  TableCreateFromDigestsReq, TableCreateFromDigestsRes, TableCreateReq, TableCreateRes, TableQueryReq, TableQueryRes,
  TableQueryStatsBatchReq, TableQueryStatsBatchRes, TableQueryStatsReq, TableQueryStatsRes, TableUpdateReq, TableUpdateRes,
} from '../../schemas/tables.js';
import { prepareRow } from '../../tables/digest.js';
import { MAX_TABLE_ROWS_PER_REQUEST, prepareRowsYielding, ROWS_PER_SLICE, yieldToEventLoop } from '../../tables/prepare-rows.js';
import { parseLosslessJson } from '../../tables/lossless-parse.js';
import { TableStore, type StoredTableRow, type TableUpdate } from '../../tables/table-store.js';
import { requestBodyBytes } from '../../services/storage-quota.js';

const scopeOf = weaveProjectScope;

const run = runInProject;
const runAsync = runInProjectAsync;

/** 413 for more rows (or updates) than one request may carry, counted before validation copies them. */
function refuseOverRowCap(rows: unknown): void {
  if (Array.isArray(rows) && rows.length > MAX_TABLE_ROWS_PER_REQUEST) {
    throw new HttpError(413, `A table request may carry at most ${MAX_TABLE_ROWS_PER_REQUEST} rows, got ${rows.length}: send the table in pieces (/table/update appends)`);
  }
}

/** The query response as JSON text: row bodies are spliced in as stored, keeping their number text. */
function queryResponseText(rows: readonly StoredTableRow[]): string {
  const parts = rows.map((row) => `{"digest":${JSON.stringify(row.digest)},"val":${row.valJson},"original_index":${row.originalIndex}}`);
  return `{"rows":[${parts.join(',')}]}`;
}

/**
 * Table bodies must be parsed without losing number text ({"x":1.0} and {"x":1} are different rows).
 * The app's body parser uses this function for routes that declare it (config.parseBody).
 */
function withLosslessBody(def: RouteDef): RouteDef {
  return Object.assign(def, { parseBody: parseLosslessJson });
}

export function tableRoutes(ctx: AppContext): RouteDef[] {
  const tables = new TableStore(ctx.store.db);
  const tags = ['tables'];
  const common = { method: 'POST', tags, auth: 'basic-or-bearer', errorStyle: 'reason' } as const;
  const notFound = (projectId: string, digest: string) => new HttpError(404, `Table ${projectId}:${digest} not found`);

  return [
    defineRoute({
      ...common, url: '/table/create', operationId: 'table_create_table_create_post', summary: 'Table Create',
      body: TableCreateReq, response: TableCreateRes,
      errors: { 400: 'Invalid body', 404: 'Project of another entity', 409: 'expected_digest differs from the computed digest', 413: 'More JSON values or rows than one request may carry, or over the storage quota' },
      precheck: (body) => refuseOverRowCap((body as { table?: { rows?: unknown } })?.table?.rows),
      handler: async ({ auth, body, request }) => {
        const scope = run(() => scopeOf(auth, body.table.project_id), () => {
          throw new HttpError(404, `Project ${body.table.project_id} not found`);
        });
        ctx.storageQuota.admit(scope.entity, requestBodyBytes(request.headers, body));
        // Digests and inserts in slices between turns of the event loop: other tenants are answered meanwhile.
        const rows = await runAsync(() => prepareRowsYielding(body.table.rows));
        const created = await runAsync(() => tables.createTableInSlices(scope, rows, body.table.expected_digest, ROWS_PER_SLICE, yieldToEventLoop));
        return { digest: created.digest, row_digests: created.rowDigests };
      },
    }),
    defineRoute({
      ...common, url: '/table/update', operationId: 'table_update_table_update_post', summary: 'Table Update',
      body: TableUpdateReq, response: TableUpdateRes,
      errors: { 400: 'Index out of range', 404: 'Unknown base table', 413: 'More JSON values or updates than one request may carry, or over the storage quota' },
      precheck: (body) => refuseOverRowCap((body as { updates?: unknown })?.updates),
      handler: async ({ auth, body, request }) => {
        const scope = run(() => scopeOf(auth, body.project_id), () => {
          throw notFound(body.project_id, body.base_digest);
        });
        ctx.storageQuota.admit(scope.entity, requestBodyBytes(request.headers, body));
        // Row digests in slices between turns of the event loop; the update itself stays one transaction.
        return runAsync(async () => {
          const updates: TableUpdate[] = [];
          for (const [i, spec] of body.updates.entries()) {
            if (i > 0 && i % ROWS_PER_SLICE === 0) await yieldToEventLoop();
            if ('append' in spec) updates.push({ kind: 'append', row: prepareRow(spec.append.row) });
            else if ('pop' in spec) updates.push({ kind: 'pop', index: spec.pop.index });
            else updates.push({ kind: 'insert', index: spec.insert.index, row: prepareRow(spec.insert.row) });
          }
          const updated = tables.updateTable(scope, body.base_digest, updates);
          return { digest: updated.digest, updated_row_digests: updated.updatedRowDigests };
        });
      },
    }),
    defineRoute({
      ...common, url: '/table/create_from_digests', operationId: 'table_create_from_digests_table_create_from_digests_post',
      summary: 'Table Create From Digests', body: TableCreateFromDigestsReq, response: TableCreateFromDigestsRes,
      errors: { 404: 'Project of another entity', 409: 'expected_digest differs from the computed digest', 413: 'More rows than one request may carry' },
      precheck: (body) => refuseOverRowCap((body as { row_digests?: unknown })?.row_digests),
      handler: ({ auth, body }) =>
        run(
          () => ({ digest: tables.createTableFromDigests(scopeOf(auth, body.project_id), body.row_digests, body.expected_digest) }),
          () => {
            throw new HttpError(404, `Project ${body.project_id} not found`);
          },
        ),
    }),
    defineRoute({
      ...common, url: '/table/query', operationId: 'table_query_table_query_post', summary: 'Table Query',
      body: TableQueryReq, response: TableQueryRes, errors: { 400: 'Invalid sort field' },
      handler: ({ auth, body, reply }) => {
        const rows = run(
          () =>
            tables.queryRows(scopeOf(auth, body.project_id), body.digest, {
              rowDigests: body.filter?.row_digests ?? undefined,
              sortBy: body.sort_by ?? undefined,
              limit: body.limit,
              offset: body.offset,
            }),
          () => [],
        );
        reply.type('application/json; charset=utf-8');
        return queryResponseText(rows);
      },
    }),
    defineRoute({
      ...common, url: '/table/query_stats', operationId: 'table_query_stats_table_query_stats_post', summary: 'Table Query Stats',
      body: TableQueryStatsReq, response: TableQueryStatsRes, errors: { 404: 'Unknown table' },
      handler: ({ auth, body }) =>
        run(
          () => {
            const count = tables.countRows(scopeOf(auth, body.project_id), body.digest);
            if (count === null) throw notFound(body.project_id, body.digest);
            return { count };
          },
          () => {
            throw notFound(body.project_id, body.digest);
          },
        ),
    }),
    defineRoute({
      ...common, url: '/table/query_stats_batch', operationId: 'table_query_stats_batch_table_query_stats_batch_post',
      summary: 'Table Query Stats Batch', body: TableQueryStatsBatchReq, response: TableQueryStatsBatchRes,
      handler: ({ auth, body }) =>
        run(
          () => ({
            // Storage size is only measured by the hosted ClickHouse backend; its SQLite backend also answers null.
            tables: tables
              .statsBatch(scopeOf(auth, body.project_id), body.digests ?? [])
              .map((stats) => ({ count: stats.count, digest: stats.digest, storage_size_bytes: null })),
          }),
          () => ({ tables: [] }),
        ),
    }),
  ].map(withLosslessBody);
}
