// Group-relative advantages (GRPO-style), as ART computes them: within each trajectory group,
// advantage = reward - mean(rewards), divided by (population std + 1e-6) when scaling is on.
// Groups whose rewards are all equal teach nothing and are skipped (counted as not trainable).

export interface AdvantageOptions {
  /** Divide by the group's reward standard deviation (ART `scale_rewards`, default true). */
  scaleRewards: boolean;
}

export interface GroupAdvantages {
  /** One advantage per trajectory of the group (all 0 when the group is skipped). */
  advantages: number[];
  /** False for zero-variance (or empty) groups. */
  trainable: boolean;
  mean: number;
  std: number;
}

export interface AdvantageSummary {
  groups: GroupAdvantages[];
  numGroupsSubmitted: number;
  numGroupsTrainable: number;
  /** Mean of all rewards. */
  rewardMean: number;
  /** Mean over groups of the within-group reward standard deviation. */
  rewardStdDev: number;
}

export function groupAdvantages(rewards: number[], opts: AdvantageOptions): GroupAdvantages {
  if (rewards.length === 0) return { advantages: [], trainable: false, mean: 0, std: 0 };
  for (const r of rewards) if (!Number.isFinite(r)) throw new Error(`reward ${r} is not a finite number`);
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / rewards.length);
  if (std === 0) return { advantages: rewards.map(() => 0), trainable: false, mean, std };
  const advantages = rewards.map((r) => (opts.scaleRewards ? (r - mean) / (std + 1e-6) : r - mean));
  return { advantages, trainable: true, mean, std };
}

export function computeAdvantages(groupRewards: number[][], opts: AdvantageOptions): AdvantageSummary {
  const groups = groupRewards.map((rewards) => groupAdvantages(rewards, opts));
  const all = groupRewards.flat();
  const nonEmpty = groups.filter((g) => g.advantages.length > 0);
  return {
    groups,
    numGroupsSubmitted: groupRewards.length,
    numGroupsTrainable: groups.filter((g) => g.trainable).length,
    rewardMean: all.length ? all.reduce((a, b) => a + b, 0) / all.length : 0,
    rewardStdDev: nonEmpty.length ? nonEmpty.reduce((a, g) => a + g.std, 0) / nonEmpty.length : 0,
  };
}
