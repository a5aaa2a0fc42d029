// Trajectory and message counts of an RL body, checked before validation (src/domain/rl-body-counts.ts).
import { describe, expect, it } from 'vitest';
import { MAX_RL_GROUPS, MAX_RL_MESSAGES, MAX_RL_TRAJECTORIES, rlBodyCountIssue, rlBodyCounts } from '../../src/domain/rl-body-counts.js';

describe('rlBodyCounts', () => {
  it('counts groups, trajectories and the messages of trajectories and their additional histories', () => {
    const body = {
      trajectory_groups: [
        { trajectories: [{ messages_and_choices: [{}, {}], additional_histories: [{ messages_and_choices: [{}] }, { messages_and_choices: [{}, {}, {}] }] }, { messages_and_choices: [] }] },
        { trajectories: [{ messages_and_choices: [{}] }] },
      ],
    };
    expect(rlBodyCounts(body)).toEqual({ groups: 2, trajectories: 3, messages: 7 });
  });

  it('counts shapes the schema would refuse as nothing (validation reports them)', () => {
    expect(rlBodyCounts(null)).toEqual({ groups: 0, trajectories: 0, messages: 0 });
    expect(rlBodyCounts({ trajectory_groups: 'x' })).toEqual({ groups: 0, trajectories: 0, messages: 0 });
    expect(rlBodyCounts({ trajectory_groups: [null, { trajectories: [1, { messages_and_choices: {} }] }] })).toEqual({ groups: 2, trajectories: 2, messages: 0 });
  });

  it('names the first count over its limit as a pydantic too_long item', () => {
    expect(rlBodyCountIssue({ groups: MAX_RL_GROUPS, trajectories: MAX_RL_TRAJECTORIES, messages: MAX_RL_MESSAGES })).toBeNull();
    expect(rlBodyCountIssue({ groups: MAX_RL_GROUPS + 1, trajectories: 0, messages: 0 })?.type).toBe('too_long');
    expect(rlBodyCountIssue({ groups: 1, trajectories: MAX_RL_TRAJECTORIES + 1, messages: 0 })?.msg).toMatch(`at most ${MAX_RL_TRAJECTORIES} trajectories`);
    const messages = rlBodyCountIssue({ groups: 1, trajectories: 1, messages: MAX_RL_MESSAGES + 1 });
    expect(messages).toEqual({ loc: ['body', 'trajectory_groups'], msg: expect.stringContaining(`at most ${MAX_RL_MESSAGES} messages`), type: 'too_long' });
  });
});
