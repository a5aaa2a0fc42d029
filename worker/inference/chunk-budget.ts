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
// Model: a mixed step with R decoding rows and b prompt tokens costs decode(R) + fixed + b · perToken.
// - decode(R): a moving average of pure decode steps, per number of rows (a 1-row step of a 1.1B model is a
//   third of an 8-row one; one average over both made every mixed step look expensive). It is measured, not
//   guessed from other row counts: when decode(R) is unknown or `probeEvery` steps old, the budget is 0 and the
//   step only decodes (a probe). Without probes a prompt-heavy load never ran a pure decode step at its row
//   count (a prompt is always being chunked in): the 1.1B's mixed steps at 2–3 rows were measured against its
//   1-row decode step (19 ms, against 27–30 ms at 2–3 rows), and a burst of prompts at few rows after a stretch
//   at many would be sized against decode(many), overshooting the target by as much as the two differ.
// - fixed, perToken: a least-squares line through the mixed steps' excess over decode(R), with exponential
//   forgetting (fixed is what a mixed step costs beyond its tokens: the chunk's row joining the batch, a second
//   attention pass; on tiny models it is most of it). While the chunks seen are all about the same size the
//   line has no slope to find, and the excess is taken as per-token cost alone.
// - spread: how far a mixed step's time runs above the line's prediction, as a tracked percentile
//   (tailQuantile, the 98th) of actual / predicted. What breaks the ITL bar is the slow mixed steps, not the average one: on ~20M with two
//   busy cores mixed steps cost p50 9.6 / p99 15 ms for the same prediction (the packing limit at 32 tokens,
//   garbage collection, the API and clients on the same cores), so a budget sized for the mean put ITL p99 at
//   3.35 × p50.
// Budget: b = ((ratio − 1) · decode(R) − fixed) / perToken, within [min, max], where ratio = min(targetRatio,
// tailRatio / spread): the mean mixed step costs at most targetRatio decode steps, and its slow ones at most
// tailRatio. When the fixed part alone misses that (stories260K: a 0.7 ms decode step), no chunk size meets
// it and smaller chunks would only make more slow steps: the budget is then `max`, so each prompt costs as
// few mixed steps as possible.

export interface ChunkBudgetOptions {
  /**
   * A mixed step should cost at most this many decode steps on average (the budget's ceiling; the measured
   * spread lowers it, see tailRatio). The serving bar is ITL p99 ≤ 3 × p50; lower costs throughput (prompts
   * spread over more steps: at 2, ~20M served 10–25% fewer tokens/s at 8 streams).
   */
  targetRatio: number;
  /**
   * A slow mixed step (the spread's percentile) should cost at most this many decode steps: under the bar's 3,
   * because an inter-token gap is a decode step plus the pause between steps, and clients read some tokens in
   * pairs (a short gap, then a long one). At 2.8 and the 95th percentile ~20M's ITL p99 was 3.1 × p50.
   */
  tailRatio: number;
  /**
   * The percentile of actual / predicted mixed-step time the spread tracks. ITL p99 is the slowest 1% of all
   * gaps; with a third of the steps mixed (~20M, 8 streams, 64-word prompts) that is their slowest 3%.
   */
  tailQuantile: number;
  /** Fewest prompt tokens per mixed step (a prompt must make progress even on a very slow model). */
  min: number;
  /** Most prompt tokens per mixed step. */
  max: number;
  /** Budget before any step has been measured. */
  initial: number;
  /** Weight of the newest sample in the moving averages. */
  alpha: number;
  /** Steps after which decode(R) is measured again by a decode-only step (when prompts wait, each probe delays them by one step). */
  probeEvery: number;
}

export const DEFAULT_CHUNK_BUDGET: ChunkBudgetOptions = { targetRatio: 2.25, tailRatio: 2.7, tailQuantile: 0.98, min: 8, max: 256, initial: 32, alpha: 0.1, probeEvery: 100 };

/**
 * Step of the spread's percentile tracker, in units of actual / predicted: at the 98th percentile a step over it
 * raises it by 0.039, one under lowers it by 0.0008. With one mixed step in ten at 1.5 × its prediction it
 * reaches ~1.45 in ~300 mixed steps (a few seconds of ~20M at 8 streams); one odd step moves the budget by a
 * token or two.
 */
const SPREAD_STEP = 0.04;
/** The spread before any mixed step was predicted: none assumed (the budget starts from targetRatio alone). */
const INITIAL_SPREAD = 1;

export interface StepTiming {
  /** Rows that decode (one new token each). */
  decodeRows: number;
  /** Prompt tokens in the step (prefill chunks). */
  promptTokens: number;
  /** Wall time of the model step. */
  ms: number;
}

export interface ChunkEstimate {
  decodeMs: number;
  fixedMs: number;
  tokenMs: number;
  /** The tracked percentile of actual / predicted mixed-step time. */
  spread: number;
  /** The ratio the budget was sized for: min(targetRatio, tailRatio / spread). */
  ratio: number;
  tokens: number;
}

export class ChunkBudget {
  /** Moving average of a pure decode step's time by number of rows, and the step it was last measured at. */
  private readonly decodeMs = new Map<number, { ms: number; at: number }>();
  /** Steps observed. */
  private steps = 0;
  /** The tailQuantile of actual / predicted mixed-step time (see the header). */
  private spread = INITIAL_SPREAD;
  /** Exponentially weighted sums over mixed steps of b (prompt tokens) and e (excess ms): n, Σb, Σe, Σb², Σbe. */
  private fit = { n: 0, b: 0, e: 0, bb: 0, be: 0 };
  readonly options: ChunkBudgetOptions;

  constructor(options: Partial<ChunkBudgetOptions> = {}) {
    this.options = { ...DEFAULT_CHUNK_BUDGET, ...options };
    const o = this.options;
    if (!(o.targetRatio > 1) || !(o.tailRatio > 1) || !(o.tailQuantile > 0 && o.tailQuantile < 1) || !(o.min >= 1) || !(o.max >= o.min) || !(o.alpha > 0 && o.alpha <= 1) || !(o.probeEvery >= 1))
      throw new Error('chunk budget: targetRatio and tailRatio must be > 1, 0 < tailQuantile < 1, 1 ≤ min ≤ max, 0 < alpha ≤ 1, probeEvery ≥ 1');
  }

  /** Learn from one model step. Steps without decoding rows (a prompt alone) say nothing about mixed steps. */
  observe(step: StepTiming): void {
    const { decodeRows: rows, promptTokens: b, ms } = step;
    this.steps++;
    if (rows === 0 || !(ms >= 0)) return;
    const a = this.options.alpha;
    if (b === 0) {
      const prev = this.decodeMs.get(rows);
      this.decodeMs.set(rows, { ms: prev === undefined ? ms : prev.ms + a * (ms - prev.ms), at: this.steps });
      return;
    }
    const d = this.decodeMs.get(rows)?.ms;
    if (d === undefined) return; // nothing to measure the excess against at this row count
    const line = this.line();
    if (line) {
      // Quantile tracking: up by q·step when a step runs over the percentile, down by (1 − q)·step otherwise, so it
      // settles where a fraction 1 − q of the steps run over it.
      const over = ms > (d + line.fixed + b * line.perToken) * this.spread;
      this.spread = Math.max(1, this.spread + SPREAD_STEP * (over ? this.options.tailQuantile : this.options.tailQuantile - 1));
    }
    const e = ms - d;
    const f = this.fit, keep = 1 - a;
    this.fit = { n: f.n * keep + 1, b: f.b * keep + b, e: f.e * keep + e, bb: f.bb * keep + b * b, be: f.be * keep + b * e };
  }

  /**
   * Prompt tokens the next step may take when `decodeRows` sequences decode in it; 0 when that step should
   * only decode, to measure decode(decodeRows) (never measured, or `probeEvery` steps ago).
   */
  tokensFor(decodeRows: number): number {
    if (decodeRows >= 1 && this.probeDue(decodeRows)) return 0;
    return this.estimateFor(decodeRows).tokens;
  }

  /** decode(rows) is unknown or stale. */
  probeDue(rows: number): boolean {
    const d = this.decodeMs.get(rows);
    return d === undefined || this.steps - d.at >= this.options.probeEvery;
  }

  /** The measured model at `decodeRows` rows (NaN where not measured yet; decode(R) from the nearest row count measured), and the budget it gives. */
  estimateFor(decodeRows: number): ChunkEstimate {
    const o = this.options;
    const d = this.decodeFor(Math.max(1, decodeRows));
    const line = this.line();
    const spread = this.spread, ratio = Math.min(o.targetRatio, o.tailRatio / spread);
    if (d === null || line === null) return { decodeMs: d ?? NaN, fixedMs: line?.fixed ?? NaN, tokenMs: line?.perToken ?? NaN, spread, ratio, tokens: o.initial };
    const room = (ratio - 1) * d - line.fixed;
    const fit = room / line.perToken;
    const tokens = room <= 0 ? o.max : Math.min(o.max, Math.max(o.min, Math.floor(fit + 1e-6)));
    return { decodeMs: d, fixedMs: line.fixed, tokenMs: line.perToken, spread, ratio, tokens };
  }

  /** decode(R): the average for R rows, else for the nearest row count measured. */
  private decodeFor(rows: number): number | null {
    let best: number | null = null, bestGap = Infinity;
    for (const [r, { ms }] of this.decodeMs) {
      const gap = Math.abs(r - rows);
      if (gap < bestGap) [best, bestGap] = [ms, gap];
    }
    return best;
  }

  /** fixed + b · perToken through the mixed steps' excess; through the origin while b has hardly varied. */
  private line(): { fixed: number; perToken: number } | null {
    const { n, b, e, bb, be } = this.fit;
    if (n < 1e-9) return null;
    const meanB = b / n, meanE = e / n;
    const varB = bb / n - meanB * meanB;
    // A negative or tiny excess (noise) still says prompt tokens are cheap, not free.
    const floor = 1e-6 + 0.001 * Math.abs(meanE);
    const origin = { fixed: 0, perToken: Math.max(meanE / meanB, floor) };
    if (varB < 1) return origin;
    const perToken = (be / n - meanB * meanE) / varB;
    const fixed = meanE - perToken * meanB;
    return perToken > floor && fixed >= 0 ? { fixed, perToken } : origin;
  }
}
