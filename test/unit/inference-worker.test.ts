// The worker's inference handler on a generated tiny model: chat and completions, streaming,
// cancellation, and LoRA adapters served per request (mixed with base-model requests in one batch).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { sharedPath } from '../helpers/shared.js';
import { importModel } from '../../src/models/model-store.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../scripts/make-tiny-model.js';
import { writeSafetensors } from '../../src/runtime/safetensors.js';
import { seededRandom } from '../../src/runtime/generate.js';
import type { Weights } from '../../src/runtime/model-config.js';
import type { Handlers } from '../../worker/handlers.js';
import { createHandlers } from '../../worker/inference/worker-handler.js';
import type { InferenceTask } from '../../src/protocol/messages.js';
import { runInferenceTask } from '../helpers/inference-task.js';

const dir = mkdtempSync(join(tmpdir(), 'hearth-inference-worker-'));
const modelDir = join(dir, 'model');
const adapterDir = join(dir, 'adapter');
let handlers: Handlers;

/** A random PEFT LoRA adapter on q/v projections, large enough to change greedy output. */
function writeAdapter(config: { numLayers: number; hiddenSize: number; numHeads: number; numKvHeads: number; headDim: number }) {
  const r = 4;
  const random = seededRandom(5);
  const rand = (n: number) => Float32Array.from({ length: n }, () => (random() - 0.5) * 0.8);
  const tensors: Weights = new Map();
  for (let l = 0; l < config.numLayers; l++) {
    for (const [m, out] of [['q_proj', config.numHeads * config.headDim], ['v_proj', config.numKvHeads * config.headDim]] as const) {
      const base = `base_model.model.model.layers.${l}.self_attn.${m}`;
      tensors.set(`${base}.lora_A.weight`, { shape: [r, config.hiddenSize], data: rand(r * config.hiddenSize) });
      tensors.set(`${base}.lora_B.weight`, { shape: [out, r], data: rand(out * r) });
    }
  }
  mkdirSync(adapterDir, { recursive: true });
  writeSafetensors(join(adapterDir, 'adapter_model.safetensors'), tensors);
  writeFileSync(join(adapterDir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'], bias: 'none' }));
}

beforeAll(async () => {
  const config = makeTinyModel({ dir: modelDir, size: 'tiny', seed: 4, std: 0.1 });
  writeAdapter(config);
  handlers = await createHandlers('cpu', () => {});
});
afterAll(async () => {
  await handlers.close?.();
  rmSync(dir, { recursive: true, force: true });
});

function task(body: Record<string, unknown>, adapter: string | null = null, op: InferenceTask['op'] = 'chat'): InferenceTask {
  return { requestId: Math.random().toString(36), op, body: { model: 'tiny', ...body }, model: { baseModel: 'test/tiny', baseModelDir: modelDir, adapterDir: adapter, name: 'tiny' }, stream: Boolean(body.stream) };
}

async function runTask(t: InferenceTask, signal = new AbortController().signal) {
  const deltas: unknown[] = [];
  const result = await runInferenceTask(handlers, t, { signal, onChunk: (d) => deltas.push(d) });
  return { result, deltas };
}

const messages = [{ role: 'user', content: 'Tell me a story about a lamp' }];
type Chat = { choices: { message: { content: string }; token_ids: number[]; logprobs: { content: unknown[] } }[] };

describe('inference worker handler', () => {
  it('answers chat, streaming chat and completions', async () => {
    const { result } = await runTask(task({ messages, max_tokens: 8, temperature: 0, return_token_ids: true }));
    const chat = result as Chat;
    expect(chat.choices[0].token_ids).toHaveLength(8);
    expect(chat.choices[0].logprobs.content).toHaveLength(8);
    const s = await runTask(task({ messages, max_tokens: 8, temperature: 0, stream: true }));
    // A stream resolves with its usage (the API books it), and sends no usage chunk unless the client asked. The
    // same prompt again (same entity: none) reuses the first answer's cached prefix, all but the last prompt token.
    const promptTokens = (result as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    expect(s.result).toEqual({ usage: { prompt_tokens: promptTokens, completion_tokens: 8, total_tokens: promptTokens + 8, prompt_tokens_details: { cached_tokens: promptTokens - 1 } } });
    expect(s.deltas.filter((d) => (d as { usage?: unknown }).usage !== undefined)).toEqual([]);
    const text = (s.deltas as { choices: { delta: { content?: string } }[] }[]).map((d) => d.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(chat.choices[0].message.content);
    const c = await runTask(task({ prompt: 'Once', max_tokens: 4, temperature: 0 }, null, 'completion'));
    expect((c.result as { object: string }).object).toBe('text_completion');
  });

  it('HEARTH_PREFILL_CHUNK_TOKENS: auto by default, a whole number fixes it (reported in the worker stats), anything else fails the load with its name', async () => {
    const saved = process.env.HEARTH_PREFILL_CHUNK_TOKENS;
    try {
      for (const [value, budget, log] of [[undefined, 32, /sized from step times/], ['auto', 32, /sized from step times/], ['24', 24, /24 prompt tokens in steps that decode/]] as const) {
        if (value === undefined) delete process.env.HEARTH_PREFILL_CHUNK_TOKENS;
        else process.env.HEARTH_PREFILL_CHUNK_TOKENS = value;
        const logs: string[] = [];
        const h = await createHandlers('cpu', (m) => logs.push(m));
        await runInferenceTask(h, task({ prompt: 'Once', max_tokens: 2, temperature: 0 }, null, 'completion'));
        expect(logs.join('\n')).toMatch(log);
        expect(h.stats!().prefillChunkTokens).toEqual({ 'test/tiny': budget });
        await h.close?.();
      }
      for (const bad of ['0', '2.5', 'fast']) {
        process.env.HEARTH_PREFILL_CHUNK_TOKENS = bad;
        const h = await createHandlers('cpu', () => {});
        await expect(runInferenceTask(h, task({ prompt: 'Once', max_tokens: 2 }, null, 'completion'))).rejects.toMatchObject({
          status: 503,
          message: expect.stringContaining(`HEARTH_PREFILL_CHUNK_TOKENS must be 'auto' or a whole number ≥ 1, got "${bad}"`),
        });
        await h.close?.();
      }
    } finally {
      if (saved === undefined) delete process.env.HEARTH_PREFILL_CHUNK_TOKENS;
      else process.env.HEARTH_PREFILL_CHUNK_TOKENS = saved;
    }
  });

  it("reports bad requests as 400 task errors (the body is the API's parsed one: what its schema cannot tell)", async () => {
    await expect(runTask(task({ messages, top_logprobs: 2 }))).rejects.toMatchObject({ status: 400, message: 'top_logprobs is only allowed when logprobs is true' });
    await expect(runTask(task({ messages, suffix: 'x' }))).rejects.toMatchObject({ status: 400, message: expect.stringContaining('unsupported parameters: suffix') });
    await expect(runTask(task({ prompt: [[1, 2, 1_000_000]] }, null, 'completion'))).rejects.toMatchObject({ status: 400, message: expect.stringContaining('outside the vocabulary') });
  });

  it('cancellation rejects at once and frees the engine', async () => {
    // Abort once the stream has sent 3 deltas: mid-generation, whatever the machine's speed.
    const ctrl = new AbortController();
    let deltas = 0;
    const p = runInferenceTask(handlers, task({ messages, max_tokens: 100, ignore_eos: true, stream: true }), { onChunk: () => void (++deltas === 3 && ctrl.abort()), signal: ctrl.signal });
    await expect(p).rejects.toThrow(/cancelled/);
    expect(deltas).toBeLessThan(100);
    const after = await runTask(task({ messages, max_tokens: 2, temperature: 0, return_token_ids: true }));
    expect((after.result as Chat).choices[0].token_ids).toHaveLength(2);
  });

  it('serves a LoRA adapter per request, batched with base requests, matching one-at-a-time output', async () => {
    const body = { messages, max_tokens: 10, temperature: 0, ignore_eos: true, return_token_ids: true };
    const baseAlone = ((await runTask(task(body))).result as Chat).choices[0].token_ids;
    const loraAlone = ((await runTask(task(body, adapterDir))).result as Chat).choices[0].token_ids;
    expect(loraAlone).not.toEqual(baseAlone);
    const together = await Promise.all([runTask(task(body)), runTask(task(body, adapterDir)), runTask(task(body))]);
    expect(together.map((r) => (r.result as Chat).choices[0].token_ids)).toEqual([baseAlone, loraAlone, baseAlone]);
  });

  it('calibrate measures prefill and decode speed on this device', async () => {
    const { result } = await runTask({ ...task({}), op: 'calibrate', body: null });
    const r = result as { deviceKey: string; prefillTps: number; decodeTps: number };
    expect(r.deviceKey).toMatch(/cpu/i);
    expect(r.prefillTps).toBeGreaterThan(0);
    expect(r.decodeTps).toBeGreaterThan(0);
  });

  it('a missing adapter fails that request only', async () => {
    await expect(runTask(task({ messages, max_tokens: 2 }, join(dir, 'nope')))).rejects.toThrow(/adapter_config/);
  });
});

describe('HEARTH_WEIGHTS=q4', () => {
  it('serves LoRA adapters over 4-bit base weights, batched with base requests as one at a time', async () => {
    const saved = process.env.HEARTH_WEIGHTS;
    process.env.HEARTH_WEIGHTS = 'q4';
    const q4 = await createHandlers('cpu', () => {});
    try {
      const run = async (adapter: string | null) =>
        ((await runInferenceTask(q4, task({ messages, max_tokens: 10, temperature: 0, ignore_eos: true, return_token_ids: true }, adapter))) as Chat).choices[0].token_ids;
      const [base, lora] = [await run(null), await run(adapterDir)];
      expect(lora).not.toEqual(base);
      expect(await Promise.all([run(null), run(adapterDir), run(null)])).toEqual([base, lora, base]);
    } finally {
      await q4.close?.();
      if (saved === undefined) delete process.env.HEARTH_WEIGHTS;
      else process.env.HEARTH_WEIGHTS = saved;
    }
  });
});

describe('HEARTH_WEIGHTS (real stories260K model)', () => {
  it('q4 serves 4-bit weights: the greedy story survives, its logprobs move a little from f32', async () => {
    const home = mkdtempSync(join(tmpdir(), 'hearth-q4-'));
    const saved = process.env.HEARTH_WEIGHTS;
    try {
      await importModel(home, sharedPath('models', 'stories260K', 'stories260K.gguf'), { id: 'karpathy/stories260K' });
      const storiesDir = join(home, 'models', 'karpathy', 'stories260K');
      const complete = async (weights: string) => {
        process.env.HEARTH_WEIGHTS = weights;
        const logs: string[] = [];
        const h = await createHandlers('cpu', (m) => logs.push(m));
        try {
          const t: InferenceTask = {
            requestId: weights, op: 'completion', stream: false, body: { model: 's', prompt: 'Once upon a time', max_tokens: 10, temperature: 0 },
            model: { baseModel: 'karpathy/stories260K', baseModelDir: storiesDir, adapterDir: null, name: 's' },
          };
          const r = (await runInferenceTask(h, t)) as { choices: { text: string; logprobs: { token_logprobs: number[] } }[] };
          return { text: r.choices[0].text, logprobs: r.choices[0].logprobs.token_logprobs, logs };
        } finally {
          await h.close?.();
        }
      };
      const f32 = await complete('f32');
      const q4 = await complete('q4');
      expect(q4.logs.join('\n')).toMatch(/q4 weights/);
      expect(f32.text.startsWith(', there was a little girl named Lily')).toBe(true);
      expect(q4.text.startsWith(', there was a little girl named Lily')).toBe(true);
      const diffs = f32.logprobs.map((lp, i) => Math.abs(lp - q4.logprobs[i]));
      expect(Math.max(...diffs)).toBeGreaterThan(0); // computed with other weights…
      expect(Math.max(...diffs)).toBeLessThan(0.5); // …close to the f32 ones
      process.env.HEARTH_WEIGHTS = 'int3';
      await expect(createHandlers('cpu', () => {})).rejects.toThrow(/HEARTH_WEIGHTS must be stored, f32 or q4, got "int3"/);
    } finally {
      if (saved === undefined) delete process.env.HEARTH_WEIGHTS;
      else process.env.HEARTH_WEIGHTS = saved;
      rmSync(home, { recursive: true, force: true });
    }
  });
});
