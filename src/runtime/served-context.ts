// How many positions a model is served at (docs/configuration.md, HEARTH_MAX_CONTEXT):
//   - HEARTH_MAX_CONTEXT when set;
//   - else the model's trained positions (max_position_embeddings), raised to at least 512 and capped at 8192:
//     very small models (stories260K: 128 positions) would otherwise refuse any chat with a system prompt; RoPE
//     runs past the trained positions, the output quality there is the model's to lose;
//   - capped at a sliding window, where the model has one (full attention equals sliding-window attention up to it).
// Serving beyond the trained positions is said in one warning line when the model loads.

export const MIN_SERVED_CONTEXT = 512;
export const MAX_SERVED_CONTEXT = 8192;

export interface ServedContext {
  positions: number;
  /** Why it differs from the trained positions, for the load's log; null when it does not. */
  note: string | null;
  /** Positions served beyond those the model was trained on (a warning). */
  beyondTrained: boolean;
}

/** Pure: the served context of a model with `trained` positions. */
export function servedContext(trained: number, maxContext?: number, slidingWindow?: number | null): ServedContext {
  let positions = maxContext ?? Math.min(Math.max(trained, MIN_SERVED_CONTEXT), MAX_SERVED_CONTEXT);
  let note: string | null = null;
  if (slidingWindow && slidingWindow < positions) {
    positions = slidingWindow;
    note = `context capped at the sliding window of ${slidingWindow} positions (full attention equals sliding-window attention up to there)`;
  }
  const beyondTrained = positions > trained;
  if (beyondTrained) {
    const why = maxContext !== undefined ? `HEARTH_MAX_CONTEXT=${maxContext}` : `the served minimum of ${MIN_SERVED_CONTEXT}`;
    note = `served at ${positions} positions (${why}), beyond the ${trained} it was trained on: output past position ${trained} may degrade`;
  } else if (!note && positions < trained) {
    note = `served at ${positions} of its ${trained} trained positions (${maxContext !== undefined ? `HEARTH_MAX_CONTEXT=${maxContext}` : `the cap of ${MAX_SERVED_CONTEXT}`})`;
  }
  return { positions, note, beyondTrained };
}
