// Client-tokenized sequences as they travel from the API to the training worker: ART's native runs (N3) send
// token matrices, which src/services/native-runs/ decodes into these and the trainer (worker/training/) reads.
import { z } from 'zod';

/**
 * A pre-tokenized SFT sequence, one line of the JSONL file a native run's SFT job reads: trained as given,
 * loss_mask[t] = 1 where token_ids[t] is a target, with loss weight weights[t] (1 without the array; any finite
 * value, negative ones push the target's probability down), as ART's `loss_weights` row.
 */
export interface TokenizedSftRow {
  token_ids: number[];
  loss_mask: number[];
  weights?: number[];
}

/**
 * One client-tokenized RL sequence, as a native RL job's payload carries it. Every array is aligned with token_ids
 * (entry t: the target token_ids[t]): its sampling logprob, its advantage and its loss weight.
 */
export const RlTokenSequence = z.object({
  token_ids: z.array(z.number().int()),
  loss_mask: z.array(z.number()),
  logprobs: z.array(z.number()),
  advantages: z.array(z.number()),
  weights: z.array(z.number()),
});
export type RlTokenSequence = z.infer<typeof RlTokenSequence>;
