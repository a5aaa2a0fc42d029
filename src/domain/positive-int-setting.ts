// Caps read from the environment by whichever process enforces them (API or worker): one rule for all of them.

/** A whole-number setting of at least 1 (a cap), `fallback` when unset; any other value is refused by name. */
export function positiveIntSetting(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number ≥ 1, got "${raw}"`);
  return n;
}
