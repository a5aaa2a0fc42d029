// API keys: random secrets shown once, stored as SHA-256 hashes, looked up by a non-secret prefix.
import crypto from 'node:crypto';
import type { Store } from '../store/sqlite/store.js';
import { nowIso } from '../store/records.js';

const KEY_PREFIX = 'hearth_';
const PREFIX_LEN = KEY_PREFIX.length + 8; // stored in clear, to find the row without scanning

/** The stored form of a key: its SHA-256 in hex. */
export const hashKey = (key: string) => digest(key).hex;

export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

const ENTITY_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export function assertEntityName(entity: string): void {
  if (!ENTITY_RE.test(entity)) throw new Error(`invalid entity "${entity}": use 1-64 letters, digits, '_', '.', '-'`);
}

/** Digests kept for keys presented recently (see ApiKeys.digestOf). */
const RECENT_KEYS = 64;

/** A key's SHA-256, as hex (stored, and its first 12 characters name the key in limits and logs) and as bytes (compared). */
export interface KeyDigest {
  hex: string;
  bytes: Buffer;
}

function digest(key: string): KeyDigest {
  const bytes = crypto.createHash('sha256').update(key).digest();
  return { hex: bytes.toString('hex'), bytes };
}

export class ApiKeys {
  /** Digest of the configured key (HEARTH_API_KEY), computed once. */
  private readonly extraDigest: Buffer | null;
  /** Digests of the keys presented last, oldest first. */
  private readonly recent = new Map<string, KeyDigest>();

  constructor(
    private readonly store: Store,
    private readonly extra: { key: string; entity: string } | null = null,
  ) {
    this.extraDigest = extra ? digest(extra.key).bytes : null;
  }

  create(entity: string): { key: string; prefix: string } {
    assertEntityName(entity);
    const key = KEY_PREFIX + crypto.randomBytes(30).toString('base64url');
    const prefix = key.slice(0, PREFIX_LEN);
    this.store.keys.insert({ id: crypto.randomUUID(), prefix, hash: hashKey(key), entity, createdAt: nowIso() });
    return { key, prefix };
  }

  /**
   * The key's digest, remembered for the last RECENT_KEYS keys presented. Every request presents its key, and the
   * digest (native calls: hashing, and hex to bytes to compare) never changes; with authentication, they were
   * ~0.15 ms of a request's time to first token when requests come between model steps on a 2-core machine.
   * Revocation is still looked up each time.
   */
  digestOf(key: string): KeyDigest {
    let known = this.recent.get(key);
    if (known === undefined) {
      known = digest(key);
      if (this.recent.size >= RECENT_KEYS) this.recent.delete(this.recent.keys().next().value!);
      this.recent.set(key, known);
    }
    return known;
  }

  /** The entity a presented key belongs to, or null. Compares digests in constant time. */
  authenticate(key: string, presented = this.digestOf(key)): string | null {
    if (this.extra && crypto.timingSafeEqual(presented.bytes, this.extraDigest!)) return this.extra.entity;
    if (!key.startsWith(KEY_PREFIX) || key.length < PREFIX_LEN) return null;
    const found = this.store.keys.findByPrefix(key.slice(0, PREFIX_LEN));
    if (!found || found.record.revokedAt) return null;
    return sameHash(presented.hex, found.hash) ? found.record.entity : null;
  }

  list() {
    return this.store.keys.list();
  }

  revoke(prefix: string): number {
    if (prefix.length < 4) throw new Error('give at least 4 characters of the key prefix');
    return this.store.keys.revoke(prefix, nowIso());
  }
}
