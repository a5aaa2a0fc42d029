// How many trajectories and messages an RL training body carries, counted on the parsed body before schema
// validation (which copies every value) and before it is stored: a body within its byte and value budgets may
// still be millions of `{}` messages, and each message becomes a tensor row for the trainer. Shapes that are not
// what the schema expects count as nothing here; validation reports them.

/** Trajectory groups one RL request may carry (ART sends one per scenario of a step). */
export const MAX_RL_GROUPS = 100_000;
/** Trajectories one RL request may carry in all its groups (ART sends tens to a few thousand). */
export const MAX_RL_TRAJECTORIES = 100_000;
/** Messages and choices one RL request may carry over all its trajectories and their additional histories. */
export const MAX_RL_MESSAGES = 1_000_000;

export interface RlBodyCounts {
  groups: number;
  trajectories: number;
  messages: number;
}

const arrayAt = (value: unknown, key: string): unknown[] => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const inner = (value as Record<string, unknown>)[key];
  return Array.isArray(inner) ? inner : [];
};

/** Counts of `{trajectory_groups: [{trajectories: [{messages_and_choices, additional_histories}]}]}`. */
export function rlBodyCounts(body: unknown): RlBodyCounts {
  const groups = arrayAt(body, 'trajectory_groups');
  let trajectories = 0;
  let messages = 0;
  for (const group of groups) {
    for (const trajectory of arrayAt(group, 'trajectories')) {
      trajectories++;
      messages += arrayAt(trajectory, 'messages_and_choices').length;
      for (const history of arrayAt(trajectory, 'additional_histories')) messages += arrayAt(history, 'messages_and_choices').length;
    }
  }
  return { groups: groups.length, trajectories, messages };
}

/** A pydantic-style `too_long` item for the first count over its limit, or null. */
export function rlBodyCountIssue(counts: RlBodyCounts): { loc: string[]; msg: string; type: string } | null {
  if (counts.groups > MAX_RL_GROUPS) {
    return { loc: ['body', 'trajectory_groups'], msg: `List should have at most ${MAX_RL_GROUPS} items after validation, not ${counts.groups}`, type: 'too_long' };
  }
  if (counts.trajectories > MAX_RL_TRAJECTORIES) {
    return { loc: ['body', 'trajectory_groups'], msg: `A training job may carry at most ${MAX_RL_TRAJECTORIES} trajectories in all its groups, got ${counts.trajectories}`, type: 'too_long' };
  }
  if (counts.messages > MAX_RL_MESSAGES) {
    return { loc: ['body', 'trajectory_groups'], msg: `A training job may carry at most ${MAX_RL_MESSAGES} messages and choices over all its trajectories, got ${counts.messages}`, type: 'too_long' };
  }
  return null;
}
