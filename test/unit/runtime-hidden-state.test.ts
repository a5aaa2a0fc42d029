// The runner graph's `hidden` output (llama-graph.ts), which /v1/embeddings pools: it is the final-norm hidden state
// the logits are computed from (logits = hidden · W_headᵀ, checked against the model's own weights), at the last
// position of each row, in every attention form, with and without LoRA inputs, alone, batched and chunked.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../scripts/make-tiny-model.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { readModelWeights } from '../../src/runtime/hf-model.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-hidden-'));
let head: Float32Array;
let V: number, D: number;

beforeAll(() => {
  makeTinyModel({ dir, size: 'tiny', seed: 5, std: 0.1 });
  const { config, weights } = readModelWeights(dir);
  V = config.vocabSize;
  D = config.hiddenSize;
  head = weights.get(config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight')!.data; // [V, D]
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function logitsOf(hidden: Float32Array): Float32Array {
  const out = new Float32Array(V);
  for (let v = 0; v < V; v++) {
    let sum = 0;
    for (let d = 0; d < D; d++) sum += head[v * D + d] * hidden[d];
    out[v] = sum;
  }
  return out;
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.max(...Array.from(a, (x, i) => Math.abs(x - b[i])));

describe('runner graph hidden output', () => {
  for (const [attention, lora] of [['gqa', false], ['standard', false], ['onnx23', false], ['gqa', true]] as const) {
    it(`${attention}${lora ? ' with LoRA inputs' : ''}: the logits' hidden state at the last position, the same alone, batched and chunked`, async () => {
      const m: LoadedModel = await loadModel(dir, { attention, lora, maxContext: 128, intraOpThreads: 1 });
      try {
        const prompts = [[5, 9, 13, 200, 7, 1], [3, 4], [100, 101, 102, 103, 104, 105, 106, 107, 108, 109]];
        const alone: Float32Array[] = [];
        for (const tokens of prompts) {
          const kv = m.runner.newSequence();
          const [row] = await m.runner.forwardRows([{ tokens, kv }]);
          expect(row.hidden).toHaveLength(D);
          expect(maxDiff(logitsOf(row.hidden!), row.logits)).toBeLessThan(1e-3);
          alone.push(Float32Array.from(row.hidden!));
          kv.dispose();
        }
        // Batched rows of different lengths, and each prompt in two chunks (the second sees the first through the cache).
        const kvs = prompts.map(() => m.runner.newSequence());
        const batched = await m.runner.forwardRows(prompts.map((tokens, i) => ({ tokens, kv: kvs[i] })));
        batched.forEach((row, i) => expect(maxDiff(row.hidden!, alone[i])).toBeLessThan(1e-4));
        kvs.forEach((kv) => kv.dispose());
        for (const [i, tokens] of prompts.entries()) {
          if (tokens.length < 2) continue;
          const kv = m.runner.newSequence();
          const cut = Math.floor(tokens.length / 2);
          await m.runner.forwardRows([{ tokens: tokens.slice(0, cut), kv }]);
          const [row] = await m.runner.forwardRows([{ tokens: tokens.slice(cut), kv }]);
          expect(maxDiff(row.hidden!, alone[i])).toBeLessThan(1e-4);
          kv.dispose();
        }
        expect(maxDiff(alone[0], alone[1])).toBeGreaterThan(1e-3);
      } finally {
        await m.runner.release();
      }
    });
  }
});
