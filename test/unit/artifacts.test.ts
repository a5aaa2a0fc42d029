// Pure parts of artifact fetching: path checks, manifests, ranges, eviction, storage sharing.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ArtifactPathError, artifactPath, ensureHomeId, entryPath, parseManifest, relativeArtifactPath, safeSegments } from '../../src/protocol/artifact-manifest.js';
import { parseRange } from '../../src/api/plugins/artifacts.js';
import { chooseEvictions } from '../../worker/artifacts/eviction.js';
import { LocalArtifacts } from '../../worker/artifacts/local-artifacts.js';

const home = '/srv/hearth';
const sha = 'a'.repeat(64);

describe('artifact paths', () => {
  it('accept paths under the artifact folders and map them onto a home', () => {
    expect(artifactPath(home, 'models/hearth/tiny')).toBe('/srv/hearth/models/hearth/tiny');
    expect(artifactPath(home, 'checkpoints/m/step-1', { forUpload: true })).toBe('/srv/hearth/checkpoints/m/step-1');
    expect(relativeArtifactPath(home, '/srv/hearth/datasets/a/p/n/v0.jsonl')).toBe('datasets/a/p/n/v0.jsonl');
    expect(relativeArtifactPath(home, '/data/elsewhere/x.jsonl')).toBeNull();
    expect(relativeArtifactPath(home, '/srv/hearth/hearth.db')).toBeNull();
  });

  it.each(['', '/etc/passwd', '../x', 'models/../../x', 'models/./x', 'models//x', 'models/.tmp', 'models\\x', 'a\0b', 'C:/x'])('refuse %j', (bad) => {
    expect(() => artifactPath(home, bad)).toThrow(ArtifactPathError);
  });

  it('refuse what is outside the roots, and uploads outside checkpoints/', () => {
    expect(() => artifactPath(home, 'hearth.db')).toThrow(/not under/);
    expect(() => artifactPath(home, 'models')).toThrow(/not under/);
    expect(() => artifactPath(home, 'models/x', { forUpload: true })).toThrow(/not under checkpoints/);
  });

  it('keep manifest entries inside their artifact', () => {
    expect(entryPath('/tmp/a', 'sub/f.bin')).toBe('/tmp/a/sub/f.bin');
    expect(() => entryPath('/tmp/a', '../b')).toThrow(ArtifactPathError);
    expect(safeSegments('x/y')).toEqual(['x', 'y']);
  });
});

describe('parseManifest', () => {
  const ok = { path: 'models/m', kind: 'dir', files: [{ path: 'config.json', size: 2, sha256: sha }] };
  it('accepts a well-formed manifest for the path asked', () => expect(parseManifest(ok, 'models/m').files).toHaveLength(1));
  it('refuses another path, escaping or duplicate entries, bad digests, a file manifest of two', () => {
    expect(() => parseManifest(ok, 'models/other')).toThrow(/manifest is for/);
    expect(() => parseManifest({ ...ok, files: [{ ...ok.files[0], path: '../x' }] }, 'models/m')).toThrow(ArtifactPathError);
    expect(() => parseManifest({ ...ok, files: [ok.files[0], ok.files[0]] }, 'models/m')).toThrow(/twice/);
    expect(() => parseManifest({ ...ok, files: [{ ...ok.files[0], sha256: 'xyz' }] }, 'models/m')).toThrow();
    expect(() => parseManifest({ ...ok, kind: 'file', files: [ok.files[0], { ...ok.files[0], path: 'b' }] }, 'models/m')).toThrow(/exactly one/);
  });
});

describe('parseRange', () => {
  it('reads bytes=N- and bytes=N-M, and tells an unsatisfiable one', () => {
    expect(parseRange(undefined, 10)).toBeNull();
    expect(parseRange('bytes=4-', 10)).toEqual([4, 9]);
    expect(parseRange('bytes=2-5', 10)).toEqual([2, 5]);
    expect(parseRange('bytes=2-50', 10)).toEqual([2, 9]);
    expect(parseRange('bytes=10-', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=0-1,4-5', 10)).toBeNull(); // several ranges: the whole file
    expect(parseRange('bytes=-3', 10)).toBeNull();
  });
});

describe('chooseEvictions', () => {
  const entries = [
    { rel: 'a', bytes: 100, lastUsedMs: 1 },
    { rel: 'b', bytes: 100, lastUsedMs: 3 },
    { rel: 'c', bytes: 100, lastUsedMs: 2 },
  ];
  it('evicts least recently used first until the total fits', () => {
    expect(chooseEvictions(entries, 300, new Set())).toEqual([]);
    expect(chooseEvictions(entries, 200, new Set())).toEqual(['a']);
    expect(chooseEvictions(entries, 100, new Set())).toEqual(['a', 'c']);
  });
  it('never evicts what is in use, even when that leaves the total over budget', () => {
    expect(chooseEvictions(entries, 100, new Set(['a']))).toEqual(['c', 'b']);
    expect(chooseEvictions(entries, 0, new Set(['a', 'b', 'c']))).toEqual([]);
  });
});

describe('LocalArtifacts.sharesStorage (HEARTH_STORAGE=auto)', () => {
  it('shares the API host storage exactly when its home id is readable at its path here', () => {
    const apiHome = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-api-'));
    const id = ensureHomeId(apiHome);
    expect(ensureHomeId(apiHome)).toBe(id); // kept
    const artifacts = new LocalArtifacts({ home: '/tmp/own', mode: 'auto', client: null, budgetBytes: 1, log: () => {} });
    expect(artifacts.sharesStorage({ home: apiHome, homeId: id })).toBe(true);
    expect(artifacts.sharesStorage({ home: apiHome, homeId: 'another host' })).toBe(false); // same path, other machine
    expect(artifacts.sharesStorage({ home: '/nonexistent/hearth', homeId: id })).toBe(false);
    expect(artifacts.sharesStorage({ home: apiHome })).toBe(true); // an API without ids: as before
    expect(new LocalArtifacts({ home: '/tmp/own', mode: 'fetch', client: null, budgetBytes: 1, log: () => {} }).sharesStorage({ home: apiHome, homeId: id })).toBe(false);
    expect(new LocalArtifacts({ home: '/tmp/own', mode: 'shared', client: null, budgetBytes: 1, log: () => {} }).sharesStorage({ home: apiHome, homeId: 'x' })).toBe(true);
  });

  it('a missing artifact without an API URL and credential is an error that says what to set', async () => {
    const artifacts = new LocalArtifacts({ home: fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-own-')), mode: 'fetch', client: null, budgetBytes: 1, log: () => {} });
    await expect(artifacts.localize({ home }, '/srv/hearth/models/m')).rejects.toThrow(/HEARTH_API_URL and HEARTH_WORKER_TOKEN/);
  });
});
