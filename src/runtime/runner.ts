// ModelRunner: one ONNX Runtime session over the decoder graph, plus the batching of per-sequence
// KV caches. `session.run` blocks the calling thread, so run this inside a worker thread/process.
//
// forward() takes any mix of sequences (different cached lengths, different numbers of new tokens)
// and returns logits per sequence. Every layout is right-padded: row b's cache holds its valid
// positions first and (masked) spare room after. Rows with different numbers of new tokens run as one
// packed run where the graph allows it (packsRows), else in groups of equal counts. The graph returns only the new tokens' keys/values,
// which are appended in JS; the past is fed to ORT without copying. A batch's caches stay packed in
// one [B, KV, P, hd] tensor per layer for as long as the same sequences are decoded together.
import os from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import type { ModelConfig } from './model-config.js';
import { cacheHeadDim, decodeStepInPlace, decodesInPlace, type AttentionKind } from './llama-graph.js';
import { BatchKv, KV_HEADROOM, SequenceKv } from './kv-cache.js';
import { KvBlock, ResidentSequenceKv, type KvOps } from './resident-kv.js';

/** A sequence's cache: in host memory (SequenceKv), or resident where the session computes (ResidentSequenceKv). */
export type SequenceCache = SequenceKv | ResidentSequenceKv;
import { LORA_GROUPS, loraGroupDims, type LoraAdapter } from './lora.js';
import { formatDevice, parseDevice, type DeviceName } from '../domain/device-name.js';
import { providerError } from './device-choice.js';
import { deviceFaultOf, type DeviceFaultError } from './device-fault.js';
import { injectedError } from './fault-points.js';

export interface ForwardItem {
  /** New tokens to append (a prompt chunk, or one token when decoding). */
  tokens: number[];
  /** The sequence's cache (from newSequence()); it is extended with the new tokens' keys/values. */
  kv: SequenceCache;
  /** LoRA adapter for this sequence (runner loaded with `lora: true`); null/absent = base model. */
  adapter?: LoraAdapter | null;
}

export interface ForwardOptions {
  /** Return logits for every new token ([S_b × V] per sequence) instead of the last one ([V]). */
  allLogits?: boolean;
}

/** One sequence's output of a forward step. */
export interface ForwardRow {
  logits: Float32Array;
  /** log Σ exp(logits) of the last position, from the graph (NaN with allLogits or a graph without it). */
  logSumExp: number;
  /** The final-norm hidden state at the last position ([hiddenSize], a view), or null from a graph without it. */
  hidden: Float32Array | null;
}

export interface SessionSettings {
  /** 'cpu' (default), 'cuda:N' or 'webgpu:0' (see src/domain/device-name.ts; 'auto' is resolved by the worker first). */
  device?: string;
  intraOpThreads?: number;
  /** Called with a human-readable line when something about the session is worth logging. */
  log?: (line: string) => void;
  /** Profile the session's runs into this folder until endProfiling() (to read node placement; see placement.ts). */
  profileDir?: string;
  /**
   * Outputs to leave in GPU memory (IO binding; a resident KV cache's present, see resident-kv.ts). Only the WebGPU
   * provider can: onnxruntime-node binds device outputs to WebGPU buffers only, so CUDA outputs come to the host.
   */
  deviceOutputs?: string[];
}

/** The execution providers for a device: the GPU's provider first, the CPU for the nodes it has no kernel for. */
export function executionProvidersFor(device: DeviceName): ort.InferenceSession.ExecutionProviderConfig[] {
  if (device.kind === 'cuda') return [{ name: 'cuda', deviceId: device.index } as ort.InferenceSession.ExecutionProviderConfig, 'cpu'];
  if (device.kind === 'webgpu') return ['webgpu', 'cpu'];
  return ['cpu'];
}

/**
 * A session over graph bytes, or over a graph file (whose external data ONNX Runtime reads beside it).
 * A GPU device whose provider does not load falls back to the CPU with a log line (the returned device says
 * which was used); workers decide their device before loading (src/runtime/device-choice.ts).
 */
export async function createSession(model: Uint8Array | string, settings: SessionSettings = {}): Promise<{ session: ort.InferenceSession; device: string }> {
  const create = (options: ort.InferenceSession.SessionOptions) =>
    typeof model === 'string' ? ort.InferenceSession.create(model, options) : ort.InferenceSession.create(model, options);
  const base: ort.InferenceSession.SessionOptions = {
    // ORT's own default: one thread per core. (Several workers on one host: set HEARTH_INTRA_OP_THREADS.)
    intraOpNumThreads: settings.intraOpThreads ?? os.availableParallelism(),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    logSeverityLevel: Number(process.env.HEARTH_ORT_LOG_SEVERITY ?? 3) as 0 | 1 | 2 | 3 | 4, // errors only
    // Spin-waiting threads fight neighbours on small machines; the notes measured 3-5x slowdowns.
    // A host that only serves (no training worker beside it) may turn it on: HEARTH_ORT_SPIN=1.
    extra: { session: { intra_op: { allow_spinning: process.env.HEARTH_ORT_SPIN === '1' ? '1' : '0' } } },
    // Developer tool: ORT's per-node timing profile (JSON) written under this path prefix at endProfiling().
    ...(process.env.HEARTH_ORT_PROFILE ? { enableProfiling: true, profileFilePrefix: process.env.HEARTH_ORT_PROFILE } : {}),
    ...(settings.profileDir ? { enableProfiling: true, profileFilePrefix: join(settings.profileDir, 'placement') } : {}),
  };
  const device = parseDevice(settings.device ?? 'cpu');
  const name = formatDevice(device);
  if (device.kind !== 'cpu') {
    try {
      if (device.kind === 'webgpu' && device.index !== 0) throw new Error('only webgpu:0 can be selected (ONNX Runtime picks the first adapter)');
      const onDevice = device.kind === 'webgpu' && settings.deviceOutputs?.length;
      const session = await create({
        ...base, executionProviders: executionProvidersFor(device),
        ...(onDevice ? { preferredOutputLocation: Object.fromEntries(settings.deviceOutputs!.map((o) => [o, 'gpu-buffer' as const])) } : {}),
      });
      return { session, device: name };
    } catch (err) {
      const provider = device.kind === 'cuda' ? 'CUDA' : 'WebGPU';
      settings.log?.(`${provider} execution provider unavailable for ${name} (${providerError(err)}); using CPU`);
    }
  }
  const session = await create({ ...base, executionProviders: ['cpu'] });
  return { session, device: 'cpu' };
}

/** Cumulative time split, so callers can see the overhead outside ORT (`totalMs - ortMs`). */
export interface RunnerTiming {
  calls: number;
  /** Wall time inside session.run. */
  ortMs: number;
  /** Wall time of whole forward() calls (feeds + run + cache bookkeeping). */
  totalMs: number;
  /** Runs that took the graph's in-place decode form (see decodeStepInPlace). */
  inPlaceDecodeCalls: number;
  /** Runs of packed rows (mixed steps: rows with different numbers of new tokens, see packsRows). */
  packedCalls: number;
}

export class ModelRunner {
  private readonly vocab: number;
  /** Head size of the KV tensors (GQA pads small heads to a multiple of 16). */
  readonly cacheHeadDim: number;
  readonly timing: RunnerTiming = { calls: 0, ortMs: 0, totalMs: 0, inPlaceDecodeCalls: 0, packedCalls: 0 };
  /** Single-token rows may run the graph's in-place form (decodeStepInPlace), which takes an explicit [B, P + 1] mask. */
  private readonly decodesInPlace: boolean;
  /**
   * The graph runs rows with different numbers of new tokens in one run, packed (decoder-packed-rows.ts's packedRows;
   * the graphs that have the in-place decode form): decoding rows and prompt chunks share one pass over the
   * weights, and no row is padded in the projections and MLP.
   */
  readonly packsRows: boolean;
  constructor(
    readonly session: ort.InferenceSession,
    readonly config: ModelConfig,
    readonly attention: AttentionKind,
    /** Longest context (rotary table size). */
    readonly maxPositions: number,
    readonly device: string,
    /** The graph takes per-row LoRA inputs (see lora.ts). */
    readonly lora = false,
    /** The graph was built with residentKv and the session leaves its present outputs on the device (resident-kv.ts). */
    private readonly residentKv: KvOps | null = null,
  ) {
    this.vocab = config.vocabSize;
    this.cacheHeadDim = cacheHeadDim(config, attention);
    this.decodesInPlace = !residentKv && decodesInPlace(config, attention);
    this.packsRows = this.decodesInPlace;
  }

  /** Whether caches stay where the session computes (GPU memory on webgpu:0) between steps. */
  get kvResident(): boolean {
    return this.residentKv !== null;
  }

  /** A fresh, empty cache for one sequence. */
  newSequence(): SequenceCache {
    if (this.residentKv) return new ResidentSequenceKv();
    return new SequenceKv(this.config.numLayers, this.config.numKvHeads, this.cacheHeadDim);
  }

  async forward(items: ForwardItem[], opts: ForwardOptions = {}): Promise<Float32Array[]> {
    return (await this.forwardRows(items, opts)).map((r) => r.logits);
  }

  /** forward(), with each row's log Σ exp(logits) as the graph computed it (what a sampler needs for logprobs). */
  async forwardRows(items: ForwardItem[], opts: ForwardOptions = {}): Promise<ForwardRow[]> {
    if (items.length === 0) return [];
    for (const it of items) {
      if (it.tokens.length === 0) throw new Error('forward: every sequence needs at least one new token');
      if (it.kv.length + it.tokens.length > this.maxPositions)
        throw new Error(`context length ${it.kv.length + it.tokens.length} exceeds the model's maximum of ${this.maxPositions}`);
    }
    if (items.length > 1 && this.packsRows && !opts.allLogits && mixedRows(items)) {
      // One packed run per adapter: the LoRA inputs hold one adapter per row of input_ids, and packed rows are one row.
      const byAdapter = new Map<LoraAdapter | null, number[]>();
      items.forEach((it, i) => byAdapter.set(it.adapter ?? null, [...(byAdapter.get(it.adapter ?? null) ?? []), i]));
      if (byAdapter.size === 1) return this.timed(() => this.forwardBatch(items, opts, true));
      const out: ForwardRow[] = new Array(items.length);
      for (const idx of byAdapter.values()) {
        const res = await this.forwardRows(idx.map((i) => items[i]), opts);
        idx.forEach((i, j) => (out[i] = res[j]));
      }
      return out;
    }
    // GroupQueryAttention (right-padded) needs the same number of new tokens in every row, and ORT
    // refuses several new tokens on top of a cache when batch_size > 1: split into runnable groups.
    // The explicit-mask graphs can run any mix, but every row is padded to the longest: decoding rows
    // next to a 64-token prompt chunk would cost 64 positions each, so they run apart from prompt chunks.
    if (items.length > 1) {
      const groups = new Map<string, number[]>();
      items.forEach((it, i) => {
        const n = it.tokens.length;
        const key = this.attention !== 'gqa' ? (n === 1 ? 'decode' : 'chunks') : n > 1 && it.kv.length > 0 ? `alone-${i}` : `n-${n}`;
        groups.set(key, [...(groups.get(key) ?? []), i]);
      });
      if (groups.size > 1) {
        const out: ForwardRow[] = new Array(items.length);
        for (const idx of groups.values()) {
          const res = await this.forwardRows(idx.map((i) => items[i]), opts);
          idx.forEach((i, j) => (out[i] = res[j]));
        }
        return out;
      }
    }
    if (this.residentKv) return this.timed(() => this.forwardResident(items, opts));
    return this.timed(() => (items.length === 1 ? this.forwardOne(items[0], opts) : this.forwardBatch(items, opts, false)));
  }

  private async timed(run: () => Promise<ForwardRow[]>): Promise<ForwardRow[]> {
    const t0 = performance.now();
    const result = await run();
    this.timing.calls++;
    this.timing.totalMs += performance.now() - t0;
    return result;
  }

  /** Told of a device fault (the device lost or out of memory) before the failing step throws it. */
  onDeviceFault: ((fault: DeviceFaultError) => void) | null = null;

  private async run(feeds: Record<string, ort.Tensor>): Promise<ort.InferenceSession.ReturnType> {
    const t0 = performance.now();
    let out: ort.InferenceSession.ReturnType;
    try {
      const injected = injectedError('inference-run-error');
      if (injected !== null) throw new Error(injected);
      out = await this.session.run(feeds);
    } catch (err) {
      const fault = deviceFaultOf(err, this.device);
      if (!fault) throw err;
      this.onDeviceFault?.(fault);
      throw fault;
    }
    this.timing.ortMs += performance.now() - t0;
    return out;
  }

  private async forwardOne(item: ForwardItem, opts: ForwardOptions): Promise<ForwardRow[]> {
    const kv = item.kv as SequenceKv;
    kv.batch?.detach(kv); // a sequence leaving a batch takes its row with it
    const S = item.tokens.length, L = kv.length, P = kv.capacity;
    const logits = await this.runPadded([item], [L], P, (i, kind) => (kind === 'key' ? kv.keys[i] : kv.values[i]), opts, false, (newK, newV) => {
      kv.append(newK, newV, 0, S, 0, S);
    });
    return logits;
  }

  private async forwardBatch(items: ForwardItem[], opts: ForwardOptions, packed: boolean): Promise<ForwardRow[]> {
    const S = Math.max(...items.map((it) => it.tokens.length));
    // Rows hold what each row will have after this run: a prompt chunk's row is short, so sizing every row
    // by the longest cache plus the longest chunk resized the whole batch back and forth on mixed steps.
    const batch = this.batchFor(items.map((it) => it.kv as SequenceKv), Math.max(...items.map((it) => it.kv.length + it.tokens.length)));
    // The run takes rows in the batch's order; results go back in the caller's.
    const index = new Map(items.map((it, i) => [it.kv as SequenceKv, i]));
    const order = batch.rows.map((s) => index.get(s)!);
    const rows = order.map((i) => items[i]);
    const lengths = rows.map((it) => it.kv.length);
    const out = await this.runPadded(rows, lengths, batch.P, (i, kind) => (kind === 'key' ? batch.keys[i] : batch.values[i]), opts, packed, (newK, newV) => {
      const need = Math.max(...rows.map((it, b) => lengths[b] + it.tokens.length));
      if (need > batch.P) batch.resize(need + KV_HEADROOM);
      rows.forEach((it, b) => batch.append(b, newK, newV, S, S - it.tokens.length, it.tokens.length));
    });
    const result: ForwardRow[] = new Array(items.length);
    order.forEach((i, b) => (result[i] = out[b]));
    return result;
  }

  /**
   * A batch holding exactly `seqs`, with rows of at least `need` positions. Built on the batch that
   * already holds most of them: only sequences joining or leaving are copied.
   */
  private batchFor(seqs: SequenceKv[], need: number): BatchKv {
    const members = new Map<BatchKv, number>();
    for (const s of seqs) if (s.batch) members.set(s.batch, (members.get(s.batch) ?? 0) + 1);
    let batch: BatchKv | null = null;
    for (const [b, n] of members) if (!batch || n > members.get(batch)!) batch = b;
    if (!batch) return BatchKv.pack(seqs, need + KV_HEADROOM);
    const wanted = new Set(seqs);
    for (const s of [...batch.rows]) if (!wanted.has(s)) batch.detach(s);
    for (const s of seqs) if (s.batch && s.batch !== batch) s.batch.detach(s);
    // Keep the row length near what the rows need: every graph form pays per step for all P positions.
    if (need > batch.P || batch.P > need + 2 * KV_HEADROOM) batch.resize(need + KV_HEADROOM);
    for (const s of seqs) if (s.batch !== batch) batch.add(s);
    return batch;
  }

  /**
   * One ORT run over right-padded caches: row b has lengths[b] valid positions out of P; its new
   * tokens are right-aligned in the [B, S] input so every row's last token is at S − 1. Packed
   * (graphs with packsRows): the new tokens are fed as one row [1, N], row after row, with the same
   * explicit mask, and the graph pads them into rows for attention only.
   */
  private async runPadded(
    items: ForwardItem[],
    lengths: number[],
    P: number,
    past: (layer: number, kind: 'key' | 'value') => Float32Array,
    opts: ForwardOptions,
    packed: boolean,
    store: (newKeys: Float32Array[], newValues: Float32Array[]) => void,
  ): Promise<ForwardRow[]> {
    const { numLayers, numKvHeads: KV } = this.config;
    const hd = this.cacheHeadDim;
    const B = items.length;
    const { feeds, counts, S } = this.tokenFeeds(items, lengths, P, opts, packed);
    for (let i = 0; i < numLayers; i++) {
      feeds[`past_key_values.${i}.key`] = new ort.Tensor('float32', past(i, 'key').subarray(0, B * KV * P * hd), [B, KV, P, hd]);
      feeds[`past_key_values.${i}.value`] = new ort.Tensor('float32', past(i, 'value').subarray(0, B * KV * P * hd), [B, KV, P, hd]);
    }
    const out = await this.run(feeds);
    store(
      Array.from({ length: numLayers }, (_, i) => out[`new_key_values.${i}.key`].data as Float32Array),
      Array.from({ length: numLayers }, (_, i) => out[`new_key_values.${i}.value`].data as Float32Array),
    );
    return this.logitRows(out, items, counts, S, opts);
  }

  /**
   * The token inputs of one run over right-padded caches of P positions (see runPadded): ids, mask, positions,
   * logits to keep and the LoRA inputs; the caller adds the past.
   */
  private tokenFeeds(items: ForwardItem[], lengths: number[], P: number, opts: ForwardOptions, packed: boolean): { feeds: Record<string, ort.Tensor>; counts: number[]; S: number } {
    const B = items.length;
    const counts = items.map((it) => it.tokens.length);
    const S = Math.max(...counts);
    // Mask width. Explicit-mask graphs: P cache slots, then the S new positions. GroupQueryAttention
    // reads only each row's count of ones (= its total length) and the width (= the longest total,
    // which must equal S for a first prompt), and places new tokens itself.
    const inPlace = !packed && this.decodesInPlace && decodeStepInPlace(B, S, P);
    if (inPlace) this.timing.inPlaceDecodeCalls++;
    if (packed) this.timing.packedCalls++;
    const gqa = this.attention === 'gqa' && !inPlace && !packed;
    const T = gqa ? Math.max(...lengths.map((L, b) => L + counts[b])) : P + S;
    // Row b's first new token: at b·S + (S − count) in the padded input, after the earlier rows' tokens when packed.
    const starts = packed ? counts.map((_, b) => counts.slice(0, b).reduce((a, c) => a + c, 0)) : counts.map((c, b) => b * S + S - c);
    const N = packed ? starts[B - 1] + counts[B - 1] : B * S;
    const ids = new BigInt64Array(N);
    const pos = new BigInt64Array(N);
    const mask = new BigInt64Array(B * T);
    items.forEach((it, b) => {
      const offset = S - counts[b];
      it.tokens.forEach((t, j) => { ids[starts[b] + j] = BigInt(t); pos[starts[b] + j] = BigInt(lengths[b] + j); });
      if (gqa) mask.fill(1n, b * T, b * T + lengths[b] + counts[b]);
      else {
        mask.fill(1n, b * T, b * T + lengths[b]);
        mask.fill(1n, b * T + P + offset, (b + 1) * T);
      }
    });
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', ids, packed ? [1, N] : [B, S]),
      attention_mask: new ort.Tensor('int64', mask, [B, T]),
      position_ids: new ort.Tensor('int64', pos, packed ? [1, N] : [B, S]),
      num_logits_to_keep: new ort.Tensor('int64', BigInt64Array.of(opts.allLogits ? BigInt(S) : 1n), [1]),
      ...this.loraFeeds(packed ? [items[0]] : items),
    };
    return { feeds, counts, S };
  }

  /** Each row's logits (views into the run's output) and log Σ exp. */
  private logitRows(out: ort.InferenceSession.ReturnType, items: ForwardItem[], counts: number[], S: number, opts: ForwardOptions): ForwardRow[] {
    const B = items.length;
    const logits = out.logits.data as Float32Array;
    const rows = out.logits.dims[1];
    const lse = out.logits_lse && !opts.allLogits ? (out.logits_lse.data as Float32Array) : null;
    const V = this.vocab;
    const logSumExp = (b: number) => (lse ? lse[b * rows + rows - 1] : NaN);
    const hiddenAll = out.hidden ? (out.hidden.data as Float32Array) : null;
    const D = this.config.hiddenSize;
    const hidden = (b: number) => (hiddenAll ? hiddenAll.subarray((b * rows + rows - 1) * D, (b * rows + rows) * D) : null);
    if (B === 1 && (!opts.allLogits || counts[0] === rows)) return [{ logits, logSumExp: logSumExp(0), hidden: hidden(0) }];
    return items.map((it, b) => {
      const n = opts.allLogits ? counts[b] : 1;
      // Views, not copies: the output buffer is fresh per run and the sampler never writes to logits.
      return { logits: logits.subarray((b * rows + rows - n) * V, (b * rows + rows) * V), logSumExp: logSumExp(b), hidden: hidden(b) };
    });
  }

  /**
   * One run with the cache resident on the device (resident-kv.ts): the rows' past is the block they form
   * (or one gathered on the device), and the run's present outputs, left on the device, become their block.
   */
  private async forwardResident(items: ForwardItem[], opts: ForwardOptions): Promise<ForwardRow[]> {
    const ops = this.residentKv!;
    const seqs = items.map((it) => it.kv as ResidentSequenceKv);
    if (new Set(seqs).size !== seqs.length) throw new Error('forward: a sequence appears twice in one batch');
    const lengths = seqs.map((s) => s.length);
    const past = await ops.assemble(seqs, 1);
    const { feeds, counts, S } = this.tokenFeeds(items, lengths, past.positions, opts, false);
    for (let i = 0; i < this.config.numLayers; i++) {
      feeds[`past_key_values.${i}.key`] = past.tensors[2 * i];
      feeds[`past_key_values.${i}.value`] = past.tensors[2 * i + 1];
    }
    const out = await this.run(feeds);
    const present = new KvBlock(Array.from({ length: 2 * this.config.numLayers }, (_, j) => out[`present.${j >> 1}.${j & 1 ? 'value' : 'key'}`]));
    seqs.forEach((s, b) => {
      s.moveTo(present, b);
      s.length += counts[b];
    });
    past.disposeIfUnused();
    return this.logitRows(out, items, counts, S, opts);
  }

  private loraCache: { adapters: (LoraAdapter | null)[]; feeds: Record<string, ort.Tensor> } | null = null;

  /** LoRA inputs for a batch: each group's rank is the largest in the batch; rows pad with zeros. */
  private loraFeeds(items: ForwardItem[]): Record<string, ort.Tensor> {
    if (!this.lora) {
      if (items.some((it) => it.adapter)) throw new Error('this model was loaded without LoRA support (load it with lora: true)');
      return {};
    }
    const adapters = items.map((it) => it.adapter ?? null);
    const c = this.loraCache;
    if (c && c.adapters.length === adapters.length && c.adapters.every((a, i) => a === adapters[i])) return c.feeds;
    const B = items.length;
    const dims = loraGroupDims(this.config, this.attention);
    const feeds: Record<string, ort.Tensor> = {};
    let useLora = false;
    const L = this.config.numLayers;
    for (const group of LORA_GROUPS) {
      const [inDim, outDim] = dims[group];
      const rank = Math.max(0, ...adapters.map((a) => a?.groups[group].rank ?? 0));
      useLora ||= rank > 0;
      // [layer, row, in, rank] and [layer, row, rank, out]; rows without this group stay zero.
      const a = new Float32Array(L * B * inDim * rank), b = new Float32Array(L * B * rank * outDim);
      for (let layer = 0; layer < L; layer++) {
        adapters.forEach((ad, row) => {
          const gw = ad?.groups[group];
          if (!gw || gw.rank === 0) return;
          const r = gw.rank;
          const aOff = (layer * B + row) * inDim * rank;
          for (let i = 0; i < inDim; i++) a.set(gw.a[layer].subarray(i * r, (i + 1) * r), aOff + i * rank);
          b.set(gw.b[layer], (layer * B + row) * rank * outDim); // first r rows of this row's [rank, out] block
        });
      }
      feeds[`lora.${group}.a`] = new ort.Tensor('float32', a, [L, B, inDim, rank]);
      feeds[`lora.${group}.b`] = new ort.Tensor('float32', b, [L, B, rank, outDim]);
    }
    // The graph runs its LoRA branch only when some row carries an adapter (see buildDecoderGraph).
    feeds.use_lora = new ort.Tensor('bool', [useLora], []);
    this.loraCache = { adapters, feeds };
    return feeds;
  }

  async release(): Promise<void> {
    await this.session.release();
    await this.residentKv?.release();
  }
}

/**
 * Prompt tokens (rows with several new tokens) up to which packing pays. The chunk rows attend over the
 * whole batch width with an explicit mask, where alone they would take GroupQueryAttention over their own
 * positions: on ~20M (bench:engine --mixed-steps, CPU time, 8 decoding rows) two separate runs cost
 * 1.33 / 1.15 / 1.05–1.18 × the packed run for chunks of 8 / 16 / 32 tokens, and 0.88 for 48–64.
 */
export const PACK_MAX_CHUNK_TOKENS = 32;

/**
 * Rows worth packing into one run: some row has several new tokens (at most PACK_MAX_CHUNK_TOKENS in all),
 * and the rows differ in count or continue a cached prefix (which GroupQueryAttention cannot batch).
 * Same-count first prompts, pure decode steps and big prefills keep their own forms.
 */
function mixedRows(items: ForwardItem[]): boolean {
  const counts = items.map((it) => it.tokens.length);
  const chunkTokens = counts.filter((c) => c > 1).reduce((a, c) => a + c, 0);
  return chunkTokens > 0 && chunkTokens <= PACK_MAX_CHUNK_TOKENS && (new Set(counts).size > 1 || items.some((it) => it.kv.length > 0));
}
