// The resident KV cache (resident-kv.ts: the present fed back as the past, batches built by helper sessions)
// against the host cache, on the CPU provider: the same logic that keeps the cache in GPU memory on webgpu:0
// (runtime-webgpu.test.ts runs it on a real adapter). stories260K, GroupQueryAttention on both sides.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importModel } from '../../src/models/model-store.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { generateIds } from '../../src/runtime/generate.js';
import { ResidentSequenceKv } from '../../src/runtime/resident-kv.js';
import type { SequenceCache } from '../../src/runtime/runner.js';
import { sharedPath } from '../helpers/shared.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-resident-'));
const home = join(dir, 'home');
let host: LoadedModel, resident: LoadedModel;

beforeAll(async () => {
  await importModel(home, sharedPath('models', 'stories260K', 'stories260K.gguf'), { id: 'karpathy/stories260K' });
  host = await loadModel('karpathy/stories260K', { home, maxContext: 128, attention: 'gqa' });
  resident = await loadModel('karpathy/stories260K', { home, maxContext: 128, attention: 'gqa', residentKv: true });
});
afterAll(async () => {
  await host?.runner.release();
  await resident?.runner.release();
  rmSync(dir, { recursive: true, force: true });
});

const argmax = (a: Float32Array) => a.reduce((best, x, i) => (x > a[best] ? i : best), 0);
const close = (a: Float32Array, b: Float32Array) => {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
};

describe('resident KV cache (CPU provider)', () => {
  it('is what the runner uses, and greedy decoding equals the host cache', async () => {
    expect(resident.runner.kvResident).toBe(true);
    expect(resident.runner.newSequence()).toBeInstanceOf(ResidentSequenceKv);
    const prompt = await host.tokenizer.encode('Once upon a time', { addSpecialTokens: true });
    expect(await generateIds(resident, prompt, { maxTokens: 24, temperature: 0, stopAtEos: false }))
      .toEqual(await generateIds(host, prompt, { maxTokens: 24, temperature: 0, stopAtEos: false }));
  });

  it('batches that change (join, leave, reorder), prefix copies and rollbacks give the host cache\'s logits', async () => {
    // One script, run on both runners: every step's logits must agree.
    const script = async (m: LoadedModel) => {
      const r = m.runner;
      const seqs: SequenceCache[] = [r.newSequence(), r.newSequence(), r.newSequence()];
      const out: Float32Array[] = [];
      const step = async (rows: [number, number[]][]) => {
        for (const l of await r.forward(rows.map(([s, tokens]) => ({ tokens, kv: seqs[s] })))) out.push(l.slice());
      };
      await step([[0, [1, 403, 407, 261, 300]]]);
      await step([[1, [1, 300]]]);
      await step([[0, [310]], [1, [311]]]); // a batch forms
      await step([[0, [312]], [1, [313]]]); // and decodes in place
      await step([[2, [1, 290, 291]]]); // a newcomer's prompt
      await step([[1, [314]], [2, [315]], [0, [316]]]); // joins, in another order
      seqs[1].dispose(); // one leaves
      seqs[1] = seqs[0].copyPrefix(4); // a prefix copy of a row in a batch
      await step([[0, [317]], [1, [318]], [2, [319]]]);
      seqs[2].truncate(2); // roll back
      await step([[2, [320, 321]]]);
      await step([[0, [322]], [2, [323]]]);
      for (const s of seqs) s.dispose();
      return out;
    };
    const a = await script(host), b = await script(resident);
    expect(b.length).toBe(a.length);
    a.forEach((l, i) => {
      expect(argmax(b[i]), `step ${i}`).toBe(argmax(l));
      expect(close(l, b[i]), `step ${i}`).toBeLessThan(1e-4);
    });
  });
});
