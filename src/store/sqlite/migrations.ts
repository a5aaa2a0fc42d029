// Versioned schema migrations. Append only: never edit a migration that has shipped.
// Each entry runs once, inside a transaction, and bumps PRAGMA user_version.
import { TABLES_SCHEMA_SQL } from '../../tables/table-store.js';
import { OBJECTS_SCHEMA_SQL } from '../../weave-objects/object-store.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'keys, models, checkpoints, training jobs, events, trajectory logs, usage',
    sql: `
      CREATE TABLE api_keys (
        id          TEXT PRIMARY KEY,
        prefix      TEXT NOT NULL UNIQUE,
        hash        TEXT NOT NULL,
        entity      TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        revoked_at  TEXT
      );

      CREATE TABLE models (
        id          TEXT PRIMARY KEY,
        entity      TEXT NOT NULL,
        project     TEXT NOT NULL,
        name        TEXT NOT NULL,
        base_model  TEXT NOT NULL,
        run_id      TEXT,
        created_at  TEXT NOT NULL,
        UNIQUE (entity, project, name)
      );

      CREATE TABLE checkpoints (
        id          TEXT PRIMARY KEY,
        model_id    TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        step        INTEGER NOT NULL,
        metrics     TEXT NOT NULL DEFAULT '{}',
        path        TEXT,
        created_at  TEXT NOT NULL,
        UNIQUE (model_id, step)
      );

      CREATE TABLE training_jobs (
        id            TEXT PRIMARY KEY,
        entity        TEXT NOT NULL,
        model_id      TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        kind          TEXT NOT NULL CHECK (kind IN ('rl', 'sft')),
        status        TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
        payload       TEXT NOT NULL,
        dedup_key     TEXT,
        error_message TEXT,
        created_at    TEXT NOT NULL,
        started_at    TEXT,
        finished_at   TEXT
      );
      CREATE INDEX training_jobs_model ON training_jobs(model_id);
      CREATE INDEX training_jobs_status ON training_jobs(status);

      CREATE TABLE training_job_events (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        id          TEXT NOT NULL UNIQUE,
        job_id      TEXT NOT NULL REFERENCES training_jobs(id) ON DELETE CASCADE,
        type        TEXT NOT NULL,
        data        TEXT NOT NULL,
        created_at  TEXT NOT NULL
      );
      CREATE INDEX training_job_events_job ON training_job_events(job_id, seq);

      CREATE TABLE trajectory_logs (
        id          TEXT PRIMARY KEY,
        model_id    TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        step        INTEGER NOT NULL,
        split       TEXT NOT NULL,
        groups      TEXT NOT NULL,
        metrics     TEXT NOT NULL,
        created_at  TEXT NOT NULL
      );

      CREATE TABLE usage (
        entity            TEXT NOT NULL,
        project           TEXT NOT NULL,
        model             TEXT NOT NULL,
        requests          INTEGER NOT NULL DEFAULT 0,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (entity, project, model)
      );
    `,
  },
  {
    version: 2,
    name: 'Weave tables: rows by digest, chunked digest lists, table versions',
    sql: TABLES_SCHEMA_SQL,
  },
  {
    version: 3,
    name: 'Weave objects: versions by object id and digest',
    sql: OBJECTS_SCHEMA_SQL,
  },
  {
    version: 4,
    name: 'Native training runs and their sequenced operations',
    sql: `
      CREATE TABLE native_runs (
        id                        TEXT PRIMARY KEY,
        entity                    TEXT NOT NULL,
        run_name                  TEXT NOT NULL,
        spec                      TEXT NOT NULL,
        status                    TEXT NOT NULL CHECK (status IN ('open', 'closing', 'closed', 'failed')),
        learner_model_id          TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
        next_sequence_id          INTEGER NOT NULL DEFAULT 0,
        projected_learner_version INTEGER NOT NULL DEFAULT 0,
        committed_learner_version INTEGER NOT NULL DEFAULT 0,
        created_at                TEXT NOT NULL,
        UNIQUE (entity, run_name)
      );

      CREATE TABLE native_operations (
        id                              TEXT PRIMARY KEY,
        run_id                          TEXT NOT NULL REFERENCES native_runs(id) ON DELETE CASCADE,
        request_id                      TEXT NOT NULL,
        fingerprint                     TEXT NOT NULL,
        sequence_id                     INTEGER NOT NULL,
        kind                            TEXT NOT NULL,
        command                         TEXT NOT NULL,
        status                          TEXT NOT NULL CHECK (status IN ('admitted', 'running', 'succeeded', 'failed', 'cancelled')),
        learner_parent_version          INTEGER NOT NULL,
        reserved_output_learner_version INTEGER,
        admitted_at                     TEXT NOT NULL,
        execution_started_at            TEXT,
        execution_ended_at              TEXT,
        cancel_requested                INTEGER NOT NULL DEFAULT 0,
        event_cursor                    INTEGER NOT NULL DEFAULT 0,
        job_id                          TEXT,
        consumed_by                     TEXT,
        result                          TEXT,
        result_released                 INTEGER NOT NULL DEFAULT 0,
        error                           TEXT,
        UNIQUE (run_id, request_id),
        UNIQUE (run_id, sequence_id)
      );
      CREATE INDEX native_operations_job ON native_operations(job_id);
    `,
  },
  {
    version: 5,
    name: 'Native runs: the client framing (wire) each run was resolved in',
    // A side table, so native_runs stays as shipped: a run without a row here speaks N2 (docs/art.md).
    sql: `
      CREATE TABLE native_run_wires (
        run_id             TEXT PRIMARY KEY REFERENCES native_runs(id) ON DELETE CASCADE,
        wire               TEXT NOT NULL CHECK (wire IN ('n1', 'n2', 'n3')),
        anonymous          INTEGER NOT NULL DEFAULT 0
      );
    `,
  },
];
