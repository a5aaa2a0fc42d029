// `hearth tour` against a real server (training and inference workers) on a fresh home: its SFT job must
// leave a checkpoint that measurably learned the corpus. Measured two ways: the held-out loss (paragraphs the
// tour never trains on, scored in-process with the served weights: base vs base + the checkpoint's adapter),
// and word pairs of the greedy answers that occur in the corpus (the tour's own measure).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { corpusText, runTour, type TourResult } from '../../src/cli/commands/tour.js';
import { splitCorpus, TOUR_TRAINING } from '../../src/cli/tour-data.js';
import { modelDir } from '../../src/models/model-store.js';
import { loadModel, type LoadedModel } from '../../worker/runtime/load-model.js';
import type { LoraAdapter } from '../../worker/runtime/lora.js';

/**
 * Mean next-token loss (nats) over the answers of held-out windows: the first words as the user turn, the
 * rest as the assistant's, as the tour's SFT rows are laid out; only the answer's tokens are scored.
 */
async function heldOutLoss(model: LoadedModel, adapter: LoraAdapter | null, paragraphs: string[]): Promise<number> {
  const V = model.config.vocabSize;
  let total = 0;
  let count = 0;
  for (const p of paragraphs) {
    const w = p.split(' ').slice(0, TOUR_TRAINING.windowWords);
    const prompt = await model.tokenizer.encode(model.renderChat([{ role: 'user', content: w.slice(0, TOUR_TRAINING.promptWords).join(' ') }], { addGenerationPrompt: true }), { addSpecialTokens: false });
    const answer = await model.tokenizer.encode(w.slice(TOUR_TRAINING.promptWords).join(' '), { addSpecialTokens: false });
    const ids = [...prompt, ...answer];
    const [logits] = await model.runner.forward([{ tokens: ids, kv: model.runner.newSequence(), adapter }], { allLogits: true });
    for (let i = prompt.length - 1; i + 1 < ids.length; i++) {
      const row = logits.subarray(i * V, (i + 1) * V);
      let max = -Infinity;
      for (const v of row) max = Math.max(max, v);
      let sum = 0;
      for (const v of row) sum += Math.exp(v - max);
      total += max + Math.log(sum) - row[ids[i + 1]];
      count++;
    }
  }
  return total / count;
}

let s: TestServer;
let tour: TourResult;
const lines: string[] = [];
beforeAll(async () => {
  s = await startDemoServer({ training: true });
  tour = await runTour({ baseUrl: s.url, key: s.key('alice'), modelName: 'tour-test', print: (l) => lines.push(l), timeoutMs: 240_000 });
}, 300_000);
afterAll(async () => s?.close());

describe('hearth tour', () => {
  it('prints its requests and a falling loss, and ends with a checkpoint', () => {
    const out = lines.join('\n');
    for (const path of ['GET /v1/health', 'GET /v1/models', 'POST /v1/preview/datasets', 'POST /v1/preview/models', 'POST /v1/preview/sft-training-jobs', 'POST /v1/chat/completions'])
      expect(out).toContain(`→ ${path}`);
    expect(out).toMatch(/step +\d+\/\d+ +loss \d/);
    expect(tour.checkpointName).toBe('wandb-artifact:///alice/tour/tour-test:step1');
    const first = tour.losses.slice(0, 10).reduce((a, b) => a + b, 0) / 10;
    const last = tour.losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
    expect(last).toBeLessThan(first - 1.5);
  });

  it('reports, from the server, a held-out loss of the checkpoint well below the base model', () => {
    console.log(`held-out loss over HTTP (raw text): base ${tour.heldOut.base.toFixed(3)}, checkpoint ${tour.heldOut.checkpoint.toFixed(3)} nats over ${tour.heldOut.tokens} tokens`);
    expect(tour.heldOut.tokens).toBeGreaterThan(150);
    expect(tour.heldOut.base).toBeGreaterThan(7);
    // Measured (2026-11-27, 2-core EPYC shared with other jobs): base 7.11, checkpoint 6.89 nats over 269 tokens.
    expect(tour.heldOut.checkpoint).toBeLessThan(tour.heldOut.base - 0.12);
    expect(lines.join('\n')).toMatch(/base \d+\.\d{3} +checkpoint \d+\.\d{3} nats per token/);
  });

  it('the checkpoint scores held-out corpus text (chat-formatted, scored in-process) well below the base model', async () => {
    const checkpoint = s.store.checkpoints.byStep(tour.modelId, 1);
    expect(checkpoint).toBeTruthy();
    const model = await loadModel(modelDir(s.home, DEMO_MODEL), { lora: true, maxContext: 256 });
    try {
      const heldOut = splitCorpus(corpusText()).heldOut;
      const base = await heldOutLoss(model, null, heldOut);
      const trained = await heldOutLoss(model, model.loadAdapter(checkpoint!.path!), heldOut);
      console.log(`held-out loss: base ${base.toFixed(3)}, checkpoint ${trained.toFixed(3)} nats`);
      // Measured (2026-11-27, 2-core EPYC): base 7.12–7.16, checkpoint 6.81–6.83 nats. A uniform guess is
      // ln 1024 = 6.93; a unigram model of the training paragraphs 6.26 (about what 2,000 training tokens allow).
      // Settings that generalize further (overlapping windows, higher rates) reach 6.45 but answer " the the …"
      // greedily; the tour keeps the ones whose answers show the corpus (models/README.md).
      expect(base).toBeGreaterThan(7);
      expect(trained).toBeLessThan(base - 0.2);
      expect(trained).toBeLessThan(Math.log(1024));
    } finally {
      await model.runner.release();
    }
  });

  it("the checkpoint's greedy answers share word pairs with the corpus; the base's do not", () => {
    const checkpointPairs = tour.answers.reduce((n, a) => n + a.checkpointShared.length, 0);
    const basePairs = tour.answers.reduce((n, a) => n + a.baseShared.length, 0);
    expect(checkpointPairs, JSON.stringify(tour.answers)).toBeGreaterThanOrEqual(5);
    expect(basePairs, JSON.stringify(tour.answers)).toBeLessThanOrEqual(1);
    for (const a of tour.answers) expect(a.checkpoint).not.toBe(a.base);
  });
});
