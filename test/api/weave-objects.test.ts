// The Weave object API over real HTTP: digests (vectors computed with CPython's json.dumps(sort_keys=True)
// + sha256, the service's algorithm), versions, reads by digest / 'latest' / 'v<N>', queries, refs into
// objects and table rows, entity isolation, and errors in the service's `{"reason"}` and 422 shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../helpers/server.js';

const project = 'alice/evals';
const TABLE = 'ee4a70b881838f452d35dd84f2af31ca3bfcdec42bcab9e1f41ebf21ff1951e9'; // rows {input:'a',expected:1}, {input:'b',expected:2}
const ROW_A = 'kXb3frCztYE5t0ivZ0rJXmPkWD37tFxjlxbx3FCORtg';
const DATASET = {
  _type: 'Dataset', _class_name: 'Dataset', _bases: ['Object', 'BaseModel'], name: 'grammar',
  rows: `weave:///alice/evals/table/${TABLE}`,
};
// python3: base64.urlsafe_b64encode(sha256(json.dumps(json.loads(text), sort_keys=True).encode())) with -→X, _→Y, no '='
const DATASET_DIGEST = 'SYTieMBaktKtRjKZwbuHKMhikY2xNPvaZsu66ZVBB5k';
const FLOAT_TEXT = '{"b":1.0,"a":[1,2e-05,"é😀"],"c":{"z":null,"y":true}}';
const FLOAT_DIGEST = 'VK6Q4lnswtmVH2wVNo86kVfjl32tVnxt2bLg2jakyZE';
const INT_DIGEST = 'MnYKGRcgZ0oecBX9G2mjtf5umuxNZVYx8ZK2jXCdaVw'; // the same with "b":1
const STRING_DIGEST = 'PXAd71Sxxs15Wy6Yy6tkFQ9qUHvOBDBAxmLGgu6Y7R4'; // "just a string"
const BIG_INT_DIGEST = 'DHHr3Ec2vwmoiEV3UKoi98iVAmr7ZLQPj72UCSxhwZs'; // 12345678901234567890123

let server: TestServer;
let key: string;
let otherKey: string;

beforeAll(async () => {
  server = await startServer();
  key = server.key('alice');
  otherKey = server.key('mallory');
});
afterAll(async () => server.close());

const post = (path: string, body: unknown, apiKey = key) => server.call('POST', path, { key: apiKey, body });

/** POST raw JSON text as Weave's Python client does: Basic auth, no Content-Type. */
async function postText(path: string, text: string, apiKey = key): Promise<{ status: number; text: string }> {
  const res = await fetch(server.url + path, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`api:${apiKey}`).toString('base64')}` },
    body: Buffer.from(text, 'utf8'),
  });
  return { status: res.status, text: await res.text() };
}

const createText = (objectId: string, valText: string) =>
  postText('/obj/create', `{"obj":{"project_id":"${project}","object_id":"${objectId}","val":${valText}}}`);

describe('service probes', () => {
  it('GET /health and /server_info answer without a key', async () => {
    expect(await server.call('GET', '/health')).toMatchObject({ status: 200, body: { status: 'ok' } });
    const info = await server.call('GET', '/server_info');
    expect(info.status).toBe(200);
    expect(info.body).toEqual({ min_required_weave_python_version: '0.0.0' });
  });
});

describe('obj/create digests', () => {
  it('match the service for a Dataset, floats vs ints, unicode, non-dict values and big integers', async () => {
    expect((await post('/obj/create', { obj: { project_id: project, object_id: 'grammar', val: DATASET } })).body).toEqual({ digest: DATASET_DIGEST });
    expect(JSON.parse((await createText('floats', FLOAT_TEXT)).text)).toEqual({ digest: FLOAT_DIGEST });
    expect(JSON.parse((await createText('floats', FLOAT_TEXT.replace('1.0', '1'))).text)).toEqual({ digest: INT_DIGEST });
    expect(JSON.parse((await createText('a-string', '"just a string"')).text)).toEqual({ digest: STRING_DIGEST });
    expect(JSON.parse((await createText('big.int', '12345678901234567890123')).text)).toEqual({ digest: BIG_INT_DIGEST });
  });

  it('reads back the value as sent: number text and key order kept', async () => {
    const res = await postText('/obj/read', `{"project_id":"${project}","object_id":"floats","digest":"${FLOAT_DIGEST}"}`);
    expect(res.status).toBe(200);
    expect(res.text).toContain(`"val":${FLOAT_TEXT}`);
    const big = await postText('/obj/read', `{"project_id":"${project}","object_id":"big.int","digest":"latest"}`);
    expect(big.text).toContain('"val":12345678901234567890123}');
  });
});

describe('versions', () => {
  it('numbers versions from 0, re-creating a known digest adds none, and reads by digest, latest and v<N>', async () => {
    const create = (n: number) => post('/obj/create', { obj: { project_id: project, object_id: 'config', val: { n } } });
    const d0 = (await create(0)).body.digest;
    const d1 = (await create(1)).body.digest;
    expect((await create(0)).body.digest).toBe(d0);

    const read = (digest: string) => post('/obj/read', { project_id: project, object_id: 'config', digest });
    const latest = (await read('latest')).body.obj;
    expect(latest).toMatchObject({ project_id: project, object_id: 'config', digest: d1, version_index: 1, is_latest: 1, kind: 'object', val: { n: 1 }, deleted_at: null });
    expect(new Date(latest.created_at).getTime()).not.toBeNaN();
    expect((await read('v0')).body.obj).toMatchObject({ digest: d0, version_index: 0, is_latest: 0, val: { n: 0 } });
    expect((await read(d0)).body.obj.version_index).toBe(0);
    const missing = await read('v7');
    expect(missing).toMatchObject({ status: 404, body: { reason: 'Obj config:v7 not found' } });
  });

  it('derives kind and object classes as the service does', async () => {
    const read = await post('/obj/read', { project_id: project, object_id: 'grammar', digest: DATASET_DIGEST });
    expect(read.body.obj).toMatchObject({ kind: 'object', base_object_class: 'Dataset', leaf_object_class: 'Dataset' });
    const op = { _type: 'CustomWeaveType', weave_type: { type: 'Op' }, files: { 'obj.py': 'x' } };
    await post('/obj/create', { obj: { project_id: project, object_id: 'my_op', val: op } });
    const sub = { _type: 'MyEval', _class_name: 'MyEval', _bases: ['Evaluation', 'Object', 'BaseModel'] };
    await post('/obj/create', { obj: { project_id: project, object_id: 'my_eval', val: sub } });
    const ops = await post('/objs/query', { project_id: project, filter: { is_op: true } });
    expect(ops.body.objs.map((o: { object_id: string; kind: string }) => [o.object_id, o.kind])).toEqual([['my_op', 'op']]);
    const evals = await post('/objs/query', { project_id: project, filter: { base_object_classes: ['Evaluation'] } });
    expect(evals.body.objs).toHaveLength(1);
    expect(evals.body.objs[0]).toMatchObject({ object_id: 'my_eval', base_object_class: 'Evaluation', leaf_object_class: 'MyEval' });
  });
});

describe('objs/query', () => {
  it('filters by id and latest, sorts, pages and can leave values out', async () => {
    const all = await post('/objs/query', { project_id: project, filter: { object_ids: ['config'] } });
    expect(all.body.objs.map((o: { version_index: number }) => o.version_index)).toEqual([0, 1]);
    const latest = await post('/objs/query', { project_id: project, filter: { object_ids: ['config', 'floats'], latest_only: true } });
    expect(latest.body.objs.map((o: { object_id: string; digest: string }) => [o.object_id, o.digest])).toEqual([
      ['floats', INT_DIGEST],
      ['config', all.body.objs[1].digest],
    ]);
    const sorted = await post('/objs/query', {
      project_id: project, filter: { latest_only: true }, sort_by: [{ field: 'object_id', direction: 'desc' }], limit: 2, offset: 1, metadata_only: true,
    });
    expect(sorted.body.objs.map((o: { object_id: string; val: unknown }) => [o.object_id, o.val])).toEqual([['my_eval', {}], ['grammar', {}]]);
  });
});

describe('refs/read_batch', () => {
  it('resolves object refs, attribute paths and dataset rows through the table', async () => {
    await post('/table/create', { table: { project_id: project, rows: [{ input: 'a', expected: 1 }, { input: 'b', expected: 2 }] } });
    const res = await post('/refs/read_batch', {
      refs: [
        `weave:///${project}/object/grammar:${DATASET_DIGEST}`,
        `weave:///${project}/object/grammar:${DATASET_DIGEST}/attr/name`,
        `weave:///${project}/object/grammar:${DATASET_DIGEST}/attr/rows/id/${ROW_A}`,
        `weave:///${project}/object/floats:${FLOAT_DIGEST}/key/a/index/-1`,
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.vals).toEqual([DATASET, 'grammar', { input: 'a', expected: 1 }, 'é😀']);
  });

  it('answers 404 for unknown objects and paths, 400 for table refs, malformed refs and too many refs', async () => {
    const one = (ref: string) => post('/refs/read_batch', { refs: [ref] });
    expect(await one(`weave:///${project}/object/nope:abc`)).toMatchObject({ status: 404, body: { reason: 'Obj nope:abc not found' } });
    expect((await one(`weave:///${project}/object/grammar:${DATASET_DIGEST}/attr/missing`)).status).toBe(404);
    expect(await one(`weave:///${project}/table/${TABLE}`)).toMatchObject({ status: 400, body: { reason: 'Table refs not supported' } });
    expect((await one('weave:///alice/evals/object/no-digest')).status).toBe(400);
    expect((await post('/refs/read_batch', { refs: Array(1001).fill(`weave:///${project}/object/grammar:${DATASET_DIGEST}`) })).body).toEqual({ reason: 'Too many refs' });
  });
});

describe('isolation and errors', () => {
  it("another entity's key sees none of alice's objects", async () => {
    expect((await post('/obj/read', { project_id: project, object_id: 'grammar', digest: 'latest' }, otherKey)).status).toBe(404);
    expect((await post('/objs/query', { project_id: project }, otherKey)).body).toEqual({ objs: [] });
    expect((await post('/refs/read_batch', { refs: [`weave:///${project}/object/grammar:${DATASET_DIGEST}`] }, otherKey)).status).toBe(404);
    const create = await post('/obj/create', { obj: { project_id: project, object_id: 'x', val: 1 } }, otherKey);
    expect(create).toMatchObject({ status: 404, body: { reason: `Project ${project} not found` } });
    expect((await server.call('POST', '/obj/read', { body: { project_id: project, object_id: 'grammar', digest: 'latest' } })).status).toBe(401);
  });

  it('validates bodies with 422 in FastAPI shape and names with 403 as the service does', async () => {
    const missingVal = await post('/obj/create', { obj: { project_id: project, object_id: 'x' } });
    expect(missingVal.status).toBe(422);
    expect(missingVal.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'obj', 'val'], type: 'missing' })]);
    const extra = await post('/obj/read', { project_id: project, object_id: 'x', digest: 'latest', extra: 1 });
    expect(extra.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'extra'], type: 'extra_forbidden' })]);
    const badSort = await post('/objs/query', { project_id: project, sort_by: [{ field: 'val', direction: 'asc' }] });
    expect(badSort.status).toBe(422);
    const badName = await post('/obj/create', { obj: { project_id: project, object_id: 'a/b', val: 1 } });
    expect(badName).toMatchObject({ status: 403, body: { reason: "Invalid object name: a/b. Contains invalid characters: ['/']." } });
    const tooLong = await post('/obj/create', { obj: { project_id: project, object_id: 'x'.repeat(129), val: 1 } });
    expect(tooLong.status).toBe(403);
    expect((await post('/obj/create', { obj: { project_id: project, object_id: 'é_ok-1.0', val: 1 } })).status).toBe(200);
  });

  it('builtin_object_class: passes a value that names the class, 400 on a mismatch, 501 when only the registry could tell', async () => {
    const leaderboard = { _type: 'Leaderboard', _class_name: 'Leaderboard', _bases: ['BaseObject', 'BaseModel'], name: 'lb' };
    const ok = await post('/obj/create', { obj: { project_id: project, object_id: 'lb', val: leaderboard, builtin_object_class: 'Leaderboard' } });
    expect(ok.status).toBe(200);
    const mismatch = await post('/obj/create', { obj: { project_id: project, object_id: 'lb', val: leaderboard, builtin_object_class: 'Model' } });
    expect(mismatch).toMatchObject({ status: 400, body: { reason: "object_class must match val's defined object class: Leaderboard != Model" } });
    const bare = await post('/obj/create', { obj: { project_id: project, object_id: 'lb', val: { name: 'lb' }, builtin_object_class: 'Leaderboard' } });
    expect(bare.status).toBe(501);
    expect(bare.body.reason).toContain('builtin_object_class');
  });

  it('unknown paths under the object routes answer 404 in the service shape', async () => {
    expect(await post('/obj/delete', {})).toMatchObject({ status: 404 });
  });
});
