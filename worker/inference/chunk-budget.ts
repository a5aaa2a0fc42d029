// How many prompt tokens a step that also decodes may take (the mixed steps of the scheduler).
//
// Every decoding stream waits for the whole step, so a step's prompt chunk is latency added to each of
// their tokens. A fixed token count suits one model on one machine only: on two cores a mixed step with 32
// prompt tokens costs ~20M 2.3 decode steps, a 1.1B 4-bit model ~3.5. This budget follows the measured step
// times instead, so that a mixed step costs about `targetRatio` decode steps on any model and machine, a
// GPU included (there prompt tokens are nearly free next to a decode step, and the budget grows to its
// maximum). Sarathi-Serve sizes its token budget from the inter-token latency target the same way, from an
// offline profile; here it is measured online, from the steps the engine runs anyway.
//
// Model: a step costs decodeMs (a decode step of the current batch) + promptTokens · tokenMs. Both are
// exponential moving averages: decodeMs over pure decode steps, tokenMs over mixed steps' excess. The
// budget is (targetRatio − 1) · decodeMs / tokenMs, clamped to [min, max]; `initial` until both are known.

export interface ChunkBudgetOptions {
  /**
   * A mixed step should cost about this many decode steps. The serving bar is ITL p99 ≤ 3 × p50, and a mixed
   * step's own time varies: its p90 is 1.25–1.35 × its median on two busy cores (bench:serve, ~20M), so
   * 3 / 1.33 ≈ 2.25 keeps the slow ones within the bar. Lower costs throughput (prompts spread over more
   * steps: at 2, ~20M served 10–25% fewer tokens/s at 8 streams), higher lets the tail through.
   */
  targetRatio: number;
  /** Fewest prompt tokens per mixed step (a prompt must make progress even on a very slow model). */
  min: number;
  /** Most prompt tokens per mixed step. */
  max: number;
  /** Budget before any step has been measured. */
  initial: number;
  /** Weight of the newest sample in the moving averages. */
  alpha: number;
}

export const DEFAULT_CHUNK_BUDGET: ChunkBudgetOptions = { targetRatio: 2.25, min: 8, max: 256, initial: 32, alpha: 0.1 };

export interface StepTiming {
  /** Rows that decode (one new token each). */
  decodeRows: number;
  /** Prompt tokens in the step (prefill chunks). */
  promptTokens: number;
  /** Wall time of the model step. */
  ms: number;
}

export class ChunkBudget {
  private decodeMs = NaN;
  private tokenMs = NaN;
  readonly options: ChunkBudgetOptions;

  constructor(options: Partial<ChunkBudgetOptions> = {}) {
    this.options = { ...DEFAULT_CHUNK_BUDGET, ...options };
    const o = this.options;
    if (!(o.targetRatio > 1) || !(o.min >= 1) || !(o.max >= o.min) || !(o.alpha > 0 && o.alpha <= 1))
      throw new Error('chunk budget: targetRatio must be > 1, 1 ≤ min ≤ max, 0 < alpha ≤ 1');
  }

  /** Learn from one model step. Steps without decoding rows (a prompt alone) say nothing about mixed steps. */
  observe(step: StepTiming): void {
    if (step.decodeRows === 0 || !(step.ms >= 0)) return;
    if (step.promptTokens === 0) {
      this.decodeMs = ewma(this.decodeMs, step.ms, this.options.alpha);
    } else if (Number.isFinite(this.decodeMs)) {
      // A step faster than the decode average (noise) still says prompt tokens are cheap, not free.
      const perToken = Math.max(step.ms - this.decodeMs, 0.01 * this.decodeMs) / step.promptTokens;
      this.tokenMs = ewma(this.tokenMs, perToken, this.options.alpha);
    }
  }

  /** Prompt tokens the next mixed step may take. */
  get tokens(): number {
    const o = this.options;
    if (!Number.isFinite(this.decodeMs) || !Number.isFinite(this.tokenMs)) return o.initial;
    const fit = Math.floor(((o.targetRatio - 1) * this.decodeMs) / this.tokenMs);
    return Math.min(o.max, Math.max(o.min, fit));
  }

  /** The measured model, for logs and metrics. */
  get estimate(): { decodeMs: number; tokenMs: number; tokens: number } {
    return { decodeMs: this.decodeMs, tokenMs: this.tokenMs, tokens: this.tokens };
  }
}

function ewma(prev: number, x: number, alpha: number): number {
  return Number.isFinite(prev) ? prev + alpha * (x - prev) : x;
}
