// ONNX Runtime's MatMulNBits (MLAS) at real model shapes, in each form Hearth can give it a quantized weight:
// GFLOP/s per (bits, block, accuracy_level) at 1, 8 and 128 rows. This is the bound under Hearth's quantized
// serving: on 1B–8B models MatMulNBits is 75–90% of a step (ORT's profile, HEARTH_ORT_PROFILE), so a step
// cannot be faster than its MatMulNBits nodes at these rates.
//
//   npm run bench:kernels -- [--shapes 2048x5632,4096x14336] [--threads 2] [--rows 1,8,128]
//
// Also the sampler's cost per token over real vocabularies (32,000 Llama 2, 128,256 Llama 3, 151,936 Qwen), to
// set beside a decode step of the same model: sampling must stay a small share of it.
//
// Forms: 4-bit/32 is how Q4_0, Q4_1 and Q4_K are served as stored (exact); 8-bit/32 is Q5_0, Q5_1, Q5_K and
// Q8_0; 8-bit/16 is Q6_K; 4-bit/128 is HEARTH_WEIGHTS=q4 (re-quantized, a second rounding).
import * as ort from 'onnxruntime-node';
import { DataType, GraphBuilder } from '../src/runtime/onnx-proto.js';
import { logSumExp, sampleToken } from '../worker/inference/sampler.js';
import { defaultSamplingParams, type SamplingParams } from '../worker/inference/sampling-params.js';
import { createRng } from '../worker/inference/rng.js';
import { machineLabel, speedProbe } from './machine.js';

const args = process.argv.slice(2);
const flag = (name: string) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : undefined; };
const threads = Number(flag('threads') ?? 2);
const shapes = (flag('shapes') ?? '2048x5632,4096x14336').split(',').map((s) => s.split('x').map(Number) as [number, number]);
const rowsList = (flag('rows') ?? '1,8,128').split(',').map(Number);
const forms = [
  { name: '4bit_b32_acc4', bits: 4, block: 32, accuracy: 4 },
  { name: '4bit_b32_acc0', bits: 4, block: 32, accuracy: 0 },
  { name: '4bit_b128_acc4', bits: 4, block: 128, accuracy: 4 },
  { name: '8bit_b32_acc4', bits: 8, block: 32, accuracy: 4 },
  { name: '8bit_b16_acc4', bits: 8, block: 16, accuracy: 4 },
];
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** One MatMulNBits node over random codes and scales [N, K] (values do not change the kernel's speed). */
async function session(K: number, N: number, bits: number, block: number, accuracy: number): Promise<ort.InferenceSession> {
  const g = new GraphBuilder();
  const x = g.input('x', DataType.FLOAT, ['M', K]);
  const blocks = K / block;
  const packed = new Uint8Array(N * blocks * (block * bits / 8));
  for (let i = 0; i < packed.length; i++) packed[i] = (i * 2654435761) >>> 24;
  const scales = new Float32Array(N * blocks).map((_, i) => 0.01 + (i % 7) * 1e-3);
  const w = g.initializer('w', DataType.UINT8, [N, blocks, block * bits / 8], packed);
  const s = g.floats('s', [N * blocks], scales);
  g.node('MatMulNBits', [x, w, s], { outputs: ['y'], domain: 'com.microsoft', attrs: { K, N, bits, block_size: block, accuracy_level: accuracy } });
  g.output('y', DataType.FLOAT, ['M', N]);
  return ort.InferenceSession.create(g.toModelBytes('kernel'), {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', logSeverityLevel: 3,
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
}

async function gflops(s: ort.InferenceSession, M: number, K: number, N: number): Promise<number> {
  const x = new ort.Tensor('float32', new Float32Array(M * K).map((_, i) => Math.sin(i)), [M, K]);
  await s.run({ x });
  const t0 = performance.now();
  await s.run({ x });
  // Enough repetitions for ~0.3 s of work; the median run.
  const reps = Math.max(5, Math.min(200, Math.ceil(300 / (performance.now() - t0))));
  const times: number[] = [];
  for (let i = 0; i < reps; i++) { const t = performance.now(); await s.run({ x }); times.push(performance.now() - t); }
  times.sort((a, b) => a - b);
  return (2 * M * K * N) / (times[times.length >> 1] / 1000) / 1e9;
}

const result: Record<string, unknown> = { machine: machineLabel(), speed_probe_ms: speedProbe(), threads, ort: ort.env.versions?.common ?? 'unknown' };
const table: Record<string, Record<string, number>> = {};
for (const [K, N] of shapes) {
  for (const f of forms) {
    if (K % f.block) continue;
    const s = await session(K, N, f.bits, f.block, f.accuracy);
    for (const M of rowsList) (table[`${K}x${N}_m${M}`] ??= {})[f.name] = round(await gflops(s, M, K, N));
    await s.release();
  }
}
result.gflops = table;

/** Milliseconds per sampled token over logits of a real vocabulary, median of 30. */
function samplingMs(V: number, params: SamplingParams): number {
  // LM-like logits: Gaussian (σ 2.5) with a handful of tokens 8–12 above the rest (a top token of ~0.3–0.6).
  const rand = createRng(V);
  const logits = new Float32Array(V).map(() => 2.5 * Math.sqrt(-2 * Math.log(1 - rand.next())) * Math.cos(2 * Math.PI * rand.next()));
  for (let i = 0; i < 5; i++) logits[(i * 7919) % V] += 12 - i;
  const rng = createRng(1);
  // As in serving: the graph hands the sampler log Σ exp(logits) (its logits_lse output).
  const ctx = { promptIds: [1, 2, 3], outputIds: [4, 5], logSumExp: logSumExp(logits) };
  const times: number[] = [];
  for (let i = 0; i < 33; i++) { const t = performance.now(); sampleToken(logits, params, ctx, rng); if (i >= 3) times.push(performance.now() - t); }
  times.sort((a, b) => a - b);
  return round(times[times.length >> 1], 3);
}
const samplers: Record<string, Partial<SamplingParams>> = {
  greedy: { temperature: 0 },
  temperature: { temperature: 0.8 },
  top_p_0_95: { temperature: 0.8, topP: 0.95 },
  top_k_40: { temperature: 0.8, topK: 40 },
  top_p_penalties_logprobs_5: { temperature: 0.8, topP: 0.95, frequencyPenalty: 0.5, topLogprobs: 5 },
};
result.sampling_ms_per_token = Object.fromEntries([32000, 128256, 151936].map((V) =>
  [`vocab_${V}`, Object.fromEntries(Object.entries(samplers).map(([name, p]) => [name, samplingMs(V, defaultSamplingParams(p))]))]));
// 4-bit/32 (exact Q4 as stored) against the others, per shape and rows.
result.ratio_vs_4bit_b32_acc4 = Object.fromEntries(Object.entries(table).map(([k, v]) =>
  [k, Object.fromEntries(Object.entries(v).map(([f, g]) => [f, round(g / v['4bit_b32_acc4'], 2)]))]));
result.speed_probe_after_ms = speedProbe();
process.stdout.write(JSON.stringify(result) + '\n');
