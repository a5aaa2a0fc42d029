// From tokenized sequences to micro-batches: next-token targets, sequence packing and a token budget.
//
// A sequence of n ids gives n-1 (input, target) pairs. Micro-batches are packed rows: several
// sequences laid end to end, each with its own positions (0, 1, ...) and a segment id so
// attention stays inside each sequence. GEMM cost depends on the token count only, attention's on
// row length squared: sequences go into rows as long as the longest one when that pads little
// (buildMicroBatch), else into one row without any padding.
import type { TokenBatch } from './model.js';

export interface TrainSequence {
  /** Full token ids (prompt and completion). */
  ids: number[];
  /** lossMask[t] = 1 when ids[t] is trained on as a target (assistant tokens); lossMask[0] is ignored. */
  lossMask: number[];
  /** RL: sampling-time logprob of ids[t] (NaN where unknown, e.g. prompt tokens). */
  logprobs?: number[];
  /** RL: the sequence's advantage. */
  advantage?: number;
  /**
   * RL over client-made token rows (ART's N3 token matrices): the advantage of each target ids[t], in place of
   * `advantage` (which then does not count).
   */
  tokenAdvantages?: number[];
  /** A loss weight per target ids[t] (default 1; any finite value), as ART's `loss_weights` row, for RL and SFT. */
  tokenWeights?: number[];
  /** The job's input row it came from (default: its index), so per-sequence reports name their input. */
  row?: number;
}

export interface MicroBatch {
  batch: TokenBatch;
  /** [N] next token of each position. */
  targets: Int32Array;
  /** [N] 1 where the target is trained on. */
  trainable: Uint8Array;
  /** [N] index of the position's sequence in the list given to buildMicroBatch's caller. */
  sequenceIndex: Int32Array;
  /** [N] sampling logprob of the target (NaN when unknown). */
  oldLogprobs: Float32Array;
  /** [N] advantage of the position (its sequence's, or its own with per-token advantages). */
  advantages: Float32Array;
  /** [N] loss weight of the position (1 unless the sequence carries per-token weights). */
  lossWeights: Float32Array;
  /** Real tokens (the arrays above also hold padding slots when the batch has several rows). */
  numTokens: number;
  numTrainableTokens: number;
}

export function validateSequence(seq: TrainSequence, vocabSize: number): void {
  if (seq.ids.length < 2) throw new Error('a training sequence needs at least 2 tokens');
  if (seq.lossMask.length !== seq.ids.length) throw new Error(`lossMask has ${seq.lossMask.length} entries for ${seq.ids.length} tokens`);
  if (seq.logprobs && seq.logprobs.length !== seq.ids.length) throw new Error(`logprobs has ${seq.logprobs.length} entries for ${seq.ids.length} tokens`);
  if (seq.tokenAdvantages && seq.tokenAdvantages.length !== seq.ids.length) throw new Error(`tokenAdvantages has ${seq.tokenAdvantages.length} entries for ${seq.ids.length} tokens`);
  if (seq.tokenWeights && seq.tokenWeights.length !== seq.ids.length) throw new Error(`tokenWeights has ${seq.tokenWeights.length} entries for ${seq.ids.length} tokens`);
  if (seq.tokenWeights?.some((w) => !Number.isFinite(w))) throw new Error('tokenWeights must be finite numbers');
  for (const id of seq.ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new Error(`token id ${id} is outside the vocabulary (${vocabSize})`);
  }
}

/** Trainable targets of a sequence. */
export function trainableTokens(seq: TrainSequence): number {
  let n = 0;
  for (let t = 1; t < seq.ids.length; t++) if (seq.lossMask[t]) n++;
  return n;
}

/**
 * Group sequences (by index) into bins of at most `maxTokens` input positions, first-fit
 * decreasing. A sequence longer than the budget gets a bin of its own.
 */
export function packSequences(lengths: number[], maxTokens: number): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b] - lengths[a] || a - b);
  const bins: { items: number[]; used: number }[] = [];
  for (const i of order) {
    const size = lengths[i];
    const bin = bins.find((b) => b.used + size <= maxTokens);
    if (bin) {
      bin.items.push(i);
      bin.used += size;
    } else {
      bins.push({ items: [i], used: size });
    }
  }
  return bins.map((b) => b.items.sort((x, y) => x - y));
}

/**
 * Rows of at most the longest sequence's length, filled first-fit decreasing, when that wastes at
 * most 1/8 of the slots on padding; else null (one row). Attention costs (row length)^2 per row,
 * so 4 sequences of 128 in 4 rows cost a quarter of one 512-long row (measured: the RL step of
 * bench:train, 8 x 4 x 127 tokens), while the GEMMs grow only by the padding.
 */
function rowLayout(lengths: number[]): { length: number; rows: number[][] } | null {
  const longest = Math.max(...lengths);
  const total = lengths.reduce((a, b) => a + b, 0);
  if (lengths.length < 2 || longest === total) return null;
  const rows = packSequences(lengths, longest);
  return rows.length > 1 && (rows.length * longest - total) * 8 <= rows.length * longest ? { length: longest, rows } : null;
}

/**
 * The micro-batch of the given sequences; `indices` are their positions in the caller's list.
 * Several sequences share a row end to end, each with its own positions and segment id; padding
 * slots (multi-row layout only) have segment -1 and are never trained.
 */
export function buildMicroBatch(sequences: TrainSequence[], indices: number[]): MicroBatch {
  const lengths = sequences.map((s) => s.ids.length - 1);
  const n = lengths.reduce((a, b) => a + b, 0);
  const layout = rowLayout(lengths) ?? { length: n, rows: [sequences.map((_, i) => i)] };
  const slots = layout.rows.length * layout.length;
  const inputIds = new Int32Array(slots);
  const positions = new Int32Array(slots);
  const segmentIds = new Int32Array(slots).fill(-1);
  const targets = new Int32Array(slots);
  const trainable = new Uint8Array(slots);
  const sequenceIndex = new Int32Array(slots);
  const oldLogprobs = new Float32Array(slots).fill(NaN);
  const advantages = new Float32Array(slots);
  const lossWeights = new Float32Array(slots);
  let numTrainableTokens = 0;
  layout.rows.forEach((row, r) => {
    let o = r * layout.length;
    for (const s of row) {
      const seq = sequences[s];
      for (let t = 0; t < seq.ids.length - 1; t++, o++) {
        inputIds[o] = seq.ids[t];
        positions[o] = t;
        segmentIds[o] = s + 1;
        targets[o] = seq.ids[t + 1];
        trainable[o] = seq.lossMask[t + 1] ? 1 : 0;
        numTrainableTokens += trainable[o];
        sequenceIndex[o] = indices[s];
        if (seq.logprobs) oldLogprobs[o] = seq.logprobs[t + 1];
        advantages[o] = seq.tokenAdvantages ? seq.tokenAdvantages[t + 1] : (seq.advantage ?? 0);
        lossWeights[o] = seq.tokenWeights ? seq.tokenWeights[t + 1] : 1;
      }
    }
  });
  return {
    batch: { rows: layout.rows.length, length: layout.length, inputIds, positions, segmentIds },
    targets,
    trainable,
    sequenceIndex,
    oldLogprobs,
    advantages,
    lossWeights,
    numTokens: n,
    numTrainableTokens,
  };
}

/** Micro-batches of at most `tokenBudget` positions each for the given sequences. */
export function microBatches(sequences: TrainSequence[], indices: number[], tokenBudget: number): MicroBatch[] {
  const bins = packSequences(sequences.map((s) => s.ids.length - 1), tokenBudget);
  return bins.map((bin) => buildMicroBatch(bin.map((i) => sequences[i]), bin.map((i) => indices[i])));
}

/** The trained positions of a micro-batch, compacted (the LM head only runs on these rows). */
export interface TrainedPositions {
  /** Row of each trained position in the micro-batch. */
  index: Int32Array;
  targets: Int32Array;
  sequenceIndex: Int32Array;
  /** Index of the target inside its sequence's logprob array (= input position t, target ids[t + 1]). */
  positionInSequence: Int32Array;
  oldLogprobs: Float32Array;
  advantages: Float32Array;
  lossWeights: Float32Array;
}

export function trainedPositions(mb: MicroBatch): TrainedPositions {
  const index = new Int32Array(mb.numTrainableTokens);
  let k = 0;
  for (let i = 0; i < mb.trainable.length; i++) if (mb.trainable[i]) index[k++] = i;
  const pick = <T extends Int32Array | Float32Array>(from: T, make: new (n: number) => T): T => {
    const out = new make(index.length);
    index.forEach((i, j) => (out[j] = from[i]));
    return out;
  };
  return {
    index,
    targets: pick(mb.targets, Int32Array),
    sequenceIndex: pick(mb.sequenceIndex, Int32Array),
    positionInSequence: pick(mb.batch.positions, Int32Array),
    oldLogprobs: pick(mb.oldLogprobs, Float32Array),
    advantages: pick(mb.advantages, Float32Array),
    lossWeights: pick(mb.lossWeights, Float32Array),
  };
}
