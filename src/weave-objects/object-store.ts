// SQLite repository for Weave objects (/obj/create, /obj/read, /objs/query).
//
// One row per (entity, project, object_id, digest): a version. Versions of an object are numbered
// from 0 in the order they were first created; the latest is the highest number. Creating a value
// whose digest the object already has is not a new version (its digest is answered again), as the
// hosted service deduplicates identical content.

import type Database from 'better-sqlite3';
import type { ProjectScope } from '../tables/table-store.js';

export const OBJECTS_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS weave_objects (
  entity            TEXT NOT NULL,
  project           TEXT NOT NULL,
  object_id         TEXT NOT NULL,
  digest            TEXT NOT NULL,
  version_index     INTEGER NOT NULL,
  kind              TEXT NOT NULL,
  base_object_class TEXT,
  leaf_object_class TEXT,
  val_json          TEXT NOT NULL,
  created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (entity, project, object_id, digest),
  UNIQUE (entity, project, object_id, version_index)
);
`;

/** A value ready to store: its digest, its JSON text (key order and number text kept) and what the service derives from it. */
export interface PreparedObject {
  digest: string;
  valJson: string;
  kind: 'op' | 'object';
  baseObjectClass: string | null;
  leafObjectClass: string | null;
}

export interface StoredObject {
  objectId: string;
  digest: string;
  versionIndex: number;
  isLatest: boolean;
  kind: string;
  baseObjectClass: string | null;
  leafObjectClass: string | null;
  createdAt: string;
  valJson: string;
}

export interface ObjectQuery {
  objectIds?: readonly string[];
  baseObjectClasses?: readonly string[];
  isOp?: boolean;
  latestOnly?: boolean;
  sortBy?: readonly { field: ObjectSortField; direction: 'asc' | 'desc' }[];
  limit?: number | null;
  offset?: number | null;
}

/** The fields objs/query sorts by (the service documents object_id and created_at). */
export const OBJECT_SORT_FIELDS = ['object_id', 'created_at', 'version_index', 'digest'] as const;
export type ObjectSortField = (typeof OBJECT_SORT_FIELDS)[number];

interface ObjectRecord {
  object_id: string;
  digest: string;
  version_index: number;
  is_latest: number;
  kind: string;
  base_object_class: string | null;
  leaf_object_class: string | null;
  created_at: string;
  val_json: string;
}

const SELECT_COLUMNS = `o.object_id, o.digest, o.version_index, o.kind, o.base_object_class, o.leaf_object_class, o.created_at, o.val_json,
  (o.version_index = (SELECT max(l.version_index) FROM weave_objects l
     WHERE l.entity = o.entity AND l.project = o.project AND l.object_id = o.object_id)) AS is_latest`;

/** `v3` addresses version 3 (the service's digest_is_version_like). */
const VERSION_LIKE = /^v(\d+)$/;

function toStored(record: ObjectRecord): StoredObject {
  return {
    objectId: record.object_id,
    digest: record.digest,
    versionIndex: record.version_index,
    isLatest: record.is_latest === 1,
    kind: record.kind,
    baseObjectClass: record.base_object_class,
    leafObjectClass: record.leaf_object_class,
    createdAt: record.created_at,
    valJson: record.val_json,
  };
}

export class ObjectStore {
  private readonly insert: Database.Statement;
  private readonly nextVersion: Database.Statement;

  /** The schema (OBJECTS_SCHEMA_SQL) must already exist in `db`. */
  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare(
      `INSERT INTO weave_objects (entity, project, object_id, digest, version_index, kind, base_object_class, leaf_object_class, val_json)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (entity, project, object_id, digest) DO NOTHING`,
    );
    this.nextVersion = db
      .prepare('SELECT coalesce(max(version_index) + 1, 0) FROM weave_objects WHERE entity = ? AND project = ? AND object_id = ?')
      .pluck();
  }

  /** /obj/create: a new version unless the object already has this digest. Returns the digest. */
  create(scope: ProjectScope, objectId: string, obj: PreparedObject): string {
    this.db.transaction(() => {
      const version = this.nextVersion.get(scope.entity, scope.project, objectId) as number;
      this.insert.run(scope.entity, scope.project, objectId, obj.digest, version, obj.kind, obj.baseObjectClass, obj.leafObjectClass, obj.valJson);
    })();
    return obj.digest;
  }

  /** /obj/read: `version` is 'latest', 'v<N>' or a digest. */
  read(scope: ProjectScope, objectId: string, version: string): StoredObject | undefined {
    const base = `SELECT ${SELECT_COLUMNS} FROM weave_objects o WHERE o.entity = ? AND o.project = ? AND o.object_id = ?`;
    const args: unknown[] = [scope.entity, scope.project, objectId];
    let sql: string;
    const versionLike = VERSION_LIKE.exec(version);
    if (version === 'latest') {
      sql = `${base} ORDER BY o.version_index DESC LIMIT 1`;
    } else if (versionLike) {
      sql = `${base} AND o.version_index = ?`;
      args.push(Number(versionLike[1]));
    } else {
      sql = `${base} AND o.digest = ?`;
      args.push(version);
    }
    const record = this.db.prepare(sql).get(...args) as ObjectRecord | undefined;
    return record ? toStored(record) : undefined;
  }

  /** /objs/query. Without sort_by, versions come in creation order. */
  query(scope: ProjectScope, query: ObjectQuery = {}): StoredObject[] {
    const where = ['o.entity = ?', 'o.project = ?'];
    const args: unknown[] = [scope.entity, scope.project];
    if (query.objectIds && query.objectIds.length > 0) {
      where.push(`o.object_id IN (${query.objectIds.map(() => '?').join(', ')})`);
      args.push(...query.objectIds);
    }
    if (query.baseObjectClasses && query.baseObjectClasses.length > 0) {
      where.push(`o.base_object_class IN (${query.baseObjectClasses.map(() => '?').join(', ')})`);
      args.push(...query.baseObjectClasses);
    }
    if (query.isOp === true) where.push("o.kind = 'op'");
    if (query.isOp === false) where.push("o.kind != 'op'");
    let sql = `SELECT * FROM (SELECT ${SELECT_COLUMNS}, o.rowid AS created_order FROM weave_objects o WHERE ${where.join(' AND ')})`;
    if (query.latestOnly) sql += ' WHERE is_latest = 1';
    // Field names come from OBJECT_SORT_FIELDS (validated by the route), never from the request text.
    const order = (query.sortBy ?? []).map((s) => `${s.field} ${s.direction === 'desc' ? 'DESC' : 'ASC'}`);
    sql += ` ORDER BY ${[...order, 'created_order ASC'].join(', ')}`;
    // SQLite semantics (as the reference server): a negative LIMIT means none, a negative OFFSET means 0.
    sql += ' LIMIT ? OFFSET ?';
    args.push(query.limit ?? -1, Math.max(0, query.offset ?? 0));
    return (this.db.prepare(sql).all(...args) as ObjectRecord[]).map(toStored);
  }
}
