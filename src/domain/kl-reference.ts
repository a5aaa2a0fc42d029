// Which weights an RL job's KL penalty compares against (ART's experimental_config): the base model, or one of
// the trained model's own checkpoints. Resolved when the job starts (the lag counts from the step it trains
// from). Only the model's own checkpoint folders qualify, never an arbitrary server path.

export interface CheckpointRef {
  step: number;
  path: string | null;
}

/** `dir` null = the base model (LoRA disabled), as ART's step 0 means; `error` fails the job with that message. */
export function resolveKlReference(
  config: Record<string, unknown> | null | undefined,
  checkpoints: readonly CheckpointRef[],
  currentStep: number,
): { dir: string | null } | { error: string } {
  const c = config ?? {};
  const byStep = (step: number): { dir: string | null } | { error: string } => {
    if (step === 0) return { dir: null };
    const found = checkpoints.find((k) => k.step === step && k.path);
    return found ? { dir: found.path } : { error: `kl_penalty_reference_step ${step}: this model has no checkpoint at step ${step}` };
  };
  if (typeof c.kl_ref_adapter_path === 'string') {
    const wanted = c.kl_ref_adapter_path.replace(/\/+$/, '');
    const found = checkpoints.find((k) => k.path !== null && k.path.replace(/\/+$/, '') === wanted);
    if (!found) return { error: `kl_ref_adapter_path ${c.kl_ref_adapter_path} is not one of this model's checkpoint folders` };
    return { dir: found.path };
  }
  if (typeof c.kl_penalty_reference_step === 'number') return byStep(c.kl_penalty_reference_step);
  if (typeof c.kl_penalty_step_lag === 'number') return byStep(Math.max(0, currentStep - c.kl_penalty_step_lag));
  return { dir: null };
}
