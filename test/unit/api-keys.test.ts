// API keys and entity names: what authentication decides, without HTTP (the HTTP side is in test/api).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys, assertEntityName, hashKey, sameHash } from '../../src/services/api-keys.js';
import { Store } from '../../src/store/sqlite/store.js';

let dir: string;
let store: Store;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-keys-'));
  store = Store.open(path.join(dir, 'hearth.db'));
});
afterAll(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('entity names', () => {
  it('accepts 1-64 letters, digits, _ . - starting with a letter or digit; refuses the rest, naming it', () => {
    for (const ok of ['a', 'alice', 'my-team', 'Team_1.x', '9lives', 'x'.repeat(64)]) expect(() => assertEntityName(ok)).not.toThrow();
    for (const bad of ['', '-lead', '.dot', '_under', 'a/b', 'a b', 'x'.repeat(65), 'é', 'a\n']) {
      expect(() => assertEntityName(bad)).toThrow(`invalid entity "${bad}": use 1-64 letters, digits, '_', '.', '-'`);
    }
  });
});

describe('hashes', () => {
  it('hashKey is the hex SHA-256 of the key; sameHash compares equal hashes only', () => {
    expect(hashKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sameHash(hashKey('a'), hashKey('a'))).toBe(true);
    expect(sameHash(hashKey('a'), hashKey('b'))).toBe(false);
    expect(sameHash(hashKey('a'), hashKey('a').slice(0, 62))).toBe(false); // different lengths never match
  });
});

describe('ApiKeys', () => {
  it('creates a key shown once (hearth_ + 40 url-safe characters), stored by prefix and hash, for its entity', () => {
    const keys = new ApiKeys(store);
    const { key, prefix } = keys.create('alice');
    expect(key).toMatch(/^hearth_[A-Za-z0-9_-]{40}$/);
    expect(prefix).toBe(key.slice(0, 15));
    expect(keys.authenticate(key)).toBe('alice');
    const listed = keys.list().find((k) => k.prefix === prefix);
    expect(listed).toMatchObject({ entity: 'alice', prefix });
    expect(JSON.stringify(keys.list())).not.toContain(key); // the secret itself is never stored
    expect(() => keys.create('not valid')).toThrow(/invalid entity/);
  });

  it('refuses wrong, truncated, foreign-prefix and revoked keys', () => {
    const keys = new ApiKeys(store);
    const { key, prefix } = keys.create('bob');
    expect(keys.authenticate(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))).toBeNull(); // same prefix, other secret
    expect(keys.authenticate(key.slice(0, 14))).toBeNull(); // shorter than a prefix
    expect(keys.authenticate(key.slice(0, 15))).toBeNull(); // the prefix alone
    expect(keys.authenticate('other_' + key.slice(6))).toBeNull();
    expect(keys.authenticate('')).toBeNull();
    expect(() => keys.revoke('hea')).toThrow('give at least 4 characters of the key prefix');
    expect(keys.revoke('none')).toBe(0); // 4 characters are enough
    expect(keys.revoke(prefix)).toBe(1);
    expect(keys.authenticate(key)).toBeNull();
    expect(keys.revoke(prefix)).toBe(0); // already revoked
  });

  it('remembers the digests of keys it has seen, and still refuses a key revoked since (by another process too)', () => {
    const keys = new ApiKeys(store);
    const { key, prefix } = keys.create('dave');
    expect(keys.digestOf(key).hex).toBe(hashKey(key));
    expect(keys.digestOf(key).bytes.toString('hex')).toBe(hashKey(key));
    expect(keys.authenticate(key)).toBe('dave');
    expect(keys.authenticate(key)).toBe('dave'); // from the remembered digest
    expect(new ApiKeys(store).revoke(prefix)).toBe(1); // `hearth keys revoke` runs in its own process
    expect(keys.authenticate(key)).toBeNull();
    for (let i = 0; i < 100; i++) expect(keys.digestOf(`other-${i}`).hex).toBe(hashKey(`other-${i}`)); // more keys than it keeps
    expect(keys.digestOf(key).hex).toBe(hashKey(key));
  });

  it('accepts the configured key (HEARTH_API_KEY) for its entity, whatever its form, and only it', () => {
    const keys = new ApiKeys(store, { key: 'plain-secret', entity: 'ops' });
    expect(keys.authenticate('plain-secret')).toBe('ops');
    expect(keys.authenticate('plain-secreT')).toBeNull();
    const stored = keys.create('carol');
    expect(keys.authenticate(stored.key)).toBe('carol'); // stored keys still work next to it
    expect(new ApiKeys(store).authenticate('plain-secret')).toBeNull();
  });
});
