// Opens the embedded SQLite store (WAL) and brings its schema up to date.
import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { migrations, type Migration } from './migrations.js';

export type Db = Database.Database;

export function openDatabase(file: string, extraMigrations: Migration[] = []): Db {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL'); // WAL + NORMAL: durable at checkpoints, no fsync per commit
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db, [...migrations, ...extraMigrations]);
  return db;
}

export function migrate(db: Db, all: Migration[]): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  const pending = [...all].sort((a, b) => a.version - b.version).filter((m) => m.version > current);
  for (const m of pending) {
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    })();
  }
}
