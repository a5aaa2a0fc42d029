// Model store and CLI: import (HF folder, sharded, GGUF), list, rm, generate --json, refusals that
// say what is wrong and leave nothing behind, and the generated demo model.
import { describe, expect, it, beforeEach, afterEach, vi } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sharedPath } from '../helpers/shared.js';
import { onnxCuda } from '../helpers/hardware.js';
import { importModel, listModels, removeModel, modelsRoot } from '../../src/models/model-store.js';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import { makeTinyModel } from '../../src/synthetic-models/tiny-model.js';
import { readModelWeights } from '../../src/runtime/hf-model.js';
import { writeSafetensors } from '../../src/runtime/safetensors.js';
import { f32ToF16 } from '../../src/runtime/half.js';
import { loadModel } from '../../src/runtime/load-model.js';
import { run as runModels } from '../../src/cli/commands/models.js';
import { run as runGenerate } from '../../src/cli/commands/generate.js';

let work: string, home: string;
beforeEach(() => { work = mkdtempSync(join(tmpdir(), 'hearth-store-')); home = join(work, 'home'); });
afterEach(() => rmSync(work, { recursive: true, force: true }));

/** A small generated model folder (fast to write and load). */
function folder(name: string, seed = 1): string {
  const dir = join(work, name);
  makeTinyModel({ dir, seed, std: 0.2, overrides: { numLayers: 2, hiddenSize: 64, numHeads: 4, numKvHeads: 2, headDim: 16, intermediateSize: 96 } });
  return dir;
}

function storeIsClean(): void {
  const root = modelsRoot(home);
  if (existsSync(root)) expect(readdirSync(root).filter((f) => f.startsWith('.'))).toEqual([]);
}

/** A safetensors file with F16 or BF16 tensors (round-to-nearest for F16, truncation for BF16). */
function writeHalfSafetensors(file: string, weights: Map<string, { shape: number[]; data: Float32Array }>, dtype: 'F16' | 'BF16'): void {
  const header: Record<string, unknown> = {};
  const parts: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of weights) {
    const b = Buffer.alloc(t.data.length * 2);
    const bits = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
    for (let i = 0; i < t.data.length; i++) b.writeUInt16LE(dtype === 'F16' ? f32ToF16(t.data[i]) : bits[i] >>> 16, i * 2);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + b.length] };
    offset += b.length;
    parts.push(b);
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, json, ...parts]));
}

async function capture(fn: () => Promise<number>): Promise<{ code: number; out: string; err: string }> {
  let out = '', err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => { out += String(s); return true; });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => { err += String(s); return true; });
  try { return { code: await fn(), out, err }; } finally { o.mockRestore(); e.mockRestore(); }
}

describe('model store', () => {
  it('imports a HF folder, lists it, generates with --json, removes it', async () => {
    const src = folder('m1');
    const m = await importModel(home, src, { id: 'acme/tiny' });
    expect(m.architecture).toBe('llama');
    expect(listModels(home).map((x) => x.id)).toEqual(['acme/tiny']);
    process.env.HEARTH_HOME = home;
    try {
      const list = await capture(() => runModels(['list']));
      expect(list.code).toBe(0);
      expect(list.out).toMatch(/acme\/tiny\s+llama/);
      const gen = await capture(() => runGenerate(['--model', 'acme/tiny', '--prompt', 'The lamp', '--max-tokens', '5', '--json']));
      expect(gen.code).toBe(0);
      const json = JSON.parse(gen.out);
      expect(json.prompt_ids[0]).toBe(m.config.bosTokenId); // BOS as the tokenizer adds it
      expect(json.output_ids.length).toBeGreaterThan(0);
      expect(typeof json.text).toBe('string');
      const rm = await capture(() => runModels(['rm', 'acme/tiny']));
      expect(rm.code).toBe(0);
    } finally {
      delete process.env.HEARTH_HOME;
    }
    expect(listModels(home)).toEqual([]);
    expect(() => removeModel(home, 'acme/tiny')).toThrow(/not in the store/);
  });

  it('refuses a duplicate id and an invalid id', async () => {
    const src = folder('m2');
    await importModel(home, src, { id: 'acme/dup' });
    await expect(importModel(home, src, { id: 'acme/dup' })).rejects.toThrow(/already exists/);
    await expect(importModel(home, src, { id: '../evil' })).rejects.toThrow(/invalid model id/);
  });

  it('refuses a missing tensor, an unknown architecture and a bad header, leaving nothing behind', async () => {
    const missing = folder('missing');
    const { weights } = readModelWeights(missing);
    weights.delete('model.layers.1.self_attn.k_proj.weight');
    writeSafetensors(join(missing, 'model.safetensors'), weights);
    await expect(importModel(home, missing, { id: 'x/missing' })).rejects.toThrow(/missing tensor model\.layers\.1\.self_attn\.k_proj\.weight/);

    const arch = folder('arch');
    const cfg = JSON.parse(readFileSync(join(arch, 'config.json'), 'utf8'));
    writeFileSync(join(arch, 'config.json'), JSON.stringify({ ...cfg, architectures: ['GPT2LMHeadModel'] }));
    await expect(importModel(home, arch, { id: 'x/arch' })).rejects.toThrow(/unsupported architecture "GPT2LMHeadModel"/);

    const bad = folder('bad');
    writeFileSync(join(bad, 'model.safetensors'), Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 2, 3]));
    await expect(importModel(home, bad, { id: 'x/bad' })).rejects.toThrow(/bad safetensors header/);

    const gguf = join(work, 'broken.gguf');
    writeFileSync(gguf, 'not a gguf file at all, just text');
    await expect(importModel(home, gguf, { id: 'x/gguf' })).rejects.toThrow(/bad GGUF header/);
    expect(listModels(home)).toEqual([]);
    storeIsClean();
  });

  it('refuses a real HF folder of an unsupported architecture (GPT-2), naming it', async () => {
    const GPT2 = sharedPath('models', 'tiny-gpt2');
    await expect(importModel(home, GPT2, { id: 'x/gpt2' })).rejects.toThrow(/unsupported architecture "GPT2LMHeadModel"/);
    storeIsClean();
  });

  it('reads F16 and BF16 checkpoints (logits close to the F32 original)', async () => {
    const src = folder('f32', 9);
    const { weights } = readModelWeights(src);
    const base = await loadModel(src);
    const [ref] = await base.runner.forward([{ tokens: [1, 2, 3], kv: base.runner.newSequence() }]);
    for (const dtype of ['F16', 'BF16'] as const) {
      const dir = folder(dtype.toLowerCase(), 9);
      writeHalfSafetensors(join(dir, 'model.safetensors'), weights, dtype);
      const m = await importModel(home, dir, { id: `h/${dtype.toLowerCase()}` });
      expect(m.parameters).toBeGreaterThan(0);
      const model = await loadModel(`h/${dtype.toLowerCase()}`, { home });
      const [l] = await model.runner.forward([{ tokens: [1, 2, 3], kv: model.runner.newSequence() }]);
      const scale = Math.max(...Array.from(ref, Math.abs));
      let diff = 0;
      for (let i = 0; i < l.length; i++) diff = Math.max(diff, Math.abs(l[i] - ref[i]));
      expect(diff / scale).toBeLessThan(dtype === 'F16' ? 0.01 : 0.05);
      expect(diff).toBeGreaterThan(0); // really converted
    }
  });

  it('imports sharded safetensors and gives the same logits as the single file', async () => {
    const src = folder('single', 5);
    const { weights } = readModelWeights(src);
    const sharded = folder('sharded', 5);
    const names = [...weights.keys()].sort();
    const a = new Map(names.slice(0, 10).map((n) => [n, weights.get(n)!]));
    const b = new Map(names.slice(10).map((n) => [n, weights.get(n)!]));
    rmSync(join(sharded, 'model.safetensors'));
    writeSafetensors(join(sharded, 'model-00001-of-00002.safetensors'), a);
    writeSafetensors(join(sharded, 'model-00002-of-00002.safetensors'), b);
    const weightMap = Object.fromEntries([...a.keys()].map((n) => [n, 'model-00001-of-00002.safetensors']).concat([...b.keys()].map((n) => [n, 'model-00002-of-00002.safetensors'])));
    writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    await importModel(home, src, { id: 'a/single' });
    await importModel(home, sharded, { id: 'a/sharded' });
    const m1 = await loadModel('a/single', { home }), m2 = await loadModel('a/sharded', { home });
    const [l1] = await m1.runner.forward([{ tokens: [1, 2, 3], kv: m1.runner.newSequence() }]);
    const [l2] = await m2.runner.forward([{ tokens: [1, 2, 3], kv: m2.runner.newSequence() }]);
    expect(Array.from(l2)).toEqual(Array.from(l1));
    expect(readdirSync(join(modelsRoot(home), 'a', 'sharded')).sort()).toContain('model.safetensors.index.json');
  });

  it('export-onnx writes a transformers.js-style folder whose graph runs with only the standard inputs', async () => {
    const ort = await import('onnxruntime-node');
    await importModel(home, folder('exp', 3), { id: 'acme/exp' });
    const out = join(work, 'exported');
    process.env.HEARTH_HOME = home;
    try {
      const r = await capture(() => runModels(['export-onnx', 'acme/exp', out]));
      expect(r.code, r.err).toBe(0);
    } finally {
      delete process.env.HEARTH_HOME;
    }
    expect(readdirSync(out).sort()).toEqual(['config.json', 'generation_config.json', 'onnx', 'tokenizer.json', 'tokenizer_config.json']);
    const session = await ort.InferenceSession.create(join(out, 'onnx', 'model.onnx'));
    expect(session.inputNames).not.toContain('num_logits_to_keep');
    const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    const feeds: Record<string, InstanceType<typeof ort.Tensor>> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([1n, 2n, 3n]), [1, 3]),
      attention_mask: new ort.Tensor('int64', BigInt64Array.from([1n, 1n, 1n]), [1, 3]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from([0n, 1n, 2n]), [1, 3]),
    };
    for (let i = 0; i < cfg.num_hidden_layers; i++)
      for (const k of ['key', 'value']) feeds[`past_key_values.${i}.${k}`] = new ort.Tensor('float32', new Float32Array(0), [1, cfg.num_key_value_heads, 0, cfg.head_dim]);
    const res = await session.run(feeds);
    expect(res.logits.dims).toEqual([1, 1, cfg.vocab_size]);
    expect(res['present.0.key'].dims).toEqual([1, cfg.num_key_value_heads, 3, cfg.head_dim]);
    const model = await loadModel('acme/exp', { home });
    const [mine] = await model.runner.forward([{ tokens: [1, 2, 3], kv: model.runner.newSequence() }]);
    const theirs = res.logits.data as Float32Array;
    for (let i = 0; i < mine.length; i++) expect(Math.abs(mine[i] - theirs[i])).toBeLessThan(1e-4);
  });

  // What cuda:0 does depends on the machine (test/helpers/hardware.ts): each machine runs the test that applies.
  it.skipIf(onnxCuda)('asking for a CUDA device without the CUDA provider logs a clear line and runs on CPU (machines without CUDA)', async () => {
    const lines: string[] = [];
    const model = await loadModel(folder('cuda'), { device: 'cuda:0', log: (l) => lines.push(l) });
    expect(model.runner.device).toBe('cpu');
    expect(lines.join('\n')).toMatch(/CUDA execution provider unavailable for cuda:0.*using CPU/);
  });

  it.skipIf(!onnxCuda)('cuda:0 runs on the GPU, logits close to the CPU ones (GPU machines only)', async () => {
    const lines: string[] = [];
    const src = folder('cuda');
    const gpu = await loadModel(src, { device: 'cuda:0', log: (l) => lines.push(l) });
    expect(gpu.runner.device).toBe('cuda:0');
    expect(lines.join('\n')).not.toMatch(/unavailable/);
    const cpu = await loadModel(src);
    const [a] = await gpu.runner.forward([{ tokens: [1, 2, 3], kv: gpu.runner.newSequence() }]);
    const [b] = await cpu.runner.forward([{ tokens: [1, 2, 3], kv: cpu.runner.newSequence() }]);
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i] - b[i])).toBeLessThan(1e-3);
  });

  it('refuses an unknown device', async () => {
    await expect(loadModel(folder('dev'), { device: 'tpu' })).rejects.toThrow(/unknown device "tpu"/);
  });

  it('installs the demo model into an empty store once, deterministically', async () => {
    const m = await ensureDemoModel(home);
    expect(m?.id).toBe('hearth/tiny-random-llama');
    expect(m!.parameters).toBeGreaterThan(500_000);
    expect(m!.parameters).toBeLessThan(1_500_000);
    expect(await ensureDemoModel(home)).toBeNull();
    const other = join(work, 'home2');
    await ensureDemoModel(other);
    const f = (h: string) => readFileSync(join(modelsRoot(h), 'hearth', 'tiny-random-llama', 'model.safetensors'));
    expect(f(other).equals(f(home))).toBe(true);
    const model = await loadModel('hearth/tiny-random-llama', { home });
    expect(model.renderChat([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true })).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    storeIsClean();
  });
});
