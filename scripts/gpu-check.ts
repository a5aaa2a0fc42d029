// The GPU check (docs/gpu.md): on one machine and device, in one run, Hearth's inference and training against
// PyTorch (+ transformers, peft) and llama.cpp (node-llama-cpp) on the same generated models, printed as one
// table and written as <out>/gpu-check.json (after every phase, so a run cut short keeps what it measured).
// scripts/gpu-check.sh runs it from the bundle `npm run gpu:bundle` writes; here it also runs under tsx:
//
//   npx tsx scripts/gpu-check.ts [--device auto|cpu|cuda[:N]|webgpu[:N]] [--shapes full|small] [--out DIR]
//                                [--work DIR] [--python python3] [--budget-s 470] [--stories PATH]
//
// Every phase runs in a child process of this file (--phase), so a crash, a hung GPU call or a phase's
// memory stays in that phase; each child prints one JSON line. The device string goes to loadModel and to
// the training worker's createHandlers unchanged: choosing and falling back is theirs, and each phase
// reports the device its session or trainer actually used.
//
// Shapes: `full` is the issue's work (stories260K, TinyLlama-1.1B Q4_0, Llama-3.1-8B Q4_K, Qwen2.5-0.5B LoRA
// r8, the ~20M s20 for gradients); `small` stands smaller shapes in for each (the CPU test), with the same code.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { corpusPath, type ModelShape } from '../src/synthetic-models/tiny-model.js';
import type { GgufFileType } from '../src/synthetic-models/tiny-gguf.js';
import type { RlTrainingPayload, SftTrainingPayload } from '../src/protocol/training-task.js';
import { rlSettingsFromExperimentalConfig, type RlSettings } from '../src/protocol/rl-settings.js';

const here = dirname(fileURLToPath(import.meta.url));
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
const args = process.argv.slice(2);
const flag = (name: string, fallback?: string) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : fallback; };

// ---------------------------------------------------------------------------------------------- plan

interface ModelSpec { role: string; shape: ModelShape; type: GgufFileType; architecture?: 'llama' | 'qwen2' }
interface Plan {
  greedy: ModelSpec; // beside stories260K
  big: ModelSpec;
  train: ModelSpec;
  grads: ModelSpec;
  decodeTokens: number;
  /** Tokens of the SFT sequence; RL: groups × trajectories of prompt + completion tokens. */
  sftTokens: number;
  rl: { groups: number; trajectories: number; promptTokens: number; completionTokens: number };
  greedyTokens: number;
}

const PLANS: Record<'full' | 'small', Plan> = {
  full: {
    greedy: { role: '1.1B Q4_0', shape: '1b', type: 'Q4_0' },
    big: { role: '8B Q4_K', shape: '8b', type: 'Q4_K' },
    train: { role: '0.5B LoRA r8', shape: 'qwen0.5b', type: 'F32' },
    grads: { role: '~20M LoRA r8', shape: 's20', type: 'F32' },
    decodeTokens: 64, sftTokens: 512, rl: { groups: 2, trajectories: 4, promptTokens: 64, completionTokens: 64 }, greedyTokens: 32,
  },
  small: {
    greedy: { role: '~1M Q4_0 (for 1.1B)', shape: 'tiny', type: 'Q4_0' },
    big: { role: '~20M Q4_K (for 8B)', shape: 's20', type: 'Q4_K' },
    train: { role: '~1M qwen2 LoRA r8 (for 0.5B)', shape: 'tiny', type: 'F32', architecture: 'qwen2' },
    grads: { role: '~1M LoRA r8 (for ~20M)', shape: 'tiny', type: 'F32' },
    decodeTokens: 16, sftTokens: 128, rl: { groups: 2, trajectories: 2, promptTokens: 32, completionTokens: 32 }, greedyTokens: 16,
  },
};

// ---------------------------------------------------------------------------------------------- children

type Json = Record<string, any>;

/** Hearth's inference models are imported into a store (a GGUF's blocks stay quantized) and loaded by id. */
async function importInto(home: string, file: string, id: string): Promise<number> {
  const { importModel, getModel } = await import('../src/models/model-store.js');
  if (getModel(home, id)) return 0;
  const t = performance.now();
  await importModel(home, file, { id, ignoreMemory: true });
  return round((performance.now() - t) / 1000, 2);
}

/** GPU memory in use (MiB) as nvidia-smi reports it, or null where there is none. */
function gpuMemoryUsedMib(): number | null {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { encoding: 'utf8', timeout: 10_000 });
    return Number(out.trim().split('\n')[0]);
  } catch {
    return null;
  }
}

/**
 * The most GPU memory in use (MiB) while `stop` is pending, sampled by nvidia-smi every 200 ms in a child process
 * (the training steps are synchronous: this process could not sample them); null where there is no nvidia-smi.
 */
function gpuMemoryPeak(): { stop: () => Promise<number | null> } {
  let peak: number | null = null;
  let child: ReturnType<typeof spawn> | null = null;
  try {
    child = spawn('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits', '-lms', '200'], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.on('error', () => { child = null; });
    child.stdout!.on('data', (d: Buffer) => {
      for (const line of String(d).split('\n')) {
        const v = Number(line.trim());
        if (line.trim() && Number.isFinite(v)) peak = Math.max(peak ?? 0, v);
      }
    });
  } catch { child = null; }
  return {
    stop: async () => {
      if (child) { const c = child; await new Promise((r) => { c.once('close', r); c.kill('SIGTERM'); setTimeout(r, 2000); }); }
      return peak;
    },
  };
}

const idsPrompt = (n: number, vocab: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7919) % (vocab - 10)));

/** Greedy tokens and logits on the CPU and on the device, from the same prompt; where they part, and the largest logit gap before. */
async function greedyChild(spec: Json): Promise<Json> {
  const { loadModel } = await import('../src/runtime/load-model.js');
  const { argmax } = await import('../src/runtime/generate.js');
  await importInto(spec.home, spec.file, spec.id);
  const logs: string[] = [];
  const run = async (device: string) => {
    const m = await loadModel(spec.id, { home: spec.home, device, maxContext: 1024, log: (l) => { logs.push(l); process.stderr.write(`${l}\n`); } });
    const kv = m.runner.newSequence();
    const tokens: number[] = [];
    const logits: Float32Array[] = [];
    let next = idsPrompt(16, m.config.vocabSize);
    for (let i = 0; i < spec.tokens; i++) {
      const [row] = await m.runner.forward([{ tokens: next, kv }]);
      logits.push(row.slice());
      tokens.push(argmax(row));
      next = [tokens.at(-1)!];
    }
    kv.dispose();
    const used = m.runner.device;
    await m.runner.release();
    return { tokens, logits, device: used };
  };
  const cpu = await run('cpu');
  const dev = await run(spec.device);
  let firstDifference = -1, maxAbs = 0, scale = 0;
  for (let i = 0; i < cpu.tokens.length; i++) {
    // Logits are comparable while both have seen the same tokens: up to and including the first different pick.
    for (let j = 0; j < cpu.logits[i].length; j++) {
      maxAbs = Math.max(maxAbs, Math.abs(cpu.logits[i][j] - dev.logits[i][j]));
      scale = Math.max(scale, Math.abs(cpu.logits[i][j]));
    }
    if (cpu.tokens[i] !== dev.tokens[i]) { firstDifference = i; break; }
  }
  return {
    device_used: dev.device, load_log: logs.slice(0, 8), tokens: cpu.tokens.length, tokens_equal: firstDifference < 0, first_difference: firstDifference,
    max_abs_dlogit: Number(maxAbs.toPrecision(3)), max_abs_logit: round(scale, 2), cpu_tokens: cpu.tokens, device_tokens: dev.tokens,
  };
}

/** Import, load, then bench:peer's timings on the device; GPU memory after load and after the timings. */
async function speedChild(spec: Json): Promise<Json> {
  const { loadModel } = await import('../src/runtime/load-model.js');
  const { speeds } = await import('./engine-speeds.js');
  const before = gpuMemoryUsedMib();
  const import_s = await importInto(spec.home, spec.file, spec.id);
  const logs: string[] = [];
  const m = await loadModel(spec.id, { home: spec.home, device: spec.device, maxContext: 1024, log: (l) => { logs.push(l); process.stderr.write(`${l}\n`); } });
  const out: Json = {
    // The load's own lines: which device `auto` chose and why, how many nodes each provider runs.
    device_used: m.runner.device, load_log: logs.slice(0, 8), import_s, load_s: round(m.loadMs / 1000, 2), graph_s: round(m.graphMs / 1000, 2), session_s: round(m.sessionMs / 1000, 2),
    gpu_mem_before_mib: before, gpu_mem_loaded_mib: gpuMemoryUsedMib(),
  };
  type Seq = ReturnType<typeof m.runner.newSequence>;
  Object.assign(out, await speeds<Seq>(spec.decodeTokens, {
    newSeq: () => m.runner.newSequence(),
    run: async (tokens, kv) => { await m.runner.forward([{ tokens, kv }]); },
    batch: async (rows) => { await m.runner.forward(rows.map(([tokens, kv]) => ({ tokens, kv }))); },
    release: (kv) => kv.dispose(),
  }, { sameShapeWarmup: true }));
  out.gpu_mem_after_mib = gpuMemoryUsedMib();
  out.peak_rss_mb = Math.round(process.resourceUsage().maxRSS / 1024);
  await m.runner.release();
  return out;
}

/**
 * Where the time goes (ORT's profile, HEARTH_ORT_PROFILE): one 512-token prefill and one 8-row decode step,
 * each split by operator and by the provider that ran it (a CPU node inside a GPU graph shows here).
 */
async function profileChild(spec: Json): Promise<Json> {
  const { mkdtempSync, readdirSync } = await import('node:fs');
  const profDir = mkdtempSync(join(os.tmpdir(), 'hearth-gpu-prof-'));
  process.env.HEARTH_ORT_PROFILE = join(profDir, 'p');
  const { loadModel } = await import('../src/runtime/load-model.js');
  const { prompt } = await import('./engine-speeds.js');
  const m = await loadModel(spec.id, { home: spec.home, device: spec.device, maxContext: 1024 });
  const seq = m.runner.newSequence();
  await m.runner.forward([{ tokens: prompt(512), kv: seq }]);
  const seqs = Array.from({ length: 8 }, () => m.runner.newSequence());
  for (let s = 0; s < 8; s++) await m.runner.forward([{ tokens: prompt(16, s), kv: seqs[s] }]);
  await m.runner.forward(seqs.map((kv, s) => ({ tokens: [5 + s], kv })));
  await m.runner.forward(seqs.map((kv, s) => ({ tokens: [6 + s], kv })));
  const file = m.runner.session.endProfiling() as unknown as string | undefined;
  const path = file && existsSync(file) ? file : join(profDir, readdirSync(profDir)[0]);
  type Ev = { cat?: string; name: string; ts: number; dur: number; args?: { op_name?: string; provider?: string } };
  const events = JSON.parse(readFileSync(path, 'utf8')) as Ev[];
  rmSync(profDir, { recursive: true, force: true });
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const split = (run: Ev) => {
    const by = new Map<string, number>();
    let nodes = 0;
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < run.ts || e.ts > run.ts + run.dur) continue;
      const key = `${e.args?.op_name ?? '?'}@${(e.args?.provider ?? '?').replace('ExecutionProvider', '')}`;
      by.set(key, (by.get(key) ?? 0) + e.dur);
      nodes += e.dur;
    }
    const top = [...by.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([op, us]) => ({ op, ms: round(us / 1000, 2), share: round(us / nodes, 3) }));
    return { run_ms: round(run.dur / 1000, 2), nodes_ms: round(nodes / 1000, 2), top };
  };
  // Runs: the prefill, eight 16-token prompts, two 8-row steps (the second is the warm one).
  const out = { device_used: m.runner.device, prefill_512: split(runs[0]), decode_8: split(runs.at(-1)!) };
  await m.runner.release();
  return out;
}

/** What the trainer said about where it runs (its backend line, anything on the device), once each. */
function trainerLines(logs: string[]): string[] {
  return [...new Set(logs.filter((l) => /TF\.js backend|engine:|device|cuda|webgpu|gpu/i.test(l) && !/checkpoint step/.test(l)))].slice(0, 4);
}

/** Words from the generated models' corpus, for chat rows of about `tokens` tokens. */
function corpusText(tokens: number, offset: number): string {
  const words = readFileSync(corpusPath(), 'utf8').split(/\s+/).filter(Boolean);
  return Array.from({ length: Math.ceil(tokens / 1.5) }, (_, i) => words[(i * 7 + offset * 131) % words.length]).join(' ');
}

/**
 * SFT and RL jobs as the training worker runs them (`hearth worker --device`): createHandlers sets the device up
 * (the graph engine's providers, with its fallback to the CPU), the task becomes a job spec (specFromTask) and
 * runTrainingJob trains it, whose result says which engine trained, on which device, and the bytes its runs moved
 * between host and device. `kinds` are run in order, each twice (the second is reported) or once (`runs: 1`).
 */
async function trainChild(spec: Json): Promise<Json> {
  const { createHandlers, specFromTask } = await import('../worker/training/worker-handler.js');
  const { runTrainingJob } = await import('../worker/training/job.js');
  const logs: string[] = [];
  const handlers = await createHandlers(spec.device, (l) => logs.push(l));
  const root = spec.work as string;
  rmSync(root, { recursive: true, force: true }); // checkpoints of an earlier run in the same work folder
  mkdirSync(root, { recursive: true });
  const run = async (kind: 'sft' | 'rl', n: number): Promise<Json> => {
    let work: { kind: 'sft'; payload: SftTrainingPayload } | { kind: 'rl'; payload: RlTrainingPayload; rlSettings: RlSettings };
    if (kind === 'sft') {
      const file = join(root, `sft-${n}.jsonl`);
      writeFileSync(file, JSON.stringify({ messages: [{ role: 'user', content: corpusText(spec.sftTokens / 4, n) }, { role: 'assistant', content: corpusText((3 * spec.sftTokens) / 4, n + 1) }] }) + '\n');
      work = { kind: 'sft', payload: { resolved_data_path: file, config: { batch_size: 1, learning_rate: 1e-4 } } };
    } else {
      const { groups, trajectories, promptTokens, completionTokens } = spec.rl;
      const experimental_config = { allow_training_without_logprobs: true, learning_rate: 1e-5 };
      const payload: RlTrainingPayload = {
        trajectory_groups: Array.from({ length: groups }, (_, g) => ({
          trajectories: Array.from({ length: trajectories }, (_, t) => ({
            messages_and_choices: [{ role: 'user', content: corpusText(promptTokens, g) }, { finish_reason: 'stop', message: { role: 'assistant', content: corpusText(completionTokens, g * 31 + t) } }],
            reward: t % 2, additional_histories: [], metrics: {}, metadata: {}, logs: [],
          })),
          exceptions: [], metadata: {}, metrics: {}, logs: [],
        })),
        experimental_config,
      };
      work = { kind: 'rl', payload, rlSettings: rlSettingsFromExperimentalConfig(experimental_config) };
    }
    const events: Json[] = [];
    const outputDir = join(root, `${kind}-${n}-ckpt`);
    const memBefore = gpuMemoryUsedMib();
    const peak = gpuMemoryPeak();
    const t = performance.now();
    const result = await runTrainingJob(specFromTask({
      jobId: `gpu-check-${kind}-${n}`, ...work, entity: 'gpu-check', modelId: 'gpu-check', baseModel: 'gpu-check/base', baseModelDir: spec.dir,
      step: n, outputDir, initCheckpointDir: null, home: root,
    }), async (event) => {
      if (event.type === 'gradient_step') events.push(event.data);
      await new Promise((resolve) => setImmediate(resolve)); // as the worker's handler does
    }, { log: (l) => logs.push(l) });
    const jobS = (performance.now() - t) / 1000;
    const step = events.at(-1) ?? {};
    return {
      engine: result.engine.name, device_used: result.engine.device, tokens: step.num_tokens, tokens_per_second: round(step.tokens_per_second ?? NaN), job_s: round(jobS, 2), loss: step.loss,
      host_device_bytes: result.engine.hostDeviceBytes, host_device_bytes_last_step: result.engine.lastStepHostDeviceBytes, host_device_gb_per_s: round(result.engine.hostDeviceBytes / 1e9 / jobS, 2),
      gpu_mem_before_mib: memBefore, gpu_mem_peak_mib: await peak.stop(),
    };
  };
  const out: Json = { device_asked: spec.device };
  for (const kind of spec.kinds as ('sft' | 'rl')[]) {
    const first = await run(kind, 1);
    if (spec.runs === 1) { out[kind] = first; continue; }
    out[kind] = await run(kind, 2);
    (out.first ??= {})[kind] = first;
  }
  out.trainer = trainerLines(logs);
  await handlers.close?.();
  return out;
}

/**
 * LoRA r8 gradients of one micro-batch's SFT loss (the trainer's own model, loss and data layout) on this
 * process's training device, with B set to seeded values (fresh adapters have B = 0, which zeroes A's gradient).
 * The model is the one a job trains (buildJobModel: the graph engine for LoRA, over the base as stored).
 * Written as float32 to <out>.f32 with the variables' names and sizes in the JSON.
 */
async function gradsChild(spec: Json): Promise<Json> {
  const { createHandlers } = await import('../worker/training/worker-handler.js');
  const logs: string[] = [];
  await createHandlers(spec.device, (l) => logs.push(l));
  const tf = await import('@tensorflow/tfjs-core');
  const { initTrainingBackend } = await import('../worker/training/backend.js');
  const { buildJobModel } = await import('../worker/training/loop.js');
  const { buildMicroBatch, trainedPositions } = await import('../worker/training/data.js');
  const { weightedNll } = await import('../worker/training/losses.js');
  const { logprobsAt } = await import('../worker/training/token-logprobs.js');
  const { openModelWeights } = await import('../src/runtime/hf-model.js');
  const { mulberry32 } = await import('../worker/training/tensor-utils.js');
  const { trainingProviders } = await import('../worker/training/graph/graph-session.js');
  const backend = await initTrainingBackend({ log: (l) => logs.push(l) });
  const { config, source } = openModelWeights(spec.dir);
  const model = buildJobModel({ config, source, baseModelName: 'gpu-check', mode: 'lora' }, 0, (l) => logs.push(l));
  const { GraphLoraModel } = await import('../worker/training/graph/graph-model.js');
  const { frozenProductsDevice } = await import('../worker/training/frozen-linear.js');
  const engine = model instanceof GraphLoraModel ? 'graph' : 'tfjs';
  const random = mulberry32(7);
  for (const b of model.lora!.bT.values()) {
    const values = Float32Array.from({ length: b.size }, () => (random() * 2 - 1) * 0.05);
    b.assign(tf.tensor(values, b.shape));
  }
  const ids = Array.from({ length: spec.tokens + 1 }, (_, i) => 3 + ((i * 7919 + 11) % (config.vocabSize - 10)));
  const mb = buildMicroBatch([{ ids, lossMask: ids.map((_, i) => (i > 0 ? 1 : 0)) }], [0]);
  const at = trainedPositions(mb);
  const vars = model.trainableVariables();
  const { value, grads } = tf.variableGrads(() => weightedNll(logprobsAt(model, mb, at, true), new Float32Array(at.index.length).fill(1 / at.index.length)), vars);
  const parts = vars.map((v) => grads[v.name].dataSync() as Float32Array);
  const all = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) { all.set(p, o); o += p.length; }
  writeFileSync(`${spec.out}.f32`, all);
  return {
    device_asked: spec.device, engine, device_used: engine === 'graph' ? trainingProviders().device : frozenProductsDevice()?.device ?? 'cpu', backend: backend.name, gemm: backend.gemm,
    loss: value.dataSync()[0], variables: vars.length, values: all.length, trainer: trainerLines(logs),
  };
}

async function llamaChild(spec: Json): Promise<Json> {
  const { llamaCppSpeeds } = await import('./engine-speeds.js');
  return llamaCppSpeeds(spec.file, { threads: os.availableParallelism(), decodeTokens: spec.decodeTokens, gpu: spec.gpu, sameShapeWarmup: true });
}

const CHILDREN: Record<string, (spec: Json) => Promise<Json>> = { greedy: greedyChild, speed: speedChild, profile: profileChild, train: trainChild, grads: gradsChild, llama: llamaChild };

// ---------------------------------------------------------------------------------------------- parent

interface Ctx { device: string; shapes: 'full' | 'small'; plan: Plan; work: string; out: string; /** '' when none imports torch. */ python: string; deadline: number; result: Json; log: (l: string) => void }

/** Run a command with a time limit; its last stdout line is the JSON result (stderr is passed through with a prefix). */
function runJson(command: string, argv: string[], limitS: number, env: NodeJS.ProcessEnv = process.env): Promise<Json> {
  return new Promise((done) => {
    const child = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => { stderr += d; if (stderr.length > 20_000) stderr = stderr.slice(-10_000); });
    const timer = setTimeout(() => child.kill('SIGKILL'), Math.max(1, limitS) * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').at(-1) ?? '';
      try {
        if (code === 0) return done(JSON.parse(last));
      } catch { /* reported below */ }
      // The error a child died of, for the table (its last "…Error: message" line), and the stderr tail for the JSON.
      const thrown = stderr.split('\n').reverse().find((l) => /^\w*Error\b.*:/.test(l.trim()))?.trim();
      done({ error: signal === 'SIGKILL' ? `timed out after ${Math.round(limitS)} s` : thrown ?? `exit ${code ?? signal}`, stderr_tail: stderr.split('\n').slice(-12).join('\n') });
    });
  });
}

function phaseChild(ctx: Ctx, phase: string, spec: Json, capS: number, env: NodeJS.ProcessEnv = {}): Promise<Json> {
  const left = (ctx.deadline - Date.now()) / 1000;
  if (left < 10) return Promise.resolve({ skipped: 'out of time' });
  ctx.log(`${phase} ${spec.role ?? ''} (up to ${Math.round(Math.min(capS, left))} s)`);
  return runJson(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--phase', phase, '--spec', JSON.stringify(spec)], Math.min(capS, left), { ...process.env, ...env });
}

/** Free bytes on the work folder's file system (the full shapes need about 30 GB at their peak). */
function freeBytes(dir: string): number | null {
  try {
    const st = statfsSync(dir);
    return st.bavail * st.bsize;
  } catch {
    return null;
  }
}

function save(ctx: Ctx): void {
  writeFileSync(join(ctx.out, 'gpu-check.json'), JSON.stringify(ctx.result, null, 2) + '\n');
}

function environment(ctx: Ctx): Json {
  const env: Json = { node: process.version, platform: `${os.platform()} ${os.arch()}`, cpus: `${os.availableParallelism()} × ${os.cpus()[0]?.model?.trim()}`, memory_gib: Math.round(os.totalmem() / 2 ** 30) };
  try {
    const q = execFileSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total,memory.used', '--format=csv,noheader'], { encoding: 'utf8', timeout: 15_000 }).trim().split('\n')[0].split(',').map((s) => s.trim());
    Object.assign(env, { gpu: q[0], driver: q[1], gpu_memory_total: q[2], gpu_memory_used_at_start: q[3] });
  } catch {
    env.gpu = 'none (no nvidia-smi)';
  }
  try {
    env.onnxruntime_node = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.resolve('onnxruntime-node'))), '..', 'package.json'), 'utf8')).version;
  } catch { /* not found: left out */ }
  env.vulkan_loader = process.env.HEARTH_VULKAN_LOADER ?? 'system or none';
  void ctx;
  return env;
}

/** The models, generated by the project's generators into the work folder (kept across runs in the same folder). */
async function generate(ctx: Ctx, m: ModelSpec, forms: ('gguf' | 'hf')[]): Promise<Json> {
  const { writeGgufParallel, writeSyntheticHfFolder } = await import('../src/synthetic-models/synthetic-files.js');
  const { shapeConfig } = await import('../src/synthetic-models/tiny-model.js');
  const config = shapeConfig(m.shape, { architecture: m.architecture });
  const base = join(ctx.work, `${m.shape}${m.architecture ? `-${m.architecture}` : ''}`);
  const out: Json = { shape: m.shape, parameters: null };
  const threads = os.availableParallelism();
  if (forms.includes('gguf')) {
    const file = `${base}-${m.type}.gguf`;
    if (!existsSync(`${file}.done`)) {
      const t = performance.now();
      await writeGgufParallel(file, { config, type: m.type, seed: 1 }, { threads });
      writeFileSync(`${file}.done`, '');
      out.gguf_s = round((performance.now() - t) / 1000, 1);
    }
    out.gguf = file;
  }
  if (forms.includes('hf')) {
    // BF16 for the GPU peers (half the bytes); the CPU check keeps F32 (PyTorch's CPU bf16 matmuls are slow and Debian's torch may lack them).
    const dtype = ctx.device === 'cpu' ? 'F32' : 'BF16';
    const dir = `${base}-hf-${dtype}`;
    if (!existsSync(join(dir, '.done'))) {
      const t = performance.now();
      await writeSyntheticHfFolder(dir, config, { seed: 1, dtype, threads });
      writeFileSync(join(dir, '.done'), '');
      out.hf_s = round((performance.now() - t) / 1000, 1);
    }
    out.hf = dir;
  }
  const { llamaTensorSpecs } = await import('../src/runtime/gguf-llama-layout.js');
  out.parameters = llamaTensorSpecs(config).reduce((a, s) => a + s.shape.reduce((x, y) => x * y, 1), 0);
  return out;
}

/** llama.cpp's build for the device asked: Vulkan on any GPU (the bundle has no CUDA build: 159 MB), none for cpu. */
function llamaGpu(device: string): false | 'vulkan' {
  return device === 'cpu' ? false : 'vulkan';
}

function peerScript(): string {
  return join(here, 'gpu-peer.py');
}

/** The first of these pythons that imports torch (the GPU machine's python3; Debian's /usr/bin/python3 with python3-torch here). */
function findTorchPython(asked: string | undefined): string | null {
  for (const python of [asked, 'python3', '/usr/bin/python3']) {
    if (!python) continue;
    try {
      execFileSync(python, ['-c', 'import torch'], { stdio: 'ignore', timeout: 60_000 });
      return python;
    } catch { /* next */ }
  }
  return null;
}

function torchPeer(ctx: Ctx, task: Json, capS: number): Promise<Json> {
  const left = (ctx.deadline - Date.now()) / 1000;
  if (left < 10) return Promise.resolve({ skipped: 'out of time' });
  if (!ctx.python) return Promise.resolve({ error: 'no python3 that imports torch' });
  ctx.log(`pytorch ${task.task} ${task.role ?? ''} (up to ${Math.round(Math.min(capS, left))} s)`);
  const device = ctx.device === 'cpu' ? 'cpu' : 'cuda';
  // On a shared CPU, spinning OpenMP threads slowed PyTorch 3x (bench-train.ts); a GPU run keeps torch's defaults.
  const env = { ...process.env, PYTHONUNBUFFERED: '1', ...(device === 'cpu' ? { OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY ?? 'PASSIVE' } : {}) };
  return runJson(ctx.python, [peerScript(), JSON.stringify({ ...task, device })], Math.min(capS, left), env);
}

function relL2(a: Float32Array, b: Float32Array): number {
  let num = 0, den = 0;
  for (let i = 0; i < a.length; i++) { num += (a[i] - b[i]) ** 2; den += a[i] ** 2; }
  return Math.sqrt(num / den);
}

async function main(): Promise<void> {
  const phase = flag('phase');
  if (phase) {
    process.stdout.write(JSON.stringify(await CHILDREN[phase](JSON.parse(flag('spec')!))) + '\n');
    return;
  }
  const shapes = flag('shapes', 'full') as 'full' | 'small';
  if (!(shapes in PLANS)) throw new Error(`--shapes must be full or small, got ${shapes}`);
  const started = Date.now();
  const out = resolve(flag('out', process.env.OUT ?? '.gpu-check-out')!);
  const work = resolve(flag('work', join(os.tmpdir(), 'hearth-gpu-check'))!);
  mkdirSync(out, { recursive: true });
  mkdirSync(work, { recursive: true });
  const ctx: Ctx = {
    device: flag('device', 'auto')!, shapes, plan: PLANS[shapes], work, out, python: findTorchPython(flag('python')) ?? '',
    deadline: started + Number(flag('budget-s', '470')) * 1000, result: {},
    log: (l) => process.stderr.write(`[gpu-check ${Math.round((Date.now() - started) / 1000)}s] ${l}\n`),
  };
  const { plan } = ctx;
  // The bundle keeps stories260K beside the corpus; a checkout has it in ../shared (or shared/).
  const stories = flag('stories') ?? [join(dirname(corpusPath()), 'stories260K/stories260K.gguf'), resolve(here, '../../shared/models/stories260K/stories260K.gguf'), resolve(here, '../shared/models/stories260K/stories260K.gguf')]
    .find(existsSync);
  const r = ctx.result;
  const dropFolder = (dir: string | undefined) => { if (dir) rmSync(dir, { recursive: true, force: true }); };
  Object.assign(r, { check: 'hearth gpu-check', work_free_gb_at_start: round((freeBytes(work) ?? NaN) / 1e9, 1), out_dir: out, date: new Date().toISOString(), device_asked: ctx.device, shapes, environment: environment(ctx), generated: {}, hearth: {}, pytorch: {}, llama_cpp: {}, timings_s: {} });
  save(ctx);
  const mark = (name: string) => { r.timings_s[name] = round((Date.now() - started) / 1000, 1); save(ctx); };

  // 1. The greedy model, and equality on it and on stories260K.
  r.generated.greedy = await generate(ctx, plan.greedy, ['gguf', 'hf']);
  mark('generated_greedy');
  const home = join(work, 'home');
  if (stories) r.hearth.greedy_stories260K = await phaseChild(ctx, 'greedy', { role: 'stories260K', file: stories, home, id: 'check/stories260k', device: ctx.device, tokens: plan.greedyTokens }, 120);
  else r.hearth.greedy_stories260K = { error: 'stories260K.gguf not found (bundle models/ or ../shared/models/)' };
  r.hearth.greedy_main = await phaseChild(ctx, 'greedy', { role: plan.greedy.role, file: r.generated.greedy.gguf, home, id: 'check/greedy', device: ctx.device, tokens: plan.greedyTokens }, 150);
  mark('greedy');

  // 2. Speeds of the greedy model: Hearth, PyTorch, llama.cpp.
  r.hearth.speed_main = await phaseChild(ctx, 'speed', { role: plan.greedy.role, file: r.generated.greedy.gguf, home, id: 'check/greedy', device: ctx.device, decodeTokens: plan.decodeTokens }, 150);
  r.pytorch.speed_main = await torchPeer(ctx, { task: 'infer', role: plan.greedy.role, model_dir: r.generated.greedy.hf, decode_tokens: plan.decodeTokens }, 150);
  dropFolder(r.generated.greedy.hf); // its last reader: disk for the 8B files
  r.llama_cpp.speed_main = await phaseChild(ctx, 'llama', { role: plan.greedy.role, file: r.generated.greedy.gguf, gpu: llamaGpu(ctx.device), decodeTokens: plan.decodeTokens }, 90);
  mark('speed_main');

  // 3. Training: gradients against the CPU path, then SFT and RL steps against PyTorch + peft.
  r.generated.grads = await generate(ctx, plan.grads, ['hf']);
  r.generated.train = await generate(ctx, plan.train, ['hf']);
  mark('generated_training');
  const gradSpec = { role: plan.grads.role, dir: r.generated.grads.hf, tokens: 128 };
  const gCpu = await phaseChild(ctx, 'grads', { ...gradSpec, device: 'cpu', out: join(work, 'grads-cpu') }, 90);
  const gDev = await phaseChild(ctx, 'grads', { ...gradSpec, device: ctx.device, out: join(work, 'grads-device') }, 90);
  r.hearth.gradients = { cpu: gCpu, device: gDev };
  if (!gCpu.error && !gDev.error && !gCpu.skipped && !gDev.skipped) {
    const a = new Float32Array(readFileSync(join(work, 'grads-cpu.f32')).buffer.slice(0));
    const b = new Float32Array(readFileSync(join(work, 'grads-device.f32')).buffer.slice(0));
    r.hearth.gradients.rel_l2 = Number(relL2(a, b).toPrecision(3));
  }
  r.hearth.train = await phaseChild(ctx, 'train', { role: plan.train.role, dir: r.generated.train.hf, device: ctx.device, work: join(work, 'train'), sftTokens: plan.sftTokens, rl: plan.rl, kinds: ['sft', 'rl'] }, 200);
  const hearthSftTokens = r.hearth.train.sft?.tokens ?? plan.sftTokens;
  r.pytorch.train = await torchPeer(ctx, { task: 'train', role: plan.train.role, model_dir: r.generated.train.hf, sft_tokens: hearthSftTokens, rl: plan.rl }, 150);
  mark('training');

  // 4. The big model: generated last (the longest generation), then the three engines.
  r.generated.big = await generate(ctx, plan.big, ctx.device === 'cpu' && shapes === 'full' ? ['gguf'] : ['gguf', 'hf']);
  mark('generated_big');
  // PyTorch first, so that its bf16 folder (16 GB for 8B) is gone before Hearth's store copy and graph exist;
  // Hearth's graph for it is not kept (HEARTH_GRAPH_CACHE=off: another 6 GB). Disk at the peak: about 30 GB.
  if (r.generated.big.hf) r.pytorch.speed_big = await torchPeer(ctx, { task: 'infer', role: plan.big.role, model_dir: r.generated.big.hf, decode_tokens: plan.decodeTokens }, 180);
  dropFolder(r.generated.big.hf);
  r.hearth.speed_big = await phaseChild(ctx, 'speed', { role: plan.big.role, file: r.generated.big.gguf, home, id: 'check/big', device: ctx.device, decodeTokens: plan.decodeTokens }, 240, { HEARTH_GRAPH_CACHE: 'off' });
  r.llama_cpp.speed_big = await phaseChild(ctx, 'llama', { role: plan.big.role, file: r.generated.big.gguf, gpu: llamaGpu(ctx.device), decodeTokens: plan.decodeTokens }, 120);
  mark('speed_big');

  // 5. A LoRA SFT step on the big model as stored (Q4_K blocks kept: the graph engine dequantizes them in its
  // graphs), from the store folder the speed phase imported it into; the GPU memory it peaks at says the base
  // stayed on the device.
  // One job (its graphs built once for 8B take a while; the bar is where it runs, not its speed).
  if (r.generated.big.gguf && existsSync(r.generated.big.gguf)) {
    const { modelDir } = await import('../src/models/model-store.js');
    const imported = await importInto(home, r.generated.big.gguf, 'check/big').then(() => true, (err) => { r.hearth.train_big = { error: `import: ${(err as Error).message}` }; return false; });
    if (imported) {
      r.hearth.train_big = await phaseChild(ctx, 'train', { role: plan.big.role, dir: modelDir(home, 'check/big'), device: ctx.device, work: join(work, 'train-big'), sftTokens: plan.sftTokens, rl: plan.rl, kinds: ['sft'], runs: 1 }, 240);
      r.hearth.train_big.gguf_mib = Math.round(statSync(r.generated.big.gguf).size / 2 ** 20);
    }
  } else r.hearth.train_big = { error: 'no big GGUF was generated' };
  mark('train_big');

  // 6. Where Hearth's time goes on the greedy model (last: it only explains).
  r.hearth.profile_main = await phaseChild(ctx, 'profile', { role: plan.greedy.role, home, id: 'check/greedy', device: ctx.device }, 60);
  mark('profile');

  r.providers = providers(r);
  r.table = table(r, plan);
  save(ctx);
  process.stdout.write(formatTable(r) + '\n');
}

// ---------------------------------------------------------------------------------------------- table

interface Row { what: string; hearth: string; pytorch: string; llama_cpp: string; ratio: string; bar: string; verdict: 'met' | 'missed' | 'n/a' }

const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const show = (x: unknown, unit = '') => (num(x) !== null ? `${x}${unit}` : typeof x === 'string' ? x : '-');
const why = (side: Json | undefined) => (side?.error ? `error: ${String(side.error).slice(0, 60)}` : side?.skipped ? `skipped: ${side.skipped}` : '-');

function speedRows(r: Json, key: 'speed_main' | 'speed_big', role: string): Row[] {
  const h = r.hearth[key] ?? {}, p = r.pytorch[key] ?? {}, l = r.llama_cpp[key] ?? {};
  const rows: Row[] = [];
  const ratioRow = (what: string, k: string, bar: number | null) => {
    const hv = num(h[k]), pv = num(p[k]);
    const ratio = hv !== null && pv !== null ? round(hv / pv, 2) : null;
    rows.push({
      what: `${role} ${what}`, hearth: hv !== null ? show(hv) : why(h), pytorch: pv !== null ? show(pv) : why(p), llama_cpp: num(l[k]) !== null ? show(l[k]) : why(l),
      ratio: ratio !== null ? `${ratio}×` : '-', bar: bar !== null ? `≥ ${bar}× PyTorch` : '-', verdict: bar === null || ratio === null ? 'n/a' : ratio >= bar ? 'met' : 'missed',
    });
  };
  rows.push({ what: `${role} load s`, hearth: show(h.load_s), pytorch: show(p.load_s), llama_cpp: show(l.load_s), ratio: '-', bar: '-', verdict: 'n/a' });
  ratioRow('prefill 512 tok/s', 'prefill_512_tok_s', 0.5);
  ratioRow('decode 1 stream tok/s', 'decode_1_tok_s', 1.0);
  ratioRow('decode 8 streams tok/s', 'decode_8_tok_s', 2.0);
  return rows;
}

function table(r: Json, plan: Plan): Row[] {
  const rows: Row[] = [];
  for (const [key, role] of [['greedy_stories260K', 'stories260K'], ['greedy_main', plan.greedy.role]] as const) {
    const g = r.hearth[key] ?? {};
    rows.push({
      what: `${role} greedy = CPU (${g.tokens ?? '?'} tokens)`, hearth: g.error || g.skipped ? why(g) : `${g.tokens_equal ? 'equal' : `differs at ${g.first_difference}`}, max|Δlogit| ${g.max_abs_dlogit}`,
      pytorch: '-', llama_cpp: '-', ratio: '-', bar: 'equal', verdict: g.tokens_equal === true ? 'met' : g.tokens_equal === false ? 'missed' : 'n/a',
    });
  }
  rows.push(...speedRows(r, 'speed_main', plan.greedy.role));
  rows.push(...speedRows(r, 'speed_big', plan.big.role));
  const big = r.hearth.speed_big ?? {};
  const bigOnGpu = big.device_used && big.device_used !== 'cpu' && num(big.decode_1_tok_s) !== null;
  rows.push({
    what: `${plan.big.role} loads and decodes on the device`, hearth: big.error || big.skipped ? why(big) : `${big.device_used}, GPU memory ${show(big.gpu_mem_before_mib)} → ${show(big.gpu_mem_loaded_mib)} MiB`,
    pytorch: '-', llama_cpp: '-', ratio: '-', bar: 'on the GPU', verdict: r.device_asked === 'cpu' ? 'n/a' : bigOnGpu ? 'met' : 'missed',
  });
  const t = r.hearth.train ?? {}, pt = r.pytorch.train ?? {};
  for (const k of ['sft', 'rl'] as const) {
    const hv = num(t[k]?.tokens_per_second), pv = num(pt[k]?.tokens_per_second);
    const ratio = hv !== null && pv !== null ? round(hv / pv, 2) : null;
    rows.push({
      what: `${plan.train.role} ${k.toUpperCase()} step tok/s`, hearth: hv !== null ? `${hv} (${t[k].tokens} tok, ${trainedOn(t[k])})` : why(t), pytorch: pv !== null ? `${pv} (${pt[k].tokens} tok)` : why(pt), llama_cpp: '-',
      ratio: ratio !== null ? `${ratio}×` : '-', bar: '≥ 0.5× PyTorch', verdict: ratio === null ? 'n/a' : ratio >= 0.5 ? 'met' : 'missed',
    });
  }
  // The 8B Q4_K LoRA step in GPU memory: on the device, on the graph engine, and GPU memory rising by at least half
  // the stored base while it ran (where nvidia-smi reports it).
  const tb = r.hearth.train_big ?? {}, bs = tb.sft;
  const rise = num(bs?.gpu_mem_peak_mib) !== null && num(bs?.gpu_mem_before_mib) !== null ? bs.gpu_mem_peak_mib - bs.gpu_mem_before_mib : null;
  const onDevice = bs?.engine === 'graph' && bs.device_used !== 'cpu' && num(bs.tokens_per_second) !== null && (rise === null || rise >= 0.5 * (tb.gguf_mib ?? 0));
  rows.push({
    what: `${plan.big.role} LoRA SFT step in GPU memory`,
    hearth: bs && num(bs.tokens_per_second) !== null ? `${bs.tokens_per_second} tok/s (${bs.tokens} tok, ${trainedOn(bs)}), GPU memory ${show(bs.gpu_mem_before_mib)} → peak ${show(bs.gpu_mem_peak_mib)} MiB (base ${tb.gguf_mib} MiB)` : why(tb.error || tb.skipped ? tb : bs),
    pytorch: '-', llama_cpp: '-', ratio: '-', bar: 'on the GPU', verdict: r.device_asked === 'cpu' ? 'n/a' : onDevice ? 'met' : 'missed',
  });
  const g = r.hearth.gradients ?? {};
  const rel = num(g.rel_l2);
  rows.push({
    what: `${plan.grads.role} gradients vs CPU (rel L2)`, hearth: rel !== null ? `${rel} (${g.device?.engine} engine on ${g.device?.device_used})` : why(g.device?.error ? g.device : g.cpu), pytorch: '-', llama_cpp: '-', ratio: '-', bar: '< 1e-3',
    verdict: rel === null ? 'n/a' : rel < 1e-3 ? 'met' : 'missed',
  });
  return rows;
}

/** A training step's engine, the device it ran on and its host↔device traffic, for the table. */
function trainedOn(step: Json): string {
  return `${step.engine ?? '?'} engine on ${step.device_used ?? '?'}, ${num(step.host_device_bytes) !== null ? round(step.host_device_bytes / 2 ** 20, 1) : '?'} MiB host↔device`;
}

/** The execution providers that ran the profiled steps' heaviest nodes (a CPU entry in a GPU run is a fallback node). */
function providers(r: Json): string[] {
  const p = r.hearth.profile_main;
  if (!p?.prefill_512) return [];
  return [...new Set([...p.prefill_512.top, ...p.decode_8.top].map((t: { op: string }) => t.op.split('@')[1]))] as string[];
}

function formatTable(r: Json): string {
  const rows: Row[] = r.table;
  const env = r.environment;
  const used = [r.hearth.greedy_main?.device_used, r.hearth.speed_main?.device_used, r.hearth.speed_big?.device_used].filter(Boolean);
  const head = [
    `Hearth GPU check, ${r.date}: device asked ${r.device_asked}, inference ran on ${[...new Set(used)].join(', ') || '?'} (providers in the profile: ${providers(r).join(', ') || '?'}); training ran on ${[...new Set(['sft', 'rl'].map((k) => r.hearth.train?.[k]).filter(Boolean).map((x: Json) => `the ${x.engine} engine on ${x.device_used}`))].join(', ') || '?'} (${(r.hearth.train?.trainer ?? []).join(' | ') || '?'})`,
    `GPU ${env.gpu}, driver ${env.driver ?? '-'}, memory ${env.gpu_memory_total ?? '-'}; ${env.cpus}; node ${env.node}, onnxruntime-node ${env.onnxruntime_node ?? '?'}`,
    `PyTorch peer: ${r.pytorch.speed_main?.impl ?? why(r.pytorch.speed_main)} (torch ${r.pytorch.speed_main?.torch ?? '?'}, ${r.pytorch.speed_main?.dtype ?? '?'} on ${r.pytorch.speed_main?.device ?? '?'}); llama.cpp: ${r.llama_cpp.speed_main?.build === undefined ? why(r.llama_cpp.speed_main) : `node-llama-cpp ${r.llama_cpp.speed_main.build} build, ${r.llama_cpp.speed_main.gpu_device_names?.length ? `all layers on ${r.llama_cpp.speed_main.gpu_device_names.join(', ')}` : r.llama_cpp.speed_main.gpu ? 'no GPU device found: on the CPU' : 'on the CPU'}`}`,
  ];
  const cols: (keyof Row)[] = ['what', 'hearth', 'pytorch', 'llama_cpp', 'ratio', 'bar', 'verdict'];
  const width = cols.map((c) => Math.max(c.length, ...rows.map((x) => String(x[c]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(width[i])).join(' | ');
  return [...head, '', line(cols as string[]), width.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map((x) => line(cols.map((c) => String(x[c])))), '', `JSON: ${join(r.out_dir ?? '', 'gpu-check.json')}`].join('\n');
}

await main();
