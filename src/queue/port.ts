// The queue port: how the API hands work to workers and hears back from them.
// Two adapters implement it: embedded (child processes fed over IPC, jobs kept in SQLite) and
// BullMQ (Redis queues shared by workers on many hosts). The worker code is the same for both.

export type WorkerKind = 'inference' | 'training';

export interface WorkerInfo {
  id: string;
  kind: WorkerKind;
  device: string;
  host: string;
  pid: number;
  /** Jobs or sequences in flight. */
  load: number;
  lastSeenMs: number;
  /** Devices the worker detected (src/hardware), as reported in its heartbeat. */
  devices?: unknown;
}

export interface QueueHealth {
  ok: boolean;
  error: string | null;
  durationMs: number;
}

export interface WorkerDirectory {
  /** Workers that sent a heartbeat within the timeout. */
  liveWorkers(kind?: WorkerKind): WorkerInfo[];
  health(kind: WorkerKind): Promise<QueueHealth>;
}
