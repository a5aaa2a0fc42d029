// Which client framing (wire) each native run speaks, fixed when it is resolved (docs/art.md "Framings").
import type { Db } from './database.js';

export type NativeWire = 'n1' | 'n2' | 'n3';

export interface NativeRunWire {
  wire: NativeWire;
  /** Resolved without a run_name (N3): answered `run_name: null`. */
  anonymous: boolean;
}

export class NativeRunWiresRepo {
  constructor(private readonly db: Db) {}

  set(runId: string, w: NativeRunWire): void {
    this.db.prepare('INSERT OR REPLACE INTO native_run_wires (run_id, wire, anonymous) VALUES (?, ?, ?)').run(runId, w.wire, w.anonymous ? 1 : 0);
  }

  /** Runs resolved before framings were told apart have no row: they speak N2. */
  get(runId: string): NativeRunWire {
    const r = this.db.prepare('SELECT wire, anonymous FROM native_run_wires WHERE run_id = ?').get(runId) as { wire: NativeWire; anonymous: number } | undefined;
    return r ? { wire: r.wire, anonymous: r.anonymous === 1 } : { wire: 'n2', anonymous: false };
  }
}
