// The GPU check end to end on the CPU (docs/gpu.md): `npm run gpu:bundle`'s builder writes a bundle (this
// process's Node and fast xz, so it takes seconds), scripts/gpu-check.sh unpacks it and runs the whole check
// with --device cpu --shapes small, and the JSON says what a GPU run must say: greedy tokens equal with the
// logits' gap, speeds of Hearth and of the PyTorch peer, SFT/RL steps of both, gradients against the CPU path.
// The PyTorch peer needs a python3 with torch: Debian's python3-torch is installed when none is found.
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'hearth-gpu-check-test-'));
let result: Record<string, any>;
let stdout = '';

/**
 * A python that imports torch; installs Debian's python3-torch (root, as CI runs) when there is none, with
 * OpenBLAS: on Debian's reference BLAS a 512-token prefill of the ~20M model took 38 s instead of 0.9.
 */
function torchPython(): string {
  const candidates = ['python3', '/usr/bin/python3'];
  const found = () => candidates.find((p) => spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0);
  let python = found();
  const openblas = existsSync('/usr/lib/x86_64-linux-gnu/openblas-openmp') || existsSync('/usr/lib/x86_64-linux-gnu/openblas-pthread');
  if (!python || !openblas) {
    const packages = [...(python ? [] : ['python3-torch']), 'libopenblas0-openmp'];
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...packages], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, timeout: 600_000 });
    python = found();
  }
  if (!python) throw new Error('no python3 imports torch, and apt-get install python3-torch did not fix that');
  return python;
}

/**
 * The bundle carries llama.cpp's Vulkan build only (its CPU run offloads no layers), and that build loads only where
 * Vulkan has a driver: on a machine without a GPU driver, SwiftShader's, from Debian's chromium (CI installs it for
 * the console's tests), as test/unit/runtime-webgpu.test.ts uses it.
 */
function vulkanDriver(): Record<string, string> {
  const swiftshader = '/usr/lib/chromium/vk_swiftshader_icd.json';
  const hasDriver = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d'].some((d) => existsSync(d) && readdirSync(d).some((f) => f.endsWith('.json')));
  if (process.env.VK_ICD_FILENAMES || process.env.VK_DRIVER_FILES || hasDriver || !existsSync(swiftshader)) return {};
  return { VK_ICD_FILENAMES: swiftshader };
}

// Asynchronous children: a synchronous one would block vitest's worker past its RPC timeout.
const run = promisify(execFile);

beforeAll(async () => {
  const python = torchPython();
  const bundle = join(dir, 'bundle');
  const built = await run(process.execPath, ['--import', 'tsx', join(repo, 'scripts/gpu-bundle.ts'), '--out', bundle, '--node', 'current', '--xz', '0'], { cwd: repo, maxBuffer: 1 << 24 });
  expect(built.stdout.trim().split('\n').at(-1)).toBe(bundle); // the folder on the last line
  try {
    const check = await run('bash', [join(repo, 'scripts/gpu-check.sh'), '--device', 'cpu', '--shapes', 'small', '--budget-s', '400', '--python', python], {
      cwd: dir, timeout: 480_000, maxBuffer: 1 << 24,
      env: { ...process.env, ...vulkanDriver(), HEARTH_GPU_BUNDLE: bundle, HEARTH_GPU_ROOT: join(dir, 'root'), HEARTH_GPU_WORK: join(dir, 'work'), OUT: join(dir, 'out') },
    });
    stdout = check.stdout;
  } catch (err) {
    throw new Error(`gpu-check.sh failed: ${(err as Error).message.slice(-3000)}`);
  }
  result = JSON.parse(readFileSync(join(dir, 'out', 'gpu-check.json'), 'utf8'));
}, 900_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('scripts/gpu-check.sh --device cpu from the bundle', () => {
  it('prints the table and writes every phase into gpu-check.json', () => {
    expect(stdout).toContain('| verdict');
    expect(result.device_asked).toBe('cpu');
    expect(result.shapes).toBe('small');
    expect(result.table.length).toBeGreaterThanOrEqual(14);
    expect(Object.keys(result.timings_s)).toEqual(expect.arrayContaining(['greedy', 'speed_main', 'training', 'speed_big', 'train_big', 'profile']));
  });

  it('greedy tokens on the device equal the CPU for stories260K and the generated model', () => {
    for (const g of [result.hearth.greedy_stories260K, result.hearth.greedy_main]) {
      expect(g.device_used).toBe('cpu');
      expect(g.tokens_equal).toBe(true);
      expect(g.device_tokens).toEqual(g.cpu_tokens);
      expect(g.max_abs_dlogit).toBeLessThan(1e-3);
    }
  });

  it('measures Hearth, PyTorch and llama.cpp on the same models', () => {
    for (const key of ['speed_main', 'speed_big']) {
      const h = result.hearth[key], p = result.pytorch[key], l = result.llama_cpp[key];
      for (const side of [h, p, l]) for (const k of ['prefill_512_tok_s', 'decode_1_tok_s', 'decode_8_tok_s']) expect(side[k], `${key} ${k}: ${JSON.stringify(side).slice(0, 300)}`).toBeGreaterThan(0);
      expect(h.load_s).toBeGreaterThan(0);
      expect(p.impl).toMatch(/transformers|plain torch/);
    }
    expect(result.hearth.profile_main.prefill_512.top.length).toBeGreaterThan(0);
  });

  it('trains SFT and RL steps on both sides, and the gradients match the CPU path', () => {
    for (const k of ['sft', 'rl']) {
      expect(result.hearth.train[k].tokens_per_second).toBeGreaterThan(0);
      expect(result.pytorch.train[k].tokens_per_second).toBeGreaterThan(0);
      // LoRA trains on the graph engine, which says where it ran and what crossed between host and device.
      expect(result.hearth.train[k]).toMatchObject({ engine: 'graph', device_used: 'cpu' });
      expect(result.hearth.train[k].host_device_bytes).toBeGreaterThan(0);
    }
    // The bundle carries koffi: the trainer keeps freed memory for reuse there as in the repository (glibc, linux-x64).
    expect(result.hearth.train.trainer.join('\n')).toContain('freed memory kept for reuse');
    // The big (Q4_K) model's LoRA step, from its store folder with the blocks kept.
    expect(result.hearth.train_big.sft).toMatchObject({ engine: 'graph', device_used: 'cpu' });
    expect(result.hearth.train_big.sft.tokens_per_second).toBeGreaterThan(0);
    expect(result.hearth.gradients.device).toMatchObject({ engine: 'graph', device_used: 'cpu' });
    expect(result.hearth.gradients.cpu.values).toBeGreaterThan(1000);
    expect(result.hearth.gradients.device.values).toBe(result.hearth.gradients.cpu.values);
    expect(result.hearth.gradients.rel_l2).toBeLessThan(1e-3);
    const verdicts = Object.fromEntries(result.table.map((r: { what: string; verdict: string }) => [r.what, r.verdict]));
    expect(Object.entries(verdicts).filter(([w]) => /greedy|gradients/.test(w)).every(([, v]) => v === 'met')).toBe(true);
  });

  it('ran from the unpacked bundle: its Node, the Vulkan loader, stories260K', () => {
    expect(existsSync(join(dir, 'root', 'node'))).toBe(true);
    expect(existsSync(join(dir, 'root', 'lib', 'libvulkan.so.1'))).toBe(true);
    expect(existsSync(join(dir, 'root', 'models', 'stories260K', 'stories260K.gguf'))).toBe(true);
  });
});
