// The step loop: schedule → run the model → sample → append → detect stop → emit deltas.
// Single-threaded by design: requests are submitted and cancelled between steps, and the model
// step is the only await in the loop.

import { BlockManager } from './block-manager.js';
import { ChunkBudget, DEFAULT_CHUNK_BUDGET } from './chunk-budget.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import type { ModelPort, StepItem, StepOutput, TokenizerPort } from './model-port.js';
import { createRng, randomSeed } from './rng.js';
import { sampleToken } from './sampler.js';
import type { SamplingParams } from './sampling-params.js';
import { PrefixCache } from './prefix-cache.js';
import { Scheduler, type ScheduledItem, type SchedulerHooks } from './scheduler.js';
import { Sequence, type FinishReason, type GeneratedToken } from './sequence.js';
import { StopStringMatcher } from './stop.js';
import type { TokenConstraint } from './token-constraint.js';

export interface EngineOptions {
  maxNumSeqs: number;
  maxBatchedTokens: number;
  /**
   * Most prompt tokens in a step that also decodes (mixed steps; see the scheduler): a number, or 'auto' to
   * size it from measured step times so that a mixed step costs about 2.25 decode steps (chunk-budget.ts).
   */
  prefillChunkTokens: number | 'auto';
  /** KV budget in tokens over all sequences; must hold at least one full-length sequence. */
  kvCacheTokens: number;
  blockSize: number;
  logprobsMode: 'processed' | 'raw';
  /**
   * Reuse shared prompt prefixes (needs runner copyPrefix): finished sequences' caches are kept, and the
   * sequences of a group (one prompt sent n times, or n requests at once) copy the first one's prefill.
   */
  prefixCaching: boolean;
  /** Most finished caches kept for reuse. */
  prefixCacheEntries: number;
}

export const DEFAULT_ENGINE_OPTIONS: EngineOptions = {
  maxNumSeqs: 16,
  maxBatchedTokens: 512,
  prefillChunkTokens: 'auto',
  kvCacheTokens: 16384,
  blockSize: 16,
  logprobsMode: 'processed',
  prefixCaching: true,
  prefixCacheEntries: 64,
};

export interface GenerateRequest {
  promptIds: number[];
  params: SamplingParams;
  /** Number of choices (independent sequences) for this prompt. */
  n?: number;
  adapter?: string | null;
  /** The tenant asking (the API key's entity): the scheduler shares the batch fairly between entities. */
  entity?: string;
  /** Builds a fresh decoding constraint for each choice (JSON schema, forced tool call). */
  constraint?: () => TokenConstraint;
  /**
   * Who may share cached prompt prefixes with this request (the entity it is served for): prefixes are reused
   * only between requests of the same scope, so a tenant cannot learn from a fast answer that another tenant
   * sent the same prompt (issue #44). null/absent: one scope of its own (requests without a tenant).
   */
  cacheScope?: string | null;
  /**
   * Embedding request: run the prompt only (batched and chunked like any prefill) and report the model's final
   * hidden state at its last position in an `embedding` event instead of generating. n must be 1.
   */
  embed?: boolean;
}

export type EngineEvent =
  /** New tokens for one choice, and the text that is now safe to show (may be ''). */
  | { type: 'delta'; index: number; text: string; tokens: GeneratedToken[] }
  /** One choice ended. `text` is the whole visible output of that choice. */
  | {
      type: 'finished';
      index: number;
      finishReason: FinishReason;
      stopReason: string | number | null;
      text: string;
      tokens: GeneratedToken[];
    }
  /** An embed request's prompt ran: the final hidden state at its last position (a copy, [hiddenSize]). */
  | { type: 'embedding'; index: number; hidden: Float32Array }
  /** All choices ended. cachedTokens: prompt tokens the first choice took from a cached prefix (OpenAI's usage.prompt_tokens_details.cached_tokens). */
  | { type: 'done'; promptTokens: number; completionTokens: number; cachedTokens: number }
  | { type: 'error'; message: string; status?: number };

export interface RequestHandle {
  cancel(): void;
}

/** Per-sequence output state that only the engine needs. */
interface Stream {
  seq: Sequence;
  request: RequestState;
  index: number;
  detok: IncrementalDetokenizer;
  stops: StopStringMatcher;
  constraint: TokenConstraint | null;
  text: string;
  emittedTokens: number;
}

interface RequestState {
  onEvent: (e: EngineEvent) => void;
  /** An embed request (GenerateRequest.embed): no token is sampled. */
  embed: boolean;
  streams: Stream[];
  open: number;
  promptTokens: number;
  cachedTokens: number;
}

export class Engine {
  private readonly scheduler: Scheduler;
  private readonly blocks: BlockManager;
  private readonly prefixCache: PrefixCache | null;
  /** Sizes mixed steps from measured step times (prefillChunkTokens 'auto'); null when the cap is fixed. */
  readonly chunkBudget: ChunkBudget | null;
  /** Prompt tokens the latest step with decoding rows could take (the fixed setting until one ran). */
  lastMixedStepBudget: number;
  private readonly streams = new Map<number, Stream>();
  private nextSeqId = 1;
  private loop: Promise<void> | null = null;
  private stepping = false;
  /** Runner state of sequences cancelled during a step, freed when the step returns. */
  private deferredFrees: number[] = [];
  readonly options: EngineOptions;

  constructor(
    private readonly model: ModelPort,
    private readonly tokenizer: TokenizerPort,
    options: Partial<EngineOptions> = {},
  ) {
    // Options left undefined keep their defaults.
    const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
    this.options = { ...DEFAULT_ENGINE_OPTIONS, ...given };
    const o = this.options;
    if (o.prefillChunkTokens !== 'auto' && !(Number.isInteger(o.prefillChunkTokens) && o.prefillChunkTokens >= 1))
      throw new Error(`prefillChunkTokens must be a positive integer or 'auto', got ${String(o.prefillChunkTokens)}`);
    const d = DEFAULT_CHUNK_BUDGET;
    this.chunkBudget = o.prefillChunkTokens === 'auto' ? new ChunkBudget({ max: o.maxBatchedTokens, initial: Math.min(d.initial, o.maxBatchedTokens), min: Math.min(d.min, o.maxBatchedTokens) }) : null;
    this.lastMixedStepBudget = this.chunkBudget?.options.initial ?? (o.prefillChunkTokens as number);
    if (o.kvCacheTokens < 2 * o.blockSize) throw new Error(`kvCacheTokens (${o.kvCacheTokens}) must hold at least two blocks of ${o.blockSize} tokens`);
    const blocks = (this.blocks = new BlockManager(Math.floor(o.kvCacheTokens / o.blockSize), o.blockSize));
    this.prefixCache = o.prefixCaching && model.copyPrefix ? new PrefixCache(o.blockSize, o.prefixCacheEntries) : null;
    this.scheduler = new Scheduler(
      {
        maxNumSeqs: o.maxNumSeqs,
        maxBatchedTokens: o.maxBatchedTokens,
        prefillChunkTokens: o.prefillChunkTokens === 'auto' ? undefined : o.prefillChunkTokens,
        mixedAdapterBatches: model.mixedAdapterBatches,
        // Sequences of one group (same prompt) copy the prefill of the first instead of repeating it.
        groupPrefixMin: this.prefixCache ? o.blockSize : 0,
      },
      blocks,
      this.prefixHooks(),
    );
    // The longest sequence we allow must fit in the cache alone, or it could never finish.
    this.maxSequenceLength = Math.min(model.maxContext, blocks.capacityTokens);
  }

  /** Longest prompt + output one sequence may reach. */
  readonly maxSequenceLength: number;

  submit(req: GenerateRequest, onEvent: (e: EngineEvent) => void): RequestHandle {
    const n = req.n ?? 1;
    if (req.embed && n !== 1) throw new Error('an embedding request runs its prompt once (n must be 1)');
    if (req.promptIds.length >= this.maxSequenceLength)
      throw new Error(`prompt has ${req.promptIds.length} tokens; this model accepts at most ${this.maxSequenceLength - 1}`);
    for (const id of req.promptIds)
      if (!Number.isInteger(id) || id < 0 || id >= this.model.vocabSize) throw new Error(`prompt token id ${id} is outside the vocabulary`);
    if (req.adapter) {
      if (!this.model.loadAdapter) throw new Error(`this model cannot serve LoRA adapters (asked for '${req.adapter}')`);
      this.model.loadAdapter(req.adapter);
    }
    const state: RequestState = { onEvent, embed: req.embed ?? false, streams: [], open: n, promptTokens: req.promptIds.length, cachedTokens: 0 };
    const baseSeed = req.params.seed ?? randomSeed();
    for (let index = 0; index < n; index++) {
      const id = this.nextSeqId++;
      // Choice i of a seeded request uses seed + i: reproducible, yet the choices differ.
      const seq = new Sequence(id, req.promptIds, req.params, createRng(baseSeed + index), req.adapter ?? null);
      seq.cacheScope = req.cacheScope ?? null;
      seq.entity = req.entity ?? '';
      const stream: Stream = {
        seq,
        request: state,
        index,
        detok: new IncrementalDetokenizer(this.tokenizer, req.params.skipSpecialTokens, req.promptIds),
        stops: new StopStringMatcher(req.params.stop, req.params.includeStopStrInOutput),
        constraint: req.constraint ? req.constraint() : null,
        text: '',
        emittedTokens: 0,
      };
      state.streams.push(stream);
      this.streams.set(id, stream);
      this.scheduler.add(seq);
    }
    this.counters.requests++;
    this.ensureLoop();
    return { cancel: () => this.cancelRequest(state) };
  }

  private prefixHooks(): SchedulerHooks {
    const cache = this.prefixCache;
    if (!cache) return {};
    return {
      // Adapters change the cached keys/values, so a prefix is only shared within one adapter.
      prefixFor: (seq) => {
        const key = adapterTokens(seq.adapter, range(0, seq.length).map((i) => seq.tokenAt(i)));
        const m = cache.match(key, seq.cacheScope);
        const length = m ? m.length - (key.length - seq.length) : 0;
        return m && length >= cache.minLength ? { donorId: m.donorId, length } : null;
      },
      applyPrefix: (seq, m) => {
        this.model.copyPrefix!(m.donorId, seq.id, m.length);
        seq.numComputed = m.length;
        const stream = this.streams.get(seq.id);
        if (stream?.index === 0 && seq.preemptions === 0) stream.request.cachedTokens = m.length;
        cache.touch(m.donorId);
        this.counters.prefixTokensReused += m.length;
      },
      reclaim: (protect) => {
        const id = cache.evictOldest(protect);
        if (id === null) return false;
        this.dropCached(id);
        return true;
      },
    };
  }

  private dropCached(id: number): void {
    this.blocks.free(id);
    this.model.free(id);
  }

  /** Resolves when no request is left. */
  async idle(): Promise<void> {
    while (this.loop) await this.loop;
  }

  /** Running totals for metrics (Prometheus counters/gauges on the worker side). */
  /** tokensComputed: every position run through the model (prefill, decode and recompute). */
  /** Steps run, by number of sequences in the step (the API's hearth_batch_size histogram). */
  readonly batchSizeCounts = new Map<number, number>();
  readonly counters = { steps: 0, tokensComputed: 0, generatedTokens: 0, preemptions: 0, prefixTokensReused: 0, requests: 0 };

  get stats() {
    return {
      running: this.scheduler.numRunning,
      waiting: this.scheduler.numWaiting,
      kvBlocksFree: this.blocks.numFree,
      kvBlocksTotal: this.blocks.numBlocks,
      cachedPrefixes: this.prefixCache?.size ?? 0,
      ...this.counters,
    };
  }

  private ensureLoop(): void {
    if (this.loop) return;
    this.loop = (async () => {
      try {
        while (this.scheduler.hasWork()) {
          await this.step();
          // Let submits and cancels (I/O callbacks) in between steps.
          await new Promise<void>((r) => setImmediate(r));
        }
      } catch (err) {
        // An error that carries an HTTP status (a device fault: 503) keeps it; anything else is the server's (500).
        const status = typeof (err as { status?: unknown })?.status === 'number' ? (err as { status: number }).status : undefined;
        this.failAll(err instanceof Error ? err.message : String(err), status);
      } finally {
        this.loop = null;
      }
    })();
  }

  /** One engine iteration. Public for tests that drive the engine step by step. */
  async step(): Promise<void> {
    const decoding = this.scheduler.numDecoding;
    const chunkCap = this.chunkBudget?.tokensFor(decoding); // 0: this step only decodes (the budget measures a decode step)
    if (chunkCap && decoding > 0) this.lastMixedStepBudget = chunkCap;
    const { items, preempted } = this.scheduler.schedule(chunkCap);
    for (const seq of preempted) this.model.free(seq.id);
    this.counters.preemptions += preempted.length;
    if (items.length === 0) {
      if (this.scheduler.hasWork()) throw new Error('scheduler made no progress (KV budget too small for any waiting sequence)');
      return;
    }
    const batch: StepItem[] = items.map(({ seq, numTokens }) => ({
      seqId: seq.id,
      tokens: range(seq.numComputed, seq.numComputed + numTokens).map((i) => seq.tokenAt(i)),
      pastLength: seq.numComputed,
      adapter: seq.adapter,
    }));
    this.stepping = true;
    const started = performance.now();
    let outputs: StepOutput[];
    try {
      outputs = await this.model.step(batch);
    } finally {
      this.stepping = false;
      for (const id of this.deferredFrees.splice(0)) this.model.free(id);
    }
    const decodeRows = batch.filter((b) => b.tokens.length === 1 && b.pastLength > 0).length;
    this.chunkBudget?.observe({ decodeRows, promptTokens: batch.reduce((a, b) => a + b.tokens.length, 0) - decodeRows, ms: performance.now() - started });
    this.counters.steps++;
    this.batchSizeCounts.set(items.length, (this.batchSizeCounts.get(items.length) ?? 0) + 1);
    for (const it of items) this.counters.tokensComputed += it.numTokens;
    items.forEach((item, i) => {
      try {
        this.afterStep(item, outputs[i]);
      } catch (err) {
        // A failure in one sequence (e.g. its constraint) ends that request only.
        const stream = this.streams.get(item.seq.id);
        if (!stream) return;
        this.cancelRequest(stream.request);
        this.emit(stream.request, { type: 'error', message: err instanceof Error ? err.message : String(err) });
      }
    });
  }

  private afterStep({ seq, numTokens, samples }: ScheduledItem, { logits, logSumExp, hidden }: StepOutput): void {
    if (seq.isFinished) return; // cancelled while the step ran
    seq.numComputed += numTokens;
    if (!samples) return;
    const stream = this.streams.get(seq.id)!;
    if (stream.request.embed) {
      // The whole prompt is computed: its last position's hidden state is the embedding; nothing is generated.
      if (!hidden) throw new Error('this model does not expose its hidden states, so it cannot serve embeddings');
      this.emit(stream.request, { type: 'embedding', index: stream.index, hidden: Float32Array.from(hidden) });
      this.finish(stream, 'stop', null);
      return;
    }
    const p = seq.params;
    const stopIds = p.ignoreEos ? p.stopTokenIds : [...this.tokenizer.eosTokenIds, ...p.stopTokenIds];
    const token = sampleToken(
      logits,
      p,
      {
        promptIds: seq.promptIds,
        outputIds: seq.outputIds,
        allowed: stream.constraint?.allowedTokens() ?? null,
        blocked: seq.outputIds.length < p.minTokens ? stopIds : undefined,
        logprobsMode: this.options.logprobsMode,
        logSumExp,
      },
      seq.rng,
    );
    const generated: GeneratedToken = { id: token.tokenId, logprob: token.logprob, topLogprobs: token.topLogprobs };
    seq.append(generated);
    this.counters.generatedTokens++;
    stream.constraint?.advance(token.tokenId);

    let finish: FinishReason | null = null;
    let stopReason: string | number | null = null;
    let text = '';
    if (!p.ignoreEos && this.tokenizer.eosTokenIds.includes(token.tokenId)) finish = 'stop';
    else if (p.stopTokenIds.includes(token.tokenId)) {
      finish = 'stop';
      stopReason = token.tokenId;
    } else {
      const check = stream.stops.push(stream.detok.push(token.tokenId));
      text = check.emit;
      if (check.stopped !== null) {
        finish = 'stop';
        stopReason = check.stopped;
      }
    }
    if (!finish && (seq.outputIds.length >= p.maxTokens || seq.length >= this.maxSequenceLength)) finish = 'length';
    if (finish && stopReason === null) text += stream.stops.flush();
    this.emitDelta(stream, text);
    if (finish) this.finish(stream, finish, stopReason);
  }

  private emitDelta(stream: Stream, text: string): void {
    stream.text += text;
    const tokens = stream.seq.logprobs.slice(stream.emittedTokens);
    stream.emittedTokens = stream.seq.logprobs.length;
    this.emit(stream.request, { type: 'delta', index: stream.index, text, tokens });
  }

  private finish(stream: Stream, reason: FinishReason, stopReason: string | number | null): void {
    const seq = stream.seq;
    seq.status = 'finished';
    seq.finishReason = reason;
    seq.stopReason = stopReason;
    this.release(seq);
    this.emit(stream.request, {
      type: 'finished',
      index: stream.index,
      finishReason: reason,
      stopReason,
      text: stream.text,
      tokens: seq.logprobs,
    });
    const req = stream.request;
    if (--req.open === 0) {
      const completionTokens = req.streams.reduce((a, s) => a + s.seq.outputIds.length, 0);
      this.emit(req, { type: 'done', promptTokens: req.promptTokens, completionTokens, cachedTokens: req.cachedTokens });
    }
  }

  /** Frees the budget at once; the runner's memory right away too unless a step is using it. */
  private release(seq: Sequence): void {
    this.streams.delete(seq.id);
    if (this.prefixCache && seq.finishReason !== 'abort' && seq.numComputed >= this.prefixCache.minLength && !this.stepping) {
      // Keep the cache as a reusable prefix (its blocks stay charged under this id).
      this.scheduler.remove(seq, true);
      const tokens = range(0, seq.numComputed).map((i) => seq.tokenAt(i));
      for (const id of this.prefixCache.insert(seq.id, adapterTokens(seq.adapter, tokens), seq.cacheScope)) this.dropCached(id);
      return;
    }
    this.scheduler.remove(seq);
    if (this.stepping) this.deferredFrees.push(seq.id);
    else this.model.free(seq.id);
  }

  private cancelRequest(req: RequestState): void {
    for (const s of req.streams) {
      if (s.seq.isFinished) continue;
      s.seq.status = 'finished';
      s.seq.finishReason = 'abort';
      this.release(s.seq);
    }
    req.open = 0;
  }

  private emit(req: RequestState, e: EngineEvent): void {
    try {
      req.onEvent(e);
    } catch {
      // A listener that throws (client went away) cancels its own request, not the engine.
      this.cancelRequest(req);
    }
  }

  private failAll(message: string, status?: number): void {
    const reqs = new Set([...this.streams.values()].map((s) => s.request));
    for (const req of reqs) {
      this.cancelRequest(req);
      try {
        req.onEvent({ type: 'error', message, ...(status !== undefined ? { status } : {}) });
      } catch {
        /* nothing left to tell */
      }
    }
  }
}

/**
 * Prefix-cache key: the adapter name is folded in as leading pseudo-tokens (negative numbers
 * never collide with token ids), so caches of different adapters never match each other.
 */
function adapterTokens(adapter: string | null, tokens: number[]): number[] {
  if (adapter === null) return tokens;
  return [...Array.from(adapter, (c) => -1 - c.charCodeAt(0)), -1, ...tokens];
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}
