// /obj/create, /obj/read, /objs/query, /refs/read_batch: the object slice of the Weave trace server, so
// Weave's own SDKs can version datasets and other objects (`Dataset.save()`, `client.get(ref)`) against
// Hearth. Digests are the hosted service's (see src/weave-objects/prepare-object.ts). Same auth, project
// scoping and `{"reason"}` errors as the table routes; validation stays FastAPI's 422.
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { runInProject, weaveProjectScope } from '../weave-project.js';
import { forbidden, notFound } from '../../errors/domain-errors.js';
import {
  ObjCreateReq, ObjCreateRes, ObjQueryReq, ObjQueryRes, ObjReadReq, ObjReadRes, RefsReadBatchReq, RefsReadBatchRes,
} from '../../schemas/weave-objects.js';
import { parseLosslessJson } from '../../tables/lossless-parse.js';
import { TableStore } from '../../tables/table-store.js';
import { objectIdProblem } from '../../weave-objects/object-id.js';
import { ObjectStore, type StoredObject } from '../../weave-objects/object-store.js';
import { prepareObject } from '../../weave-objects/prepare-object.js';
import { RefResolver } from '../../weave-objects/ref-resolver.js';
import { requestBodyBytes } from '../../services/storage-quota.js';

const run = runInProject;

/** One ObjSchema as JSON text: the value is spliced in as stored, keeping its number text and key order. */
function objectText(projectId: string, obj: StoredObject, metadataOnly = false): string {
  const meta = JSON.stringify({
    project_id: projectId,
    object_id: obj.objectId,
    created_at: obj.createdAt,
    deleted_at: null,
    digest: obj.digest,
    version_index: obj.versionIndex,
    is_latest: obj.isLatest ? 1 : 0,
    kind: obj.kind,
    base_object_class: obj.baseObjectClass,
    leaf_object_class: obj.leafObjectClass,
    wb_user_id: null,
  });
  // "If true, the `val` column is not read from the database and is empty."
  return `${meta.slice(0, -1)},"val":${metadataOnly ? '{}' : obj.valJson}}`;
}

export function weaveObjectRoutes(ctx: AppContext): RouteDef[] {
  const objects = new ObjectStore(ctx.store.db);
  const tables = new TableStore(ctx.store.db);
  const tags = ['objects'];
  const common = { method: 'POST', tags, auth: 'basic-or-bearer', errorStyle: 'reason', parseBody: parseLosslessJson } as const;

  return [
    defineRoute({
      ...common, url: '/obj/create', operationId: 'obj_create_obj_create_post', summary: 'Obj Create',
      body: ObjCreateReq, response: ObjCreateRes,
      errors: { 400: 'Invalid value', 403: 'Invalid object name', 404: 'Project of another entity', 501: 'builtin_object_class without class information in the value' },
      handler: ({ auth, body, request }) =>
        run(
          () => {
            const scope = weaveProjectScope(auth, body.obj.project_id);
            ctx.storageQuota.admit(scope.entity, requestBodyBytes(request.headers, body));
            const problem = objectIdProblem(body.obj.object_id);
            if (problem) throw forbidden(problem);
            const prepared = prepareObject(body.obj.val, body.obj.builtin_object_class ?? body.obj.set_base_object_class);
            return { digest: objects.create(scope, body.obj.object_id, prepared) };
          },
          () => {
            throw notFound(`Project ${body.obj.project_id} not found`);
          },
        ),
    }),
    defineRoute({
      ...common, url: '/obj/read', operationId: 'obj_read_obj_read_post', summary: 'Obj Read',
      body: ObjReadReq, response: ObjReadRes, errors: { 404: 'Unknown object or version' },
      handler: ({ auth, body, reply }) => {
        const missing = () => notFound(`Obj ${body.object_id}:${body.digest} not found`);
        const found = run(
          () => objects.read(weaveProjectScope(auth, body.project_id), body.object_id, body.digest),
          () => undefined,
        );
        if (!found) throw missing();
        reply.type('application/json; charset=utf-8');
        return `{"obj":${objectText(body.project_id, found, body.metadata_only ?? false)}}`;
      },
    }),
    defineRoute({
      ...common, url: '/objs/query', operationId: 'objs_query_objs_query_post', summary: 'Objs Query',
      body: ObjQueryReq, response: ObjQueryRes,
      handler: ({ auth, body, reply }) => {
        const found = run(
          () =>
            objects.query(weaveProjectScope(auth, body.project_id), {
              objectIds: body.filter?.object_ids ?? undefined,
              baseObjectClasses: body.filter?.base_object_classes ?? undefined,
              isOp: body.filter?.is_op ?? undefined,
              latestOnly: body.filter?.latest_only ?? undefined,
              sortBy: body.sort_by ?? undefined,
              limit: body.limit,
              offset: body.offset,
            }),
          () => [],
        );
        reply.type('application/json; charset=utf-8');
        return `{"objs":[${found.map((obj) => objectText(body.project_id, obj, body.metadata_only ?? false)).join(',')}]}`;
      },
    }),
    defineRoute({
      ...common, url: '/refs/read_batch', operationId: 'refs_read_batch_refs_read_batch_post', summary: 'Refs Read Batch',
      body: RefsReadBatchReq, response: RefsReadBatchRes,
      errors: { 400: 'Invalid ref, a table ref, or more than 1000 refs', 404: 'A ref that does not resolve' },
      handler: ({ auth, body, reply }) => {
        const vals = run(() => new RefResolver(objects, tables, auth.entity).readBatch(body.refs), () => []);
        reply.type('application/json; charset=utf-8');
        return `{"vals":[${vals.join(',')}]}`;
      },
    }),
  ];
}
