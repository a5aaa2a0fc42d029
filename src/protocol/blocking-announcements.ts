// What a worker's announced blocking stretch (a model load, a long training step: worker/model-loads.ts) lets it stay
// silent for: read by the worker (its BullMQ lock durations, worker/job-locks.ts) and by the API (its liveness,
// src/queue/worker-directory.ts), so that the two never disagree.

/** One announced stretch, as a heartbeat lists it (`loading`). */
export interface BlockingAnnouncement { step?: number; expectedMs?: number }

/** How long `a` may block: a training step its expected time, a model load `loadTimeoutMs` (HEARTH_LOAD_TIMEOUT). */
export function blockingMsOf(a: BlockingAnnouncement, loadTimeoutMs: number): number {
  return a.step !== undefined && a.expectedMs !== undefined ? a.expectedMs : loadTimeoutMs;
}

/** The longest of `announcements`, or 0 when there are none. */
export function longestBlockingMs(announcements: Iterable<BlockingAnnouncement>, loadTimeoutMs: number): number {
  let ms = 0;
  for (const a of announcements) ms = Math.max(ms, blockingMsOf(a, loadTimeoutMs));
  return ms;
}
