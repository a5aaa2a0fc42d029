// ART trajectory groups (spec §3.1) -> RL training sequences.
//
// Each trajectory history (messages_and_choices + tools, plus additional_histories) becomes one or
// more token sequences. Choice dicts are the model's own samples: their exact token ids come from
// `logprobs.content[].token` = "token_id:N" (as Hearth's chat completions return them) and are
// trained on (mask 1) with their sampling logprobs. Everything between choices is prompt (mask 0),
// obtained by rendering the conversation so far with the chat template. As in ART, when the
// rendered prompt does not extend the tokens so far (templates often re-render earlier turns
// differently), a new sequence starts. Trajectories of zero-variance groups are skipped by default
// (they teach nothing); the trainer computes the advantages.
import type { TrainSequence } from './data.js';

export interface ChatMessage {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}

/** What the trainer needs from a tokenizer + chat template (the runtime provides one). */
export interface ChatTokenizer {
  /** Token ids of `messages` rendered with the chat template (no special tokens beyond the template's own). */
  encodeChat(messages: ChatMessage[], opts: { tools?: unknown[] | null; addGenerationPrompt: boolean }): Promise<number[]>;
  /** The id of a vocabulary piece (for logprob tokens not written `token_id:N`), null when unknown. */
  tokenToId?(token: string): number | null;
}

type Json = Record<string, unknown>;

export interface TrajectoryJson {
  messages_and_choices?: Json[];
  tools?: unknown[] | null;
  additional_histories?: { messages_and_choices?: Json[]; tools?: unknown[] | null }[];
  reward?: number;
}

export interface TrajectoryGroupJson {
  trajectories: TrajectoryJson[];
  exceptions?: unknown[];
}

export interface RlSequence extends TrainSequence {
  /** Index of the trajectory (counted over all groups) the sequence came from. */
  trajectory: number;
  /** Index of its trajectory group. */
  group: number;
}

export interface RlData {
  sequences: RlSequence[];
  /** Reward of every trajectory, by group (advantages are computed from these by the trainer). */
  groupRewards: number[][];
  numTrajectories: number;
  numExceptions: number;
  /** Choices skipped because they had no logprobs (and allow_training_without_logprobs was off). */
  numChoicesWithoutLogprobs: number;
}

export interface RlDataOptions {
  /** experimental_config.allow_training_without_logprobs: re-tokenize choices that lack logprobs. */
  allowTrainingWithoutLogprobs: boolean;
  /** Skip trajectories of groups whose rewards are all equal (they get zero advantage anyway). */
  skipZeroVarianceGroups?: boolean;
}

/** Choice dicts have `message` and `finish_reason`; message dicts have `role`. */
export function isChoice(item: Json): boolean {
  return 'message' in item && 'finish_reason' in item && !('role' in item);
}

/** The assistant message a Choice stands for in the conversation. */
function choiceAsMessage(choice: Json): ChatMessage {
  const message = (choice.message ?? {}) as Json;
  const out: ChatMessage = { role: 'assistant', content: message.content ?? '' };
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) out.tool_calls = message.tool_calls;
  return out;
}

/**
 * Token ids and logprobs of a Choice from its logprob entries, or null without them. Entries are
 * `token_id:N` (Hearth's and ART's vLLM servers write them so); other tokens are looked up as vocabulary
 * pieces, as ART's tokenizer does (`convert_tokens_to_ids`), when a lookup is given.
 */
export function choiceTokens(choice: Json, tokenToId?: (token: string) => number | null): { ids: number[]; logprobs: number[] } | null {
  const content = ((choice.logprobs ?? null) as { content?: { token?: unknown; logprob?: unknown }[] | null } | null)?.content;
  if (!Array.isArray(content)) return null;
  const ids: number[] = [];
  const logprobs: number[] = [];
  for (const entry of content) {
    const m = typeof entry.token === 'string' ? /^token_id:(\d+)$/.exec(entry.token) : null;
    const id = m ? Number(m[1]) : typeof entry.token === 'string' && tokenToId ? tokenToId(entry.token) : null;
    if (id === null) {
      throw new Error(`choice logprobs carry token ${JSON.stringify(entry.token)}, which is neither "token_id:N" nor a piece of this model's vocabulary`);
    }
    ids.push(id);
    logprobs.push(typeof entry.logprob === 'number' ? entry.logprob : NaN);
  }
  return { ids, logprobs };
}

function startsWith(a: number[], prefix: number[]): boolean {
  if (prefix.length > a.length) return false;
  for (let i = 0; i < prefix.length; i++) if (a[i] !== prefix[i]) return false;
  return true;
}

/** Sequences of one history; each has at least one trained choice. */
export async function tokenizeHistory(
  items: Json[],
  tools: unknown[] | null | undefined,
  tokenizer: ChatTokenizer,
  opts: { allowTrainingWithoutLogprobs: boolean },
): Promise<{ sequences: TrainSequence[]; skippedChoices: number }> {
  const sequences: TrainSequence[] = [];
  let cur: TrainSequence & { logprobs: number[] } = { ids: [], lossMask: [], logprobs: [] };
  let hasChoice = false;
  let skippedChoices = 0;
  const conversation: ChatMessage[] = [];
  const flush = () => {
    if (hasChoice) sequences.push(cur);
    cur = { ids: [], lossMask: [], logprobs: [] };
    hasChoice = false;
  };
  const push = (ids: number[], trained: boolean, logprobs?: number[]) => {
    cur.ids.push(...ids);
    for (let i = 0; i < ids.length; i++) {
      cur.lossMask.push(trained ? 1 : 0);
      cur.logprobs.push(logprobs ? logprobs[i] : NaN);
    }
  };

  for (const item of items) {
    if (!isChoice(item)) {
      conversation.push(item as ChatMessage);
      continue;
    }
    let completion = choiceTokens(item, tokenizer.tokenToId?.bind(tokenizer));
    const promptIds = Array.isArray(item.prompt_token_ids)
      ? (item.prompt_token_ids as number[])
      : await tokenizer.encodeChat(conversation, { tools, addGenerationPrompt: true });
    if (!completion) {
      if (!opts.allowTrainingWithoutLogprobs) {
        skippedChoices++;
        conversation.push(choiceAsMessage(item));
        continue;
      }
      // Re-tokenize the assistant turn: full conversation minus the generation prompt.
      const full = await tokenizer.encodeChat([...conversation, choiceAsMessage(item)], { tools, addGenerationPrompt: false });
      if (!startsWith(full, promptIds)) throw new Error('cannot re-tokenize a choice without logprobs: the chat template does not render the assistant turn after its generation prompt');
      const ids = full.slice(promptIds.length);
      completion = { ids, logprobs: ids.map(() => NaN) };
    }
    if (cur.ids.length > 0 && !startsWith(promptIds, cur.ids)) flush();
    push(promptIds.slice(cur.ids.length), false);
    push(completion.ids, true, completion.logprobs);
    hasChoice = completion.ids.length > 0 || hasChoice;
    conversation.push(choiceAsMessage(item));
  }
  flush();
  return { sequences, skippedChoices };
}

/** Tokenize all groups (the trainer computes advantages from `groupRewards`). */
export async function tokenizeTrajectoryGroups(groups: TrajectoryGroupJson[], tokenizer: ChatTokenizer, opts: RlDataOptions): Promise<RlData> {
  const groupRewards = groups.map((g) => g.trajectories.map((t) => t.reward ?? 0));
  const sequences: RlSequence[] = [];
  let trajectoryIndex = 0;
  let numChoicesWithoutLogprobs = 0;
  for (let g = 0; g < groups.length; g++) {
    const rewards = groupRewards[g];
    const zeroVariance = rewards.every((r) => r === rewards[0]);
    for (let t = 0; t < groups[g].trajectories.length; t++, trajectoryIndex++) {
      if (zeroVariance && (opts.skipZeroVarianceGroups ?? true)) continue;
      const trajectory = groups[g].trajectories[t];
      const histories = [
        { messages_and_choices: trajectory.messages_and_choices ?? [], tools: trajectory.tools },
        ...(trajectory.additional_histories ?? []),
      ];
      for (const history of histories) {
        const { sequences: seqs, skippedChoices } = await tokenizeHistory(history.messages_and_choices ?? [], history.tools, tokenizer, opts);
        numChoicesWithoutLogprobs += skippedChoices;
        for (const s of seqs) sequences.push({ ...s, trajectory: trajectoryIndex, group: g });
      }
    }
  }
  return {
    sequences,
    groupRewards,
    numTrajectories: trajectoryIndex,
    numExceptions: groups.reduce((acc, g) => acc + (g.exceptions?.length ?? 0), 0),
    numChoicesWithoutLogprobs,
  };
}
