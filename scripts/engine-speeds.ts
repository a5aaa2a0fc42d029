// The timings bench:peer and gpu-check take of any engine, on token ids: prefill of 128 and 512 tokens,
// decode of one stream and of eight; and llama.cpp's side of them through node-llama-cpp (CPU, Vulkan or
// CUDA build). Hearth's side is ModelRunner.forward; the peer's is node-llama-cpp's sequences.

/** A deterministic prompt of n token ids (offset varies it between streams). */
export const prompt = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => 3 + ((i * 7 + offset * 13) % 1000));
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

export interface Engine<K> {
  newSeq(): K;
  run(tokens: number[], seq: K): Promise<void>;
  /** One step over several sequences at once. */
  batch(rows: [number[], K][]): Promise<void>;
  release(seq: K): Promise<void> | void;
}

/**
 * Timings shared by both sides: prefill of 128 and 512 tokens, decode of one stream and of eight. With
 * `sameShapeWarmup` (GPUs, where a new shape compiles kernels or shaders) every timed shape runs once untimed
 * first; without it (bench:peer's CPU runs) a 16-token prefill warms up.
 */
export async function speeds<K>(decodeTokens: number, e: Engine<K>, opts: { sameShapeWarmup?: boolean } = {}): Promise<Record<string, number>> {
  const r: Record<string, number> = {};
  const same = opts.sameShapeWarmup ?? false;
  for (const n of [128, 512]) {
    const warm = e.newSeq();
    await e.run(prompt(same ? n : 16, n), warm); // warm-up
    await e.release(warm);
    const seq = e.newSeq();
    const t = performance.now();
    await e.run(prompt(n), seq);
    r[`prefill_${n}_tok_s`] = round(n / ((performance.now() - t) / 1000));
    await e.release(seq);
  }
  const seq = e.newSeq();
  await e.run(prompt(64), seq);
  if (same) await e.run([4], seq);
  let t = performance.now();
  for (let i = 0; i < decodeTokens; i++) await e.run([5 + i], seq);
  r.decode_1_tok_s = round(decodeTokens / ((performance.now() - t) / 1000));
  await e.release(seq);
  const seqs = Array.from({ length: 8 }, () => e.newSeq());
  for (let s = 0; s < 8; s++) await e.run(prompt(64, s), seqs[s]);
  if (same) await e.batch(seqs.map((k, s) => [[4 + s], k]));
  t = performance.now();
  for (let i = 0; i < decodeTokens; i++) await e.batch(seqs.map((k, s) => [[5 + ((i + s) % 100)], k]));
  r.decode_8_tok_s = round((8 * decodeTokens) / ((performance.now() - t) / 1000));
  for (const k of seqs) await e.release(k);
  return r;
}

/**
 * llama.cpp's side through node-llama-cpp: memory-mapped load (every layer offloaded when `gpu` names a
 * build), then the same timings. `gpu`: false for the CPU build, 'vulkan' or 'cuda' for those prebuilt
 * binaries (none is built or downloaded here: a missing one is an error).
 */
export async function llamaCppSpeeds(file: string, opts: { threads: number; decodeTokens: number; gpu: false | 'vulkan' | 'cuda'; sameShapeWarmup?: boolean }): Promise<Record<string, unknown>> {
  const { getLlama } = await import('node-llama-cpp');
  const get = (gpu: false | 'vulkan' | 'cuda') => getLlama({ gpu, build: 'never', skipDownload: true, progressLogs: false, logLevel: 'error' as never });
  let llama: Awaited<ReturnType<typeof get>>;
  let note: string | undefined;
  try {
    llama = await get(opts.gpu);
  } catch (err) {
    // Where only the Vulkan build is installed (the GPU bundle), the CPU run uses it with no layers offloaded.
    if (opts.gpu !== false || !/NoBinaryFound/.test(`${(err as Error).name} ${(err as Error).message} ${(err as Error).constructor?.name}`)) throw err;
    llama = await get('vulkan');
    note = 'no CPU build installed: the Vulkan build with 0 layers offloaded';
  }
  const offload = opts.gpu !== false;
  const t = performance.now();
  const model = await llama.loadModel({ modelPath: file, gpuLayers: offload ? 'max' : 0 });
  const out: Record<string, unknown> = { load_s: round((performance.now() - t) / 1000, 2), gpu: offload ? llama.gpu : false, build: llama.gpu || 'cpu', gpu_layers: model.gpuLayers, ...(note ? { note } : {}) };
  if (offload && llama.gpu) out.gpu_device_names = await llama.getGpuDeviceNames();
  const context = await model.createContext({ contextSize: 8 * 1024, batchSize: 512, threads: opts.threads, sequences: 8 });
  type Seq = ReturnType<typeof context.getSequence>;
  Object.assign(out, await speeds<Seq>(opts.decodeTokens, {
    newSeq: () => context.getSequence(),
    run: async (tokens, seq) => { await seq.evaluateWithoutGeneratingNewTokens(tokens as never); },
    // Eight sequences' evaluations issued together are batched by node-llama-cpp into one llama_decode.
    batch: async (rows) => { await Promise.all(rows.map(([tokens, seq]) => seq.evaluateWithoutGeneratingNewTokens(tokens as never))); },
    release: (seq) => seq.dispose(),
  }, { sameShapeWarmup: opts.sameShapeWarmup }));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return out;
}
