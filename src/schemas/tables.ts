// Wire shapes of the Weave table API (weave/trace_server/trace_server_interface.py).
// Request models are strict at the top level (pydantic BaseModelStrict: extra keys → 422); the
// inner models (table, update specs) ignore unknown keys, as pydantic's default does.
// Bodies arrive parsed by lossless-json: numbers are LosslessNumber (their written text).
import { isLosslessNumber } from 'lossless-json';
import { z } from 'zod';

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isLosslessNumber(value);
}

/**
 * A table row: any JSON object, passed through untouched (no copy: key order, number text and a
 * "__proto__" key all survive, which z.record would not guarantee).
 */
export const TableRow = z
  .unknown()
  .superRefine((value, ctx) => {
    if (!isJsonObject(value)) ctx.addIssue({ code: 'invalid_type', expected: 'record', input: value, message: 'Input should be a valid dictionary' });
  })
  .transform((value) => value as Record<string, unknown>)
  .meta({ type: 'object', additionalProperties: true });

/**
 * pydantic's lax int: a JSON integer (any size), a float with no fraction, or integer text.
 * Integers beyond 2^53 are clamped: as an index or offset they are past any table, as in Python.
 */
export const LaxInt = z.preprocess((value) => {
  let number: unknown = value;
  if (isLosslessNumber(value)) number = Number(value.value);
  else if (typeof value === 'string' && /^\s*[+-]?\d+\s*$/.test(value)) number = Number(value);
  if (typeof number === 'number' && Number.isInteger(number) && !Number.isSafeInteger(number)) {
    return Math.sign(number) * Number.MAX_SAFE_INTEGER;
  }
  return number;
}, z.number().int()).meta({ type: 'integer' });

export const TableSchemaForInsert = z
  .object({
    project_id: z.string(),
    rows: z.array(TableRow),
    expected_digest: z.string().nullish(),
  })
  .meta({ id: 'TableSchemaForInsert' });

export const TableCreateReq = z.strictObject({ table: TableSchemaForInsert }).meta({ id: 'TableCreateReq' });
export const TableCreateRes = z.object({ digest: z.string(), row_digests: z.array(z.string()) }).meta({ id: 'TableCreateRes' });

export const TableAppendSpec = z.object({ append: z.object({ row: TableRow }) }).meta({ id: 'TableAppendSpec' });
export const TablePopSpec = z.object({ pop: z.object({ index: LaxInt }) }).meta({ id: 'TablePopSpec' });
export const TableInsertSpec = z.object({ insert: z.object({ index: LaxInt, row: TableRow }) }).meta({ id: 'TableInsertSpec' });
export const TableUpdateSpec = z.union([TableAppendSpec, TablePopSpec, TableInsertSpec]);

export const TableUpdateReq = z
  .strictObject({ project_id: z.string(), base_digest: z.string(), updates: z.array(TableUpdateSpec) })
  .meta({ id: 'TableUpdateReq' });
export const TableUpdateRes = z
  .object({ digest: z.string(), updated_row_digests: z.array(z.string()) })
  .meta({ id: 'TableUpdateRes' });

export const TableCreateFromDigestsReq = z
  .strictObject({ project_id: z.string(), row_digests: z.array(z.string()), expected_digest: z.string().nullish() })
  .meta({ id: 'TableCreateFromDigestsReq' });
export const TableCreateFromDigestsRes = z.object({ digest: z.string() }).meta({ id: 'TableCreateFromDigestsRes' });

export const TableRowFilter = z.strictObject({ row_digests: z.array(z.string()).nullish() }).meta({ id: 'TableRowFilter' });
export const SortBy = z.strictObject({ field: z.string(), direction: z.enum(['asc', 'desc']) }).meta({ id: 'SortBy' });

export const TableQueryReq = z
  .strictObject({
    project_id: z.string(),
    digest: z.string(),
    filter: TableRowFilter.nullish(),
    limit: LaxInt.nullish(),
    offset: LaxInt.nullish(),
    sort_by: z.array(SortBy).nullish(),
  })
  .meta({ id: 'TableQueryReq' });
export const TableRowSchema = z
  .object({ digest: z.string(), val: z.unknown(), original_index: z.number().int().nullable() })
  .meta({ id: 'TableRowSchema' });
export const TableQueryRes = z.object({ rows: z.array(TableRowSchema) }).meta({ id: 'TableQueryRes' });

export const TableQueryStatsReq = z.strictObject({ project_id: z.string(), digest: z.string() }).meta({ id: 'TableQueryStatsReq' });
export const TableQueryStatsRes = z.object({ count: z.number().int() }).meta({ id: 'TableQueryStatsRes' });

export const TableQueryStatsBatchReq = z
  .strictObject({
    project_id: z.string(),
    digests: z.array(z.string()).nullish(),
    include_storage_size: z.boolean().nullish(),
  })
  .meta({ id: 'TableQueryStatsBatchReq' });
export const TableStatsRow = z
  .object({ count: z.number().int(), digest: z.string(), storage_size_bytes: z.number().int().nullable() })
  .meta({ id: 'TableStatsRow' });
export const TableQueryStatsBatchRes = z.object({ tables: z.array(TableStatsRow) }).meta({ id: 'TableQueryStatsBatchRes' });
