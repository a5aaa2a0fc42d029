// `return_token_logprobs: true` on N3's forward / forward_backward (docs/art.md "Token logprobs"): which operations
// ask the measuring job for them, and the job's report shaped as ART's `TokenLogprobs`, one per token matrix.
import type { NativeOperationRecord } from '../../store/records.js';
import { decodeTokenLogprobs, float32Base64, TokenLogprobsReport } from '../../protocol/token-logprobs.js';

/** ART's `TokenLogprobs` (art.training contracts): a [T, 1] float32 buffer, little-endian, base64. */
export interface MatrixTokenLogprobs {
  shape: [number, number];
  data: string;
}

/** The stored (translated) batch of an N3 forward / forward_backward: one token sequence per matrix, in order. */
function tokenSequences(op: NativeOperationRecord): { token_ids: number[] }[] | null {
  const batch = (op.command as { batch?: { kind?: unknown; sequences?: unknown } }).batch;
  if (!batch || (batch.kind !== 'sft_tokens' && batch.kind !== 'rl_tokens') || !Array.isArray(batch.sequences)) return null;
  return batch.sequences as { token_ids: number[] }[];
}

/**
 * Whether the operation's measuring job reports token logprobs: the client asked, over token matrices (N3), whose
 * positions the client knows. N1's and N2's trajectory batches are tokenized here, so positions would mean nothing
 * to their clients: their flag is ignored (docs/art.md), as before.
 */
export function wantsTokenLogprobs(op: NativeOperationRecord): boolean {
  const command = op.command as { return_token_logprobs?: unknown };
  return (op.kind === 'forward' || op.kind === 'forward_backward') && command.return_token_logprobs === true && tokenSequences(op) !== null;
}

/**
 * One `TokenLogprobs` per matrix, in the batch's order, shaped as its `target_token_ids` row [T, 1]: position t
 * holds the learner's logprob of target_token_ids[t] (= token_ids[t + 1]) where t is trained (loss-bearing), 0 at
 * every other position (no target there; ART fills `behavior_logprobs` the same way). A matrix the trainer
 * measured nothing of (no trained position) is all zeros. Throws on a report that does not fit the batch.
 */
export function matrixTokenLogprobs(op: NativeOperationRecord, reported: unknown): MatrixTokenLogprobs[] {
  const sequences = tokenSequences(op);
  if (!sequences) throw new Error('token logprobs were reported for an operation without token matrices');
  const parsed = TokenLogprobsReport.safeParse(reported);
  if (!parsed.success) throw new Error('the training job reported no token logprobs (a worker from before return_token_logprobs?)');
  const byRow = decodeTokenLogprobs(parsed.data);
  return sequences.map((s, row) => {
    const positions = s.token_ids.length;
    const values = new Float32Array(positions);
    const measured = byRow.get(row);
    if (measured) {
      if (measured.length !== positions - 1) throw new Error(`token logprobs of matrix ${row}: ${measured.length} values for ${positions} positions`);
      measured.forEach((v, t) => (values[t] = Number.isNaN(v) ? 0 : v));
    }
    return { shape: [positions, 1], data: float32Base64(values) };
  });
}
