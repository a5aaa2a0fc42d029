// Wire shapes of the Weave object API and service probes (weave/trace_server/trace_server_interface.py,
// the weave npm package's generated traceServerApi). Top-level requests are strict (extra keys → 422)
// like the service's BaseModelStrict; inner models ignore unknown keys. Bodies arrive parsed by
// lossless-json, so `val` keeps its number text for the digest.
import { z } from 'zod';
import { LaxInt } from './tables.js';
import { OBJECT_SORT_FIELDS } from '../weave-objects/object-store.js';

/** Any JSON value, required (pydantic's `val: Any` still has to be present). */
const AnyValue = z
  .unknown()
  .superRefine((value, ctx) => {
    if (value === undefined) ctx.addIssue({ code: 'invalid_type', expected: 'object', input: value, message: 'Invalid input: expected a value, received undefined' });
  })
  .meta({});

export const ObjSchemaForInsert = z
  .object({
    project_id: z.string(),
    object_id: z.string(),
    val: AnyValue,
    builtin_object_class: z.string().nullish(),
    /** Deprecated alias of builtin_object_class. */
    set_base_object_class: z.string().nullish(),
  })
  .meta({ id: 'ObjSchemaForInsert' });
export const ObjCreateReq = z.strictObject({ obj: ObjSchemaForInsert }).meta({ id: 'ObjCreateReq' });
export const ObjCreateRes = z.object({ digest: z.string() }).meta({ id: 'ObjCreateRes' });

export const ObjSchema = z
  .object({
    project_id: z.string(),
    object_id: z.string(),
    created_at: z.string(),
    deleted_at: z.string().nullable(),
    digest: z.string(),
    version_index: z.number().int(),
    is_latest: z.number().int(),
    kind: z.string(),
    base_object_class: z.string().nullable(),
    leaf_object_class: z.string().nullable(),
    val: z.unknown(),
    wb_user_id: z.string().nullable(),
  })
  .meta({ id: 'ObjSchema' });

export const ObjReadReq = z
  .strictObject({ project_id: z.string(), object_id: z.string(), digest: z.string(), metadata_only: z.boolean().nullish() })
  .meta({ id: 'ObjReadReq' });
export const ObjReadRes = z.object({ obj: ObjSchema }).meta({ id: 'ObjReadRes' });

export const ObjectVersionFilter = z
  .strictObject({
    base_object_classes: z.array(z.string()).nullish(),
    object_ids: z.array(z.string()).nullish(),
    is_op: z.boolean().nullish(),
    latest_only: z.boolean().nullish(),
  })
  .meta({ id: 'ObjectVersionFilter' });
export const ObjSortBy = z
  .strictObject({ field: z.enum(OBJECT_SORT_FIELDS), direction: z.enum(['asc', 'desc']) })
  .meta({ id: 'ObjSortBy' });
export const ObjQueryReq = z
  .strictObject({
    project_id: z.string(),
    filter: ObjectVersionFilter.nullish(),
    limit: LaxInt.nullish(),
    offset: LaxInt.nullish(),
    sort_by: z.array(ObjSortBy).nullish(),
    metadata_only: z.boolean().nullish(),
  })
  .meta({ id: 'ObjQueryReq' });
export const ObjQueryRes = z.object({ objs: z.array(ObjSchema) }).meta({ id: 'ObjQueryRes' });

export const RefsReadBatchReq = z.strictObject({ refs: z.array(z.string()) }).meta({ id: 'RefsReadBatchReq' });
export const RefsReadBatchRes = z.object({ vals: z.array(z.unknown()) }).meta({ id: 'RefsReadBatchRes' });

export const WeaveHealthRes = z.object({ status: z.literal('ok') }).meta({ id: 'WeaveHealthRes' });
export const ServerInfoRes = z.object({ min_required_weave_python_version: z.string() }).meta({ id: 'ServerInfoRes' });
