// Weave's own TypeScript SDK (the `weave` npm package, unmodified) against a real Hearth server:
// weave.login probes /health, weave.init + Dataset.save() creates the table and the object, the ref reads
// the dataset back (obj/read + table/query), and the SDK's trace-server client reads dataset rows by ref,
// queries objects and asks /server_info. Digests are checked against values computed with CPython's
// json.dumps(sort_keys=True) + sha256 (the hosted service's algorithm), not against Hearth's own code.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as weave from 'weave';
import { startServer, type TestServer } from '../helpers/server.js';

const ROWS = [
  { id: '0', sentence: 'He no likes ice cream.', correction: "He doesn't like ice cream." },
  { id: '1', sentence: 'She goed to the store.', score: 0.5, tags: ['verb', 'tense'] },
];
// python3: row digest = b64url(sha256(json.dumps(row, sort_keys=True))) with -→X, _→Y, no '=';
// table = hex sha256 of the row digests; dataset = the row form over the SDK's object value.
const ROW_DIGESTS = ['PpNboTjoqPLdD0Tu5YFKatmQ1wUwkz6SYsnDI95g06Q', 'yp4QHManL1wDY60QpMYkZ1AGZTDVFTKiJTJlcjkHrxk'];
const TABLE_DIGEST = '4feac404aba8f99807832b724a09b35167d4381399299ce48bb98af0b711142f';
const DATASET_DIGEST = 'mMVxvjrn5GDZbX7mY5H5hL6akECWsv5VZmxc26nYQ9A';

let server: TestServer;
let home: string;
const savedEnv = { ...process.env };

beforeAll(async () => {
  server = await startServer();
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-weave-home-'));
  // The SDK reads its key from WANDB_API_KEY and its trace server from WF_TRACE_SERVER_URL; login writes ~/.netrc.
  process.env.HOME = home;
  fs.writeFileSync(path.join(home, '.netrc'), ''); // the SDK logs an error when the file is missing
  process.env.WANDB_API_KEY = server.key('alice');
  process.env.WF_TRACE_SERVER_URL = server.url;
  delete process.env.WANDB_BASE_URL;
});
afterAll(async () => {
  process.env = savedEnv;
  await server.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** A loaded row without the ref the SDK attaches to it. */
function plain(row: Record<string, unknown>): Record<string, unknown> {
  const { __savedRef: _ref, ...rest } = row;
  return rest;
}

describe("Weave's TypeScript SDK against Hearth", () => {
  it('login probes /health with the key', async () => {
    await weave.login(process.env.WANDB_API_KEY as string, 'hearth.local');
    expect(fs.readFileSync(path.join(home, '.netrc'), 'utf8')).toContain('hearth.local');
  });

  it('Dataset.save() stores the table and the object with the service digests, and its ref reads it back', async () => {
    const client = await weave.init('alice/evals');
    const dataset = new weave.Dataset({ name: 'grammar', rows: ROWS.map((row) => ({ ...row })) });
    const ref = await dataset.save();
    expect(ref.uri()).toBe(`weave:///alice/evals/object/grammar:${DATASET_DIGEST}`);

    const loaded = (await weave.ObjectRef.fromUri(ref.uri()).get()) as InstanceType<typeof weave.Dataset>;
    expect(loaded).toBeInstanceOf(weave.Dataset);
    expect(loaded.name).toBe('grammar');
    expect(loaded.rows.rows.map(plain)).toEqual(ROWS);

    const viaClient = (await client.get(ref)) as InstanceType<typeof weave.Dataset>;
    expect(viaClient.length).toBe(2);

    // Rows of the saved dataset carry refs into the table; the SDK's trace-server client resolves them.
    const rowRef = await (dataset.getRow(1) as unknown as { __savedRef: Promise<{ uri(): string }> }).__savedRef;
    expect(rowRef.uri()).toBe(`weave:///alice/evals/object/grammar:${DATASET_DIGEST}/attr/rows/id/${ROW_DIGESTS[1]}`);
    const api = client.traceServerApi;
    const refs = await api.refs.refsReadBatchRefsReadBatchPost({ refs: [rowRef.uri(), `${ref.uri()}/attr/rows`] });
    expect(refs.data.vals).toEqual([ROWS[1], `weave:///alice/evals/table/${TABLE_DIGEST}`]);

    const table = await api.table.tableQueryTableQueryPost({ project_id: 'alice/evals', digest: TABLE_DIGEST });
    expect(table.data.rows.map((row: { digest: string }) => row.digest)).toEqual(ROW_DIGESTS);
  });

  it('a second save of changed rows is version 1; objs/query and server_info answer through the SDK client', async () => {
    const client = await weave.init('alice/evals');
    await new weave.Dataset({ name: 'grammar', rows: [{ id: '2', sentence: 'We was late.' }] }).save();
    const objs = await client.traceServerApi.objs.objsQueryObjsQueryPost({
      project_id: 'alice/evals', filter: { object_ids: ['grammar'] }, metadata_only: true,
    });
    expect(objs.data.objs.map((o: { version_index: number; is_latest: number }) => [o.version_index, o.is_latest])).toEqual([[0, 0], [1, 1]]);
    expect(objs.data.objs[0].base_object_class).toBe('Dataset');
    const info = await client.traceServerApi.serverInfo.serverInfoServerInfoGet();
    expect(info.data.min_required_weave_python_version).toBe('0.0.0');
  });
});
