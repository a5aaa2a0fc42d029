// The Weave table API over real HTTP: digests, update semantics, errors (with the store unchanged),
// auth schemes, bodies without Content-Type, and 1,000-row round trips.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../helpers/server.js';

// From the contract's digest vectors (shared/spec/table-digest-vectors.json).
const R0 = { input: 'a', expected: 1 };
const R1 = { input: 'b', expected: 2 };
const R2 = { input: 'c', expected: 3 };
const R3 = { input: 'd', expected: 4 };
const D0 = 'kXb3frCztYE5t0ivZ0rJXmPkWD37tFxjlxbx3FCORtg';
const D1 = 'NY09TAcoxBErBkpGH4YfhLzreGgBYDEP8PB5kHk2IRM';
const D2 = 'qPPpCY97ygrlLscxbFNWv66CA3ru1X2xgMCPfjc449g';
const D3 = '9cPSgg1wasAlMlPYbyOYaXzYkYuABtQj6fdh2Uqegew';
const T01 = 'ee4a70b881838f452d35dd84f2af31ca3bfcdec42bcab9e1f41ebf21ff1951e9';
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const ROW_VECTORS: [string, string][] = [
  ['{"x":1.0}', 'hXYo5CD9tT04YhwV9Lb3Yn20n4eGfwZO2DFpPCvifmA'],
  ['{"x":1}', 'YTYlqmU0Pbsbmr5qusZ3P1yRvWDT8vX34urmnh24sic'],
  ['{"x":1e-05,"y":1e16,"z":-0.0,"w":0.1,"v":123456789012345678901234567890}', 'LXravYCL4fR7I7LH2etXqhff1g9uGc5JSAGXkezXxAY'],
  ['{"raw_utf8":"héllo 世界 😀"}', 'JXQfUGvjF0FxccOxEh2GYY75Uy4HNXWoiVoYzOuCqt0'],
  ['{"big":1.7976931348623157e308,"small":5e-324,"f":3.14159,"g":100.0,"h":1.5e300}', 'gRJD8dFUwe3R3u9JMLiaZzm4nUx7hb5nGI49efXX5FE'],
];

let server: TestServer;
let key: string;
let otherKey: string;
const project = 'alice/evals';

beforeAll(async () => {
  server = await startServer();
  key = server.key('alice');
  otherKey = server.key('mallory');
});
afterAll(async () => server.close());

function storedCounts(): Record<string, number> {
  const count = (table: string) => server.store.db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
  return { rows: count('weave_table_rows'), chunks: count('weave_table_chunks'), tables: count('weave_tables') };
}

/** POST raw JSON text as the Python client does: Basic auth and no Content-Type header. */
async function postLikePython(path: string, text: string, apiKey = key): Promise<{ status: number; text: string }> {
  const res = await fetch(server.url + path, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`api:${apiKey}`).toString('base64')}` },
    body: Buffer.from(text, 'utf8'), // a byte body: fetch adds no Content-Type
  });
  return { status: res.status, text: await res.text() };
}

const post = (path: string, body: unknown, apiKey = key) => server.call('POST', path, { key: apiKey, body });

describe('digests', () => {
  it('create reproduces the contract vectors', async () => {
    const res = await post('/table/create', { table: { project_id: project, rows: [R0, R1] } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ digest: T01, row_digests: [D0, D1] });
  });

  it('keeps number text: 1.0 and 1, exponents, big integers, non-ASCII', async () => {
    const rowsText = ROW_VECTORS.map(([row]) => row).join(',');
    const res = await postLikePython('/table/create', `{"table":{"project_id":"${project}","rows":[${rowsText}]}}`);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).row_digests).toEqual(ROW_VECTORS.map(([, digest]) => digest));
  });

  it('query returns the rows with their number text intact', async () => {
    const created = await postLikePython('/table/create', `{"table":{"project_id":"${project}","rows":[{"x":1.0,"n":123456789012345678901234567890,"e":1E2}]}}`);
    const { digest } = JSON.parse(created.text);
    const res = await postLikePython('/table/query', JSON.stringify({ project_id: project, digest }));
    expect(res.status).toBe(200);
    expect(res.text).toContain('"val":{"x":1.0,"n":123456789012345678901234567890,"e":100.0}');
    expect(res.text).toContain('"original_index":0');
  });
});

describe('update', () => {
  it('applies the worked example', async () => {
    await post('/table/create', { table: { project_id: project, rows: [R0, R1] } });
    const res = await post('/table/update', {
      project_id: project,
      base_digest: T01,
      updates: [{ append: { row: R2 } }, { pop: { index: 0 } }, { insert: { index: 1, row: R3 } }],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ digest: '1ae93bcff932f90f750c540046d88e6e8cb5f8edd07ddfd7ffa3e9beb13c0f75', updated_row_digests: [D2, D0, D3] });
    const query = await post('/table/query', { project_id: project, digest: res.body.digest });
    expect(query.body.rows).toEqual([
      { digest: D1, val: R1, original_index: 0 },
      { digest: D3, val: R3, original_index: 1 },
      { digest: D2, val: R2, original_index: 2 },
    ]);
  });

  it('updates: [] returns the base digest', async () => {
    await post('/table/create', { table: { project_id: project, rows: [R0, R1] } });
    const res = await post('/table/update', { project_id: project, base_digest: T01, updates: [] });
    expect(res.body).toEqual({ digest: T01, updated_row_digests: [] });
  });

  it('the empty table exists once created, then accepts appends', async () => {
    const created = await post('/table/create', { table: { project_id: 'alice/fresh', rows: [] } });
    expect(created.body).toEqual({ digest: EMPTY, row_digests: [] });
    const res = await post('/table/update', { project_id: 'alice/fresh', base_digest: EMPTY, updates: [{ append: { row: R0 } }] });
    expect(res.body.updated_row_digests).toEqual([D0]);
  });
});

describe('errors leave the store unchanged', () => {
  const cases: [string, () => Promise<{ status: number; body: any }>, number, unknown][] = [
    ['pop past the end', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ append: { row: R2 } }, { pop: { index: 3 } }] }), 400, { reason: 'Index out of range' }],
    ['insert past the end', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ insert: { index: 3, row: R2 } }] }), 400, { reason: 'Index out of range' }],
    ['negative pop', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ pop: { index: -1 } }] }), 400, { reason: 'Index out of range' }],
    ['unknown base digest', () => post('/table/update', { project_id: project, base_digest: '0'.repeat(64), updates: [{ append: { row: R2 } }] }), 404, { reason: `Table ${project}:${'0'.repeat(64)} not found` }],
    ['another entity\'s table', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ append: { row: R2 } }] }, otherKey), 404, undefined],
    ['create in another entity', () => post('/table/create', { table: { project_id: project, rows: [R2] } }, otherKey), 404, undefined],
    ['extra top-level property', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ append: { row: R2 } }], extra: 1 }), 422, undefined],
    ['row that is not an object (create)', () => post('/table/create', { table: { project_id: project, rows: [R2, [1, 2]] } }), 422, undefined],
    ['row that is not an object (append)', () => post('/table/update', { project_id: project, base_digest: T01, updates: [{ append: { row: R2 } }, { append: { row: 'x' } }] }), 422, undefined],
    ['expected_digest mismatch', () => post('/table/create', { table: { project_id: project, rows: [R2], expected_digest: T01 } }), 409, undefined],
    ['malformed JSON', () => server.call('POST', '/table/create', { key, rawBody: '{"table": {', headers: { 'content-type': 'application/json' } }), 422, undefined],
    ['malformed project_id', () => post('/table/create', { table: { project_id: 'no-slash', rows: [R2] } }), 400, undefined],
    ['missing API key', () => server.call('POST', '/table/create', { body: { table: { project_id: project, rows: [R2] } } }), 401, undefined],
  ];

  for (const [name, send, status, body] of cases) {
    it(`${name} → ${status}`, async () => {
      await post('/table/create', { table: { project_id: project, rows: [R0, R1] } });
      const before = storedCounts();
      const res = await send();
      expect(res.status).toBe(status);
      if (body !== undefined) expect(res.body).toEqual(body);
      if (status === 422) expect(Array.isArray(res.body.detail)).toBe(true);
      else if (status !== 401) expect(typeof res.body.reason).toBe('string');
      expect(storedCounts()).toEqual(before);
    });
  }

  it('422 items point at the offending field', async () => {
    const res = await post('/table/update', { project_id: project, base_digest: T01, updates: [{ append: { row: 5 } }], extra: 1 });
    expect(res.body.detail).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'extra_forbidden', loc: ['body', 'extra'] }),
        expect.objectContaining({ type: 'dict_type', loc: ['body', 'updates', 0, 'append', 'row'] }),
      ]),
    );
  });

  it('invalid sort paths are 400; another entity sees no rows', async () => {
    const bad = await post('/table/query', { project_id: project, digest: T01, sort_by: [{ field: 'a..b', direction: 'asc' }] });
    expect(bad.status).toBe(400);
    const foreign = await post('/table/query', { project_id: project, digest: T01 }, otherKey);
    expect(foreign.body).toEqual({ rows: [] });
    const stats = await post('/table/query_stats_batch', { project_id: project, digests: [T01] }, otherKey);
    expect(stats.body).toEqual({ tables: [] });
  });
});

describe('auth and transport', () => {
  it('accepts Basic api:<key> and Bearer alike', async () => {
    const basic = await postLikePython('/table/query_stats', JSON.stringify({ project_id: project, digest: T01 }));
    const bearer = await post('/table/query_stats', { project_id: project, digest: T01 });
    expect(basic.status).toBe(200);
    expect(JSON.parse(basic.text)).toEqual({ count: 2 });
    expect(bearer.body).toEqual({ count: 2 });
  });

  it('documents every table route in the OpenAPI document, with Basic and Bearer', async () => {
    const doc = (await server.call('GET', '/openapi.json')).body;
    for (const path of ['/table/create', '/table/update', '/table/create_from_digests', '/table/query', '/table/query_stats', '/table/query_stats_batch']) {
      expect(doc.paths[path].post.security).toEqual([{ HTTPBasic: [] }, { HTTPBearer: [] }]);
    }
    expect(doc.components.schemas.TableUpdateReq.additionalProperties).toBe(false);
  });

  it('rejects a wrong key under Basic', async () => {
    const res = await postLikePython('/table/query_stats', JSON.stringify({ project_id: project, digest: T01 }), 'not-a-key');
    expect(res.status).toBe(401);
  });
});

describe('1,000-row tables', () => {
  const rows = Array.from({ length: 1000 }, (_, i) => ({
    messages: [{ role: 'user', content: `q${i}` }, { role: 'assistant', content: `a${i}` }],
    score: i % 7,
    id: i,
  }));

  it('create, query in pages, update and count', async () => {
    const created = await postLikePython('/table/create', JSON.stringify({ table: { project_id: 'alice/big', rows } }));
    expect(created.status).toBe(200);
    const { digest, row_digests } = JSON.parse(created.text);
    expect(row_digests).toHaveLength(1000);

    const seen: unknown[] = [];
    for (let offset = 0; offset < 1000; offset += 100) {
      const page = await post('/table/query', { project_id: 'alice/big', digest, limit: 100, offset });
      expect(page.body.rows.map((r: any) => r.original_index)).toEqual(Array.from({ length: 100 }, (_, i) => offset + i));
      expect(page.body.rows.map((r: any) => r.digest)).toEqual(row_digests.slice(offset, offset + 100));
      seen.push(...page.body.rows.map((r: any) => r.val));
    }
    expect(seen).toEqual(rows);

    const updated = await post('/table/update', {
      project_id: 'alice/big',
      base_digest: digest,
      updates: [{ pop: { index: 999 } }, { insert: { index: 0, row: { id: -1 } } }, { append: { row: { id: 1000 } } }],
    });
    expect(updated.status).toBe(200);
    expect(updated.body.updated_row_digests[0]).toBe(row_digests[999]);
    const stats = await post('/table/query_stats_batch', { project_id: 'alice/big', digests: [digest, updated.body.digest, 'missing'] });
    expect(stats.body).toEqual({
      tables: [
        { count: 1000, digest, storage_size_bytes: null },
        { count: 1001, digest: updated.body.digest, storage_size_bytes: null },
      ],
    });
    const ends = await post('/table/query', { project_id: 'alice/big', digest: updated.body.digest, offset: 999 });
    expect(ends.body.rows.map((r: any) => [r.original_index, r.val.id])).toEqual([[999, 998], [1000, 1000]]);

    const sorted = await post('/table/query', {
      project_id: 'alice/big', digest, sort_by: [{ field: 'score', direction: 'desc' }, { field: 'id', direction: 'asc' }], limit: 3,
    });
    expect(sorted.body.rows.map((r: any) => r.val.id)).toEqual([6, 13, 20]);
    const filtered = await post('/table/query', { project_id: 'alice/big', digest, filter: { row_digests: [row_digests[5], row_digests[500]] } });
    expect(filtered.body.rows.map((r: any) => r.original_index)).toEqual([5, 500]);
  });

  it('create_from_digests rebuilds the same table digest', async () => {
    const created = await post('/table/create', { table: { project_id: 'alice/big', rows: rows.slice(0, 10) } });
    const rebuilt = await post('/table/create_from_digests', { project_id: 'alice/big', row_digests: created.body.row_digests });
    expect(rebuilt.body).toEqual({ digest: created.body.digest });
  });
});
