import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { startServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let alice: string;
beforeAll(async () => {
  s = await startServer();
  alice = s.key('alice');
});
afterAll(async () => s.close());

const upload = (key: string, qs: string, text: string) =>
  s.call('POST', `/v1/preview/datasets?${qs}`, { key, rawBody: text, headers: { 'content-type': 'application/x-ndjson' } });

const line = (q: string, a: string) => JSON.stringify({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] });

describe('SFT dataset upload', () => {
  it('stores versions and answers the wandb-artifact URL an SFT job names', async () => {
    const text = [line('2+2?', '4'), line('3+3?', '6')].join('\n') + '\n';
    const first = await upload(alice, 'project=p&name=math', text);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ url: 'wandb-artifact:///alice/p/math:v0', version: 0, num_rows: 2 });
    const second = await upload(alice, 'project=p&name=math', line('1+1?', '2'));
    expect(second.body.url).toBe('wandb-artifact:///alice/p/math:v1');
    expect(fs.readFileSync(s.ctx.datasets.file('alice', 'p', 'math', 'v0')!, 'utf8')).toBe(text);
    expect(s.ctx.datasets.file('alice', 'p', 'math', 'latest')).toMatch(/v1\.jsonl$/);
    expect(s.ctx.datasets.file('bob', 'p', 'math', 'latest')).toBeNull();
  });

  it('names the bad line and stores nothing', async () => {
    const r = await upload(alice, 'project=p&name=broken', [line('a', 'b'), '{"messages": [', '{"prompt": "x"}'].join('\n'));
    expect(r.status).toBe(422);
    expect(r.body.detail.map((d: { loc: unknown[] }) => d.loc.slice(0, 2))).toEqual([['body', 'line 2'], ['body', 'line 3']]);
    expect(s.ctx.datasets.versions('alice', 'p', 'broken')).toEqual([]);
  });

  it('validates the names in the query', async () => {
    const r = await upload(alice, 'project=../x&name=n', line('a', 'b'));
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['query', 'project']);
  });
});

describe('usage', () => {
  it('lists nothing for a fresh entity', async () => {
    const r = await s.call('GET', '/v1/usage', { key: alice });
    expect(r.body).toEqual({ object: 'list', data: [] });
  });

  it('DELETE removes one version or all of them, never reusing a version number, and validates its query', async () => {
    for (const q of ['a', 'b', 'c']) expect((await upload(alice, 'project=p&name=del', line(q, q))).status).toBe(200);
    const one = await s.call('DELETE', '/v1/preview/datasets?project=p&name=del&version=v1', { key: alice });
    expect(one.status).toBe(200);
    expect(one.body).toEqual({ deleted_versions: [1], freed_bytes: Buffer.byteLength(line('b', 'b')) });
    expect(s.ctx.datasets.versions('alice', 'p', 'del')).toEqual([0, 2]);
    expect((await s.call('DELETE', '/v1/preview/datasets?project=p&name=del&version=v1', { key: alice })).status).toBe(404);
    const latest = await s.call('DELETE', '/v1/preview/datasets?project=p&name=del&version=latest', { key: alice });
    expect(latest.body.deleted_versions).toEqual([2]);
    // The next upload is v3: v1 and v2 named other data once.
    expect((await upload(alice, 'project=p&name=del', line('d', 'd'))).body.version).toBe(3);
    const all = await s.call('DELETE', '/v1/preview/datasets?project=p&name=del', { key: alice });
    expect(all.body.deleted_versions).toEqual([0, 3]);
    expect(s.ctx.datasets.file('alice', 'p', 'del', 'latest')).toBeNull();
    const bad = await s.call('DELETE', '/v1/preview/datasets?project=p&name=del&version=first', { key: alice });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['query', 'version']);
  });
});
