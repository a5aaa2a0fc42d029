// ART SFT data (train.jsonl: one `{"messages": [...], "tools": [...]}` per line) -> training
// sequences with the loss on every assistant turn (ART's assistant_turns="all").
//
// Each assistant message's tokens are found by rendering the conversation up to it with the
// generation prompt and once more including it: the extra tokens are the turn (content plus the
// template's end-of-turn marker). This needs no per-template response markers; the same rule as
// RL choices without logprobs (rl-data.ts).
import type { TrainSequence } from './data.js';
import { tokenizeHistory, type ChatMessage, type ChatTokenizer } from './rl-data.js';

export interface SftRow {
  messages: ChatMessage[];
  tools?: unknown[] | null;
}

/** Parse train.jsonl; errors name the line. Blank lines are skipped. */
export function parseSftJsonl(text: string): SftRow[] {
  const rows: SftRow[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (err) {
      throw new Error(`training data line ${i + 1} is not JSON: ${(err as Error).message}`);
    }
    const messages = (row as { messages?: unknown }).messages;
    if (!Array.isArray(messages) || messages.some((m) => typeof m !== 'object' || m === null || typeof (m as ChatMessage).role !== 'string')) {
      throw new Error(`training data line ${i + 1} needs "messages": a list of {role, content} objects`);
    }
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

export async function tokenizeSftRows(rows: SftRow[], tokenizer: ChatTokenizer, opts: { maxTokens?: number } = {}): Promise<SftSequences> {
  const sequences: TrainSequence[] = [];
  let rowsWithoutAssistant = 0;
  let droppedTooLong = 0;
  for (const row of rows) {
    // Assistant messages become trainable items (Choice-shaped, without logprobs).
    const items = row.messages.map((m) => (m.role === 'assistant' ? { finish_reason: 'stop', message: m } : m));
    const { sequences: seqs } = await tokenizeHistory(items, row.tools, tokenizer, { allowTrainingWithoutLogprobs: true });
    if (seqs.length === 0) rowsWithoutAssistant++;
    for (const s of seqs) {
      if (opts.maxTokens !== undefined && s.ids.length > opts.maxTokens) droppedTooLong++;
      else sequences.push({ ids: s.ids, lossMask: s.lossMask });
    }
  }
  return { sequences, rowsWithoutAssistant, droppedTooLong };
}
