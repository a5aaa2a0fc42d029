import type { Statement } from 'better-sqlite3';
import type { Db } from './database.js';
import type { ApiKeyRecord } from '../records.js';

interface Row { id: string; prefix: string; hash: string; entity: string; created_at: string; revoked_at: string | null }

const toRecord = (r: Row): ApiKeyRecord => ({ id: r.id, prefix: r.prefix, entity: r.entity, createdAt: r.created_at, revokedAt: r.revoked_at });

export class KeysRepo {
  /** Compiled once: every request presenting a stored key looks its prefix up. */
  private readonly byPrefix: Statement<[string]>;

  constructor(private readonly db: Db) {
    this.byPrefix = db.prepare('SELECT * FROM api_keys WHERE prefix = ?');
  }

  insert(k: { id: string; prefix: string; hash: string; entity: string; createdAt: string }): void {
    this.db.prepare('INSERT INTO api_keys (id, prefix, hash, entity, created_at) VALUES (?, ?, ?, ?, ?)').run(k.id, k.prefix, k.hash, k.entity, k.createdAt);
  }

  /** The stored hash for a key prefix, with its record; null when unknown. */
  findByPrefix(prefix: string): { record: ApiKeyRecord; hash: string } | null {
    const r = this.byPrefix.get(prefix) as Row | undefined;
    return r ? { record: toRecord(r), hash: r.hash } : null;
  }

  list(): ApiKeyRecord[] {
    return (this.db.prepare('SELECT * FROM api_keys ORDER BY created_at').all() as Row[]).map(toRecord);
  }

  /** Revoke every live key whose prefix starts with `prefix`; returns how many. */
  revoke(prefix: string, at: string): number {
    return this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE revoked_at IS NULL AND substr(prefix, 1, length(?)) = ?").run(at, prefix, prefix).changes;
  }
}
