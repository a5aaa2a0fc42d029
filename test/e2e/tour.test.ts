// `hearth tour` against a real server (training and inference workers) on a fresh home: its SFT job must
// leave a checkpoint that measurably learned the tour corpus. Measured two ways: the held-out loss (whole
// paragraphs the tour never trains on, scored by the server; cross-checked in-process with the served weights:
// base vs base + the checkpoint's adapter), and word pairs of the greedy answers that occur in the corpus.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoServer, DEMO_MODEL } from '../helpers/demo-server.js';
import type { TestServer } from '../helpers/server.js';
import { corpusText, runTour, type TourResult } from '../../src/cli/commands/tour.js';
import { heldOutWindows, splitCorpus } from '../../src/cli/tour-data.js';
import { modelDir } from '../../src/models/model-store.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import type { LoraAdapter } from '../../src/runtime/lora.js';

/**
 * Mean next-token loss (nats) over the answers of held-out windows laid out as the tour's SFT rows are (the
 * model's own chat template, a BOS first as the server's tokenizer adds to a text prompt); only the answer's
 * tokens are scored.
 */
async function heldOutLoss(model: LoadedModel, adapter: LoraAdapter | null, paragraphs: string[]): Promise<{ loss: number; tokens: number }> {
  const V = model.config.vocabSize;
  let total = 0;
  let count = 0;
  for (const row of heldOutWindows(paragraphs)) {
    const prompt = await model.tokenizer.encode(model.renderChat([{ role: 'user', content: row.prompt }], { addGenerationPrompt: true }), { addSpecialTokens: true });
    const answer = await model.tokenizer.encode(row.answer, { addSpecialTokens: false });
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
  return { loss: total / count, tokens: count };
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

  it('reports, from the server, a held-out loss of the checkpoint far below the base model', () => {
    const { heldOutRawText: raw } = tour;
    const heldOut = tour.heldOut!;
    expect(tour.heldOut).not.toBeNull();
    console.log(`held-out loss over HTTP: as trained base ${heldOut.base.toFixed(3)}, checkpoint ${heldOut.checkpoint.toFixed(3)} nats over ${heldOut.tokens} tokens; ` +
      `raw text base ${raw.base.toFixed(3)}, checkpoint ${raw.checkpoint.toFixed(3)} over ${raw.tokens}`);
    expect(heldOut.tokens).toBeGreaterThan(400);
    expect(raw.tokens).toBeGreaterThan(600);
    expect(heldOut.base).toBeGreaterThan(7);
    expect(raw.base).toBeGreaterThan(7);
    // Measured (2026-11-27, 2-core EPYC shared with other jobs; the same in every run): as trained, base 7.172,
    // checkpoint 5.253 nats; raw text base 7.098, checkpoint 5.910. References: a uniform guess ln 1024 = 6.93; a
    // unigram model of the training paragraphs 5.36, while the best context-free guess this model can express is
    // about 6.3 (its tied 128-wide embeddings, std 0.05, bound the logits: models/README.md). The same job with
    // windows that do not overlap (59 steps) reaches 5.82 and 6.34, which these bounds refuse.
    expect(heldOut.checkpoint).toBeLessThan(heldOut.base - 1.6);
    expect(heldOut.checkpoint).toBeLessThan(5.55);
    expect(raw.checkpoint).toBeLessThan(raw.base - 0.9);
    expect(lines.join('\n')).toMatch(/as trained .*base \d+\.\d{3} +checkpoint \d+\.\d{3} nats per token/);
  });

  it("agrees with the held-out loss computed in-process from the served weights and the checkpoint's adapter", async () => {
    const checkpoint = s.store.checkpoints.byStep(tour.modelId, 1);
    expect(checkpoint).toBeTruthy();
    const model = await loadModel(modelDir(s.home, DEMO_MODEL), { lora: true, maxContext: 256 });
    try {
      const heldOut = splitCorpus(corpusText()).heldOut;
      const base = await heldOutLoss(model, null, heldOut);
      const trained = await heldOutLoss(model, model.loadAdapter(checkpoint!.path!), heldOut);
      console.log(`held-out loss in-process: base ${base.loss.toFixed(3)}, checkpoint ${trained.loss.toFixed(3)} nats over ${base.tokens} tokens`);
      expect(base.tokens).toBe(tour.heldOut!.tokens);
      expect(Math.abs(base.loss - tour.heldOut!.base)).toBeLessThan(0.02);
      expect(Math.abs(trained.loss - tour.heldOut!.checkpoint)).toBeLessThan(0.02);
    } finally {
      await model.runner.release();
    }
  });

  it("the checkpoint's greedy answers share word pairs with the corpus; the base's do not", () => {
    const checkpointPairs = tour.answers.reduce((n, a) => n + a.checkpointShared.length, 0);
    const basePairs = tour.answers.reduce((n, a) => n + a.baseShared.length, 0);
    expect(checkpointPairs, JSON.stringify(tour.answers)).toBeGreaterThanOrEqual(10);
    expect(basePairs, JSON.stringify(tour.answers)).toBeLessThanOrEqual(1);
    for (const a of tour.answers) expect(a.checkpoint).not.toBe(a.base);
  });
});
