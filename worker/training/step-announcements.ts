// Long training steps announced before they block, as model loads are (worker/model-loads.ts).
//
// A step is synchronous compute (an 8B LoRA step on a 2-core CPU: minutes), so the training worker sends no
// heartbeat and renews no BullMQ lock until it ends. The job's load announcement therefore stays up through the
// first step (its length is unknown: graphs warm up there), and each later step that follows one longer than a
// third of the heartbeat timeout is announced before it starts, with twice the last step's time as its expected
// length. The API allows an announced step that much silence (src/queue/worker-directory.ts) and the BullMQ
// transport holds its locks that long (worker/job-locks.ts): a job of minute-long steps runs at the default
// HEARTH_HEARTBEAT_TIMEOUT, and a host lost mid-step is given up after about two steps' time, not the load timeout.
// Short steps are never announced, so a lost host is still noticed within the heartbeat timeout.
import type { ModelLoads } from '../model-loads.js';

/** The next step is expected to take at most this many times the last one. */
export const STEP_EXPECTATION_FACTOR = 2;

/** How long to announce the next step for after one that took `lastStepMs`, or null when it needs no announcement. */
export function nextStepAnnouncement(lastStepMs: number, heartbeatTimeoutMs: number): number | null {
  if (lastStepMs < heartbeatTimeoutMs / 3) return null;
  return Math.max(heartbeatTimeoutMs, Math.ceil(STEP_EXPECTATION_FACTOR * lastStepMs));
}

export class StepAnnouncements {
  private end: () => void = () => {};
  private stepStartMs = 0;
  private steps = 0;

  constructor(
    private readonly loads: ModelLoads,
    private readonly model: string,
    private readonly heartbeatTimeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The job's load, announced until its first step ends. */
  async start(): Promise<void> {
    this.end = await this.loads.begin(this.model);
    this.stepStartMs = this.now();
  }

  /**
   * After the job reported `type`: a gradient step ended (announce the next one if it was long) or the job ended.
   * Resolves once an announcement has been handed to the transport.
   */
  async after(type: string): Promise<void> {
    if (type === 'training_started') {
      this.stepStartMs = this.now(); // the load announcement stays up over the first step
      return;
    }
    this.end();
    this.end = () => {};
    if (type !== 'gradient_step') return;
    this.steps++;
    const expectedMs = nextStepAnnouncement(this.now() - this.stepStartMs, this.heartbeatTimeoutMs);
    if (expectedMs !== null) this.end = await this.loads.begin(this.model, { step: this.steps + 1, expectedMs });
    this.stepStartMs = this.now();
  }

  /** The job is over: withdraw what is announced. */
  stop(): void {
    this.end();
    this.end = () => {};
  }
}
