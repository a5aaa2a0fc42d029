import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveSftData } from '../../src/services/training-policy.js';
import { parseDataUrl } from '../../src/services/data-urls.js';

const mk = () => fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-sft-data-'));
const write = (file: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '{"messages":[{"role":"user","content":"x"}]}\n');
  return file;
};

describe('SFT data URLs', () => {
  it('parses the three schemes and refuses others', () => {
    expect(parseDataUrl('file:///data/train.jsonl')).toEqual({ scheme: 'file', path: '/data/train.jsonl' });
    expect(parseDataUrl('wandb-artifact:///team/p/ds:v2')).toEqual({ scheme: 'dataset', entity: 'team', project: 'p', name: 'ds', version: 'v2' });
    expect(parseDataUrl('weave:///team/p/table/abc123')).toEqual({ scheme: 'table', entity: 'team', project: 'p', digest: 'abc123' });
    for (const bad of ['s3://b/k', 'file://relative.jsonl', 'wandb-artifact:///a/b', 'weave:///a/b/obj/x']) expect(parseDataUrl(bad)).toHaveProperty('error');
  });

  it('reads table URLs with the Weave ref parser: percent-encoded parts, two or three slashes, tables only', () => {
    expect(parseDataUrl('weave:///team%2Dx/p/table/abc')).toEqual({ scheme: 'table', entity: 'team-x', project: 'p', digest: 'abc' });
    expect(parseDataUrl('weave://team/p/table/abc')).toEqual({ scheme: 'table', entity: 'team', project: 'p', digest: 'abc' });
    // Object and op refs, extra path, digests that could leave the snapshot folder, names that are not one segment.
    for (const bad of ['weave:///a/b/object/x:d', 'weave:///a/b/op/f:d', 'weave:///a/b/table/d/key/x', 'weave:///a/b/table/..%2Fx', 'weave:///a/b/table/%zz']) {
      expect(parseDataUrl(bad), bad).toEqual({ error: expect.stringContaining('unsupported training_data_url') });
    }
    expect(parseDataUrl('weave:///a%2Fb/p/table/d')).toEqual({ error: expect.stringContaining('malformed table URL') });
  });

  it('reads server files only inside HEARTH_DATA_DIRS, and inside HEARTH_HOME only from the caller’s own datasets', async () => {
    const home = mk();
    const shared = mk();
    const outside = write(path.join(mk(), 'secret.jsonl'));
    const allowed = write(path.join(shared, 'train.jsonl'));
    const own = write(path.join(home, 'datasets', 'alice', 'p', 'ds', 'v0.jsonl'));
    const others = write(path.join(home, 'datasets', 'bob', 'p', 'ds', 'v0.jsonl'));
    const off = { home, dataDirs: [] as string[] };
    expect(await resolveSftData(off, 'alice', `file://${allowed}`, null)).toHaveProperty('error');
    expect(await resolveSftData(off, 'alice', `file://${own}`, null)).toEqual({ path: fs.realpathSync(own) });
    const on = { home, dataDirs: [shared, home] };
    expect(await resolveSftData(on, 'alice', `file://${allowed}`, null)).toEqual({ path: fs.realpathSync(allowed) });
    expect(await resolveSftData(on, 'alice', `file://${outside}`, null)).toHaveProperty('error');
    // Listing HEARTH_HOME itself still does not open other entities' data or the store.
    expect(await resolveSftData(on, 'alice', `file://${others}`, null)).toHaveProperty('error');
    write(path.join(home, 'hearth.db'));
    expect(await resolveSftData(on, 'alice', `file://${path.join(home, 'hearth.db')}`, null)).toHaveProperty('error');
    // A symlink in an allowed folder that points outside it is judged by its target.
    fs.symlinkSync(outside, path.join(shared, 'link.jsonl'));
    expect(await resolveSftData(on, 'alice', `file://${path.join(shared, 'link.jsonl')}`, null)).toHaveProperty('error');
  });
});
