// ART SFT data (train.jsonl: one `{"messages": [...], "tools": [...]}` per line) -> training
// sequences with the loss on every assistant turn (ART's assistant_turns="all"), except assistant messages
// marked `"weight": 0` (OpenAI's fine-tuning format), which stay context: that is how ART's
// assistant_turns="last" reaches the trainer (src/services/native-runs/wire.ts sftRow).
//
// Each assistant message's tokens are found by rendering the conversation up to it with the
// generation prompt and once more including it: the extra tokens are the turn (content plus the
// template's end-of-turn marker). This needs no per-template response markers; the same rule as
// RL choices without logprobs (rl-data.ts).
import type { TrainSequence } from './data.js';
import { tokenizeHistory, type ChatMessage, type ChatTokenizer } from './rl-data.js';
import type { TokenizedSftRow } from '../../src/protocol/token-sequences.js';

export interface SftRow {
  messages: ChatMessage[];
  tools?: unknown[] | null;
}


const isTokenized = (row: SftRow | TokenizedSftRow): row is TokenizedSftRow => 'token_ids' in row;

/** Parse train.jsonl; errors name the line. Blank lines are skipped. */
export function parseSftJsonl(text: string): (SftRow | TokenizedSftRow)[] {
  const rows: (SftRow | TokenizedSftRow)[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (err) {
      throw new Error(`training data line ${i + 1} is not JSON: ${(err as Error).message}`);
    }
    if (row && typeof row === 'object' && 'token_ids' in row) {
      const { token_ids: ids, loss_mask: mask, weights } = row as { token_ids?: unknown; loss_mask?: unknown; weights?: unknown };
      const ints = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x) && x >= 0);
      if (!ints(ids) || !ints(mask) || mask.length !== ids.length) {
        throw new Error(`training data line ${i + 1}: "token_ids" and "loss_mask" must be lists of nonnegative integers of one length`);
      }
      if (weights === undefined) {
        rows.push({ token_ids: ids, loss_mask: mask });
        return;
      }
      if (!Array.isArray(weights) || weights.length !== ids.length || !weights.every((w) => typeof w === 'number' && Number.isFinite(w))) {
        throw new Error(`training data line ${i + 1}: "weights" must be a list of finite numbers, one per token id`);
      }
      rows.push({ token_ids: ids, loss_mask: mask, weights });
      return;
    }
    const messages = (row as { messages?: unknown }).messages;
    if (!Array.isArray(messages) || messages.some((m) => typeof m !== 'object' || m === null || typeof (m as ChatMessage).role !== 'string')) {
      throw new Error(`training data line ${i + 1} needs "messages": a list of {role, content} objects`);
    }
    const badWeight = (messages as (ChatMessage & { weight?: unknown })[]).findIndex((m) => m.weight !== undefined && (m.role !== 'assistant' || (m.weight !== 0 && m.weight !== 1)));
    if (badWeight >= 0) throw new Error(`training data line ${i + 1}, message ${badWeight}: "weight" must be 0 or 1, on assistant messages only`);
    const tools = (row as { tools?: unknown }).tools;
    if (tools != null && !Array.isArray(tools)) throw new Error(`training data line ${i + 1}: "tools" must be a list`);
    rows.push({ messages: messages as ChatMessage[], tools: (tools as unknown[] | null | undefined) ?? null });
  });
  return rows;
}

export interface SftSequences {
  sequences: TrainSequence[];
  /** Rows without any assistant message. */
  rowsWithoutAssistant: number;
  /** Sequences dropped for being longer than maxTokens. */
  droppedTooLong: number;
}

export async function tokenizeSftRows(rows: (SftRow | TokenizedSftRow)[], tokenizer: ChatTokenizer, opts: { maxTokens?: number } = {}): Promise<SftSequences> {
  const sequences: TrainSequence[] = [];
  let rowsWithoutAssistant = 0;
  let droppedTooLong = 0;
  for (const [index, row] of rows.entries()) {
    if (isTokenized(row)) {
      if (!row.loss_mask.some((m, t) => t > 0 && m)) rowsWithoutAssistant++;
      else if (opts.maxTokens !== undefined && row.token_ids.length > opts.maxTokens) droppedTooLong++;
      else sequences.push({ ids: row.token_ids, lossMask: row.loss_mask, ...(row.weights ? { tokenWeights: row.weights } : {}), row: index });
      continue;
    }
    // Assistant messages become trainable items (Choice-shaped, without logprobs); `weight: 0` ones stay context.
    const items = row.messages.map((m) => {
      const { weight, ...message } = m as ChatMessage & { weight?: number };
      return m.role === 'assistant' && weight !== 0 ? { finish_reason: 'stop', message } : message;
    });
    const { sequences: seqs } = await tokenizeHistory(items, row.tools, tokenizer, { allowTrainingWithoutLogprobs: true });
    if (seqs.length === 0) rowsWithoutAssistant++;
    for (const s of seqs) {
      if (opts.maxTokens !== undefined && s.ids.length > opts.maxTokens) droppedTooLong++;
      else sequences.push({ ids: s.ids, lossMask: s.lossMask });
    }
  }
  return { sequences, rowsWithoutAssistant, droppedTooLong };
}
