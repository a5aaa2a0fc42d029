// RL sequences tokenized by the client (ART's N3 sends token matrices; src/services/native-runs/rl-token-matrix.ts
// writes them as `token_sequences`): trained as given, with an advantage and a loss weight per token.
//
// Every array is aligned with token_ids: entry t belongs to the target token_ids[t] (loss_mask[t] = 1: trained;
// logprobs[t]: its sampling logprob; advantages[t], weights[t]: its advantage and loss weight). Entry 0 is never a
// target. No trajectory groups and no rewards: the advantages were computed by the client.
import type { RlData } from './rl-data.js';
import type { RlTokenSequence } from '../../src/protocol/token-sequences.js';


/** The RL data of client-tokenized sequences; errors name the sequence (the server validated them already). */
export function rlDataFromTokenSequences(rows: RlTokenSequence[]): RlData {
  const sequences = rows.map((row, i) => {
    const n = Array.isArray(row.token_ids) ? row.token_ids.length : -1;
    for (const key of ['loss_mask', 'logprobs', 'advantages', 'weights'] as const) {
      const values = row[key];
      if (!Array.isArray(values) || values.length !== n || values.some((v) => typeof v !== 'number' || !Number.isFinite(v))) {
        throw new Error(`RL token sequence ${i}: "${key}" must be ${n} finite numbers, one per token id`);
      }
    }
    return {
      ids: row.token_ids, lossMask: row.loss_mask, logprobs: row.logprobs, tokenAdvantages: row.advantages, tokenWeights: row.weights,
      trajectory: i, group: i,
    };
  });
  return { sequences, groupRewards: [], numTrajectories: rows.length, numExceptions: 0, numChoicesWithoutLogprobs: 0 };
}
