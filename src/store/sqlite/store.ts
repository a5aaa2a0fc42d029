// The embedded store: one SQLite file under HEARTH_HOME, owned by the API process alone.
import { openDatabase, type Db } from './database.js';
import type { Migration } from './migrations.js';
import { KeysRepo } from './keys-repo.js';
import { ModelsRepo } from './models-repo.js';
import { CheckpointsRepo } from './checkpoints-repo.js';
import { JobsRepo } from './jobs-repo.js';
import { EventsRepo } from './events-repo.js';
import { UsageRepo } from './usage-repo.js';
import { HistoryRepo } from './history-repo.js';
import { NativeRunsRepo } from './native-runs-repo.js';
import { NativeRunWiresRepo } from './native-run-wires-repo.js';

export class Store {
  readonly keys: KeysRepo;
  readonly models: ModelsRepo;
  readonly checkpoints: CheckpointsRepo;
  readonly jobs: JobsRepo;
  readonly events: EventsRepo;
  readonly usage: UsageRepo;
  readonly history: HistoryRepo;
  readonly nativeRuns: NativeRunsRepo;
  readonly nativeRunWires: NativeRunWiresRepo;

  constructor(readonly db: Db) {
    this.keys = new KeysRepo(db);
    this.models = new ModelsRepo(db);
    this.checkpoints = new CheckpointsRepo(db);
    this.jobs = new JobsRepo(db);
    this.events = new EventsRepo(db);
    this.usage = new UsageRepo(db);
    this.history = new HistoryRepo(db);
    this.nativeRuns = new NativeRunsRepo(db);
    this.nativeRunWires = new NativeRunWiresRepo(db);
  }

  static open(file: string, extraMigrations: Migration[] = []): Store {
    return new Store(openDatabase(file, extraMigrations));
  }

  /** Run `fn` in one transaction: all its writes land together or not at all. */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  ping(): boolean {
    return (this.db.prepare('SELECT 1 AS ok').get() as { ok: number }).ok === 1;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
