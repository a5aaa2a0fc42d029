// The fine-tune form's pure part: its fields → the SFT job's `config`, or what is wrong with them; and the
// name a new trained model gets by default.

export interface FineTuneFields {
  learningRate: string;
  batchSize: string;
}

export type SftConfig = { learning_rate: number; batch_size: number | 'auto' };

/** The `config` of POST /v1/preview/sft-training-jobs, or an error message naming the field. */
export function sftConfigFrom(f: FineTuneFields): SftConfig | { error: string } {
  const lr = Number(f.learningRate);
  if (f.learningRate.trim() === '' || !Number.isFinite(lr) || lr <= 0 || lr > 1) return { error: 'Learning rate: a number above 0, at most 1 (e.g. 1e-4).' };
  const b = f.batchSize.trim();
  if (b === '' || b === 'auto') return { learning_rate: lr, batch_size: 'auto' };
  const n = Number(b);
  if (!Number.isInteger(n) || n < 1 || n > 4096) return { error: 'Batch size: "auto" or a whole number from 1 to 4096.' };
  return { learning_rate: lr, batch_size: n };
}

/** "hearth/tiny-random-llama" at 2026-11-27 00:12:34 → "tiny-random-llama-sft-20261127-001234" (a valid model name). */
export function defaultTrainedName(baseModel: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  const base = (baseModel.split('/').pop() ?? 'model').replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 80);
  return `${base}-sft-${stamp}`;
}
