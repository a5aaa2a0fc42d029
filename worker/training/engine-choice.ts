// Which engine trains a job: the ONNX Runtime graph engine (graph/) for LoRA, TF.js for the rest. Pure, so
// the rule is tested on its own (test/unit/training-engine-choice.test.ts).
import type { LoraConfig } from './lora.js';

export type TrainingEngine = 'graph' | 'tfjs';

/**
 * The graph engine trains LoRA without dropout (its graphs take no dropout masks); full fine-tuning, LoRA with
 * dropout, and HEARTH_TRAIN_ENGINE=tfjs run on TF.js, the reference engine.
 */
export function chooseTrainingEngine(job: { mode: 'lora' | 'full'; lora: Pick<LoraConfig, 'dropout'> | null }, env: Record<string, string | undefined> = process.env): { engine: TrainingEngine; reason: string } {
  const asked = env.HEARTH_TRAIN_ENGINE;
  if (asked !== undefined && asked !== '' && asked !== 'graph' && asked !== 'tfjs') throw new Error(`HEARTH_TRAIN_ENGINE must be graph or tfjs, got ${asked}`);
  if (job.mode === 'full') return { engine: 'tfjs', reason: 'full fine-tuning runs on TF.js' };
  if (asked === 'tfjs') return { engine: 'tfjs', reason: 'HEARTH_TRAIN_ENGINE=tfjs' };
  if ((job.lora?.dropout ?? 0) > 0) return { engine: 'tfjs', reason: `LoRA dropout ${job.lora!.dropout} runs on TF.js (the graph engine takes no dropout masks)` };
  return { engine: 'graph', reason: 'LoRA on ONNX Runtime graphs over the stored base' };
}
