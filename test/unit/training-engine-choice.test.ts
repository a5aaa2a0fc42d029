import { describe, expect, it } from 'vitest';
import { chooseTrainingEngine } from '../../worker/training/engine-choice.js';

describe('chooseTrainingEngine', () => {
  it('trains LoRA without dropout on the graph engine', () => {
    expect(chooseTrainingEngine({ mode: 'lora', lora: { dropout: 0 } }, {}).engine).toBe('graph');
    expect(chooseTrainingEngine({ mode: 'lora', lora: { dropout: 0 } }, { HEARTH_TRAIN_ENGINE: 'graph' }).engine).toBe('graph');
  });
  it('keeps full fine-tuning, LoRA dropout and HEARTH_TRAIN_ENGINE=tfjs on TF.js, saying why', () => {
    expect(chooseTrainingEngine({ mode: 'full', lora: null }, { HEARTH_TRAIN_ENGINE: 'graph' })).toEqual({ engine: 'tfjs', reason: 'full fine-tuning runs on TF.js' });
    expect(chooseTrainingEngine({ mode: 'lora', lora: { dropout: 0.1 } }, {}).reason).toMatch(/dropout 0.1/);
    expect(chooseTrainingEngine({ mode: 'lora', lora: { dropout: 0 } }, { HEARTH_TRAIN_ENGINE: 'tfjs' }).engine).toBe('tfjs');
  });
  it('refuses an unknown engine name', () => {
    expect(() => chooseTrainingEngine({ mode: 'lora', lora: { dropout: 0 } }, { HEARTH_TRAIN_ENGINE: 'cuda' })).toThrow(/graph or tfjs/);
  });
});
