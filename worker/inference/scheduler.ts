// Continuous batching. Before every model step the scheduler decides which sequences run and how
// many of their tokens: sequences join and leave between steps, never in the middle of one.
//
// Per step, within `maxBatchedTokens`:
//   1. running sequences that are decoding (one token each) go first, so streams keep flowing;
//   2. running sequences still prefilling get a chunk of what is left of the budget
//      (chunked prefill: a long prompt is spread over several steps instead of stalling others);
//   3. waiting sequences are admitted, round-robin by entity (the entity running the fewest sequences first,
//      oldest first within one; src/domain/fair-share.ts), while `maxNumSeqs` and the KV budget allow.
// Fair shares: when every slot is taken and an entity waits below its share (maxNumSeqs / entities with work),
// the newest sequence of the entity holding the most slots is preempted first, so one tenant's long streams never
// keep another's request waiting for them to end.
// In a step that decodes, prompt tokens (2 and 3) are capped at `prefillChunkTokens` (or the cap the engine
// passes for this step, see chunk-budget.ts): such a mixed step costs the decoding streams about one decode
// step plus the chunk, never a whole prefill (vLLM's chunked prefill; the runner runs the rows together, see
// ModelRunner.packsRows).
// Groups (an RL rollout group: the same prompt n times, or n requests arriving together) prefill once:
// a waiting sequence whose prompt a running sequence is still prefilling waits for it, then starts
// from a copy of that sequence's cache (see livePrefix) and computes only what is left.
// When the KV cache cannot grow a running sequence, the newest running sequence is preempted:
// its cache is dropped and it goes back to waiting, to be recomputed later (vLLM's "recompute").

import type { BlockManager } from './block-manager.js';
import type { Sequence } from './sequence.js';
import { fairAdmissionOrder, fairShareVictims } from '../../src/domain/fair-share.js';

const entityOf = (seq: Sequence) => seq.entity;

export interface SchedulerConfig {
  /** Most sequences in one step. */
  maxNumSeqs: number;
  /** Most tokens (prefill + decode) in one step. */
  maxBatchedTokens: number;
  /** Most prompt tokens in a step that also decodes (default: no cap beyond maxBatchedTokens). */
  prefillChunkTokens?: number;
  /** If false, one step only holds sequences with the same adapter. */
  mixedAdapterBatches: boolean;
  /**
   * Shortest prefix copied from a running sequence (group sharing, see livePrefix); 0 turns it off
   * (a runner that cannot copy caches).
   */
  groupPrefixMin?: number;
}

/** Optional prefix reuse and memory reclaim, supplied by the engine. */
export interface SchedulerHooks {
  /** Length of a reusable cached prefix for a sequence about to be admitted (no side effects). */
  prefixFor?(seq: Sequence): { donorId: number; length: number } | null;
  /** Gives the admitted sequence that prefix (runner copy from a cached or a running donor); sets seq.numComputed. */
  applyPrefix?(seq: Sequence, match: { donorId: number; length: number }): void;
  /** Frees memory held by no running sequence (cached prefixes); false when nothing is left. */
  reclaim?(protect?: number): boolean;
}

export interface ScheduledItem {
  seq: Sequence;
  /** Tokens to run: positions [seq.numComputed, seq.numComputed + numTokens). */
  numTokens: number;
  /** True when this chunk reaches the end of the sequence, so a token is sampled after it. */
  samples: boolean;
}

export interface SchedulerOutput {
  items: ScheduledItem[];
  /** Sequences that lost their cache in this round (the caller frees their runner state). */
  preempted: Sequence[];
}

export class Scheduler {
  /** Ordered by arrival (oldest first). */
  private waiting: Sequence[] = [];
  private running: Sequence[] = [];
  private stepCount = 0;
  private lastRun = new Map<number, number>();

  constructor(
    private readonly config: SchedulerConfig,
    private readonly blocks: BlockManager,
    private readonly hooks: SchedulerHooks = {},
  ) {
    if (config.maxNumSeqs < 1 || config.maxBatchedTokens < 1 || (config.prefillChunkTokens ?? 1) < 1) throw new Error('maxNumSeqs, maxBatchedTokens and prefillChunkTokens must be ≥ 1');
  }

  add(seq: Sequence): void {
    seq.status = 'waiting';
    insertByArrival(this.waiting, seq);
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  get numRunning(): number {
    return this.running.length;
  }

  /** Running sequences past their prompt (one token a step). */
  get numDecoding(): number {
    return this.running.filter((s) => s.numUncomputed === 1).length;
  }

  hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /**
   * Removes a sequence at once (finished or cancelled) and releases its KV budget, unless
   * `keepBlocks` (its cache lives on as a reusable prefix, still charged under its id).
   */
  remove(seq: Sequence, keepBlocks = false): void {
    this.waiting = this.waiting.filter((s) => s !== seq);
    this.running = this.running.filter((s) => s !== seq);
    if (!keepBlocks) this.blocks.free(seq.id);
    this.lastRun.delete(seq.id);
  }

  /**
   * @param prefillChunkTokens this step's cap on prompt tokens if it decodes (default: the configured one); 0 makes
   *   a step with decoding rows decode only.
   */
  schedule(prefillChunkTokens = this.config.prefillChunkTokens): SchedulerOutput {
    if (prefillChunkTokens !== undefined && !(Number.isInteger(prefillChunkTokens) && prefillChunkTokens >= 0))
      throw new Error(`prefillChunkTokens must be a whole number ≥ 0, got ${prefillChunkTokens}`);
    this.stepCount++;
    const items: ScheduledItem[] = [];
    const preempted: Sequence[] = [];
    const scheduled = new Set<Sequence>();
    let budget = this.config.maxBatchedTokens;
    const adapter = this.pickAdapter();
    const eligible = (s: Sequence) => this.config.mixedAdapterBatches || s.adapter === adapter;
    // Room for entities waiting below their fair share of the batch, for sequences that can start this step. These
    // preemptions, unlike memory pressure's, do not stop admission this step: their slots are for the waiting.
    const ready = (s: Sequence) => eligible(s) && (s.numComputed > 0 || this.livePrefix(s) !== 'wait');
    for (const victim of fairShareVictims(this.waiting, this.running, this.config.maxNumSeqs, entityOf, { ready })) {
      this.preempt(victim);
      preempted.push(victim);
    }
    const fairPreemptions = preempted.length;

    const take = (seq: Sequence, want: number): boolean => {
      const numTokens = Math.min(want, budget);
      if (numTokens <= 0) return false;
      // Grow the cache reservation: drop cached prefixes first, then preempt newer sequences.
      while (!this.blocks.canReserve(seq.id, seq.numComputed + numTokens)) {
        if (this.hooks.reclaim?.()) continue;
        const victim = this.pickVictim(scheduled, seq);
        if (!victim) return false;
        this.preempt(victim);
        preempted.push(victim);
        if (victim === seq) return false;
      }
      this.blocks.reserve(seq.id, seq.numComputed + numTokens);
      items.push({ seq, numTokens, samples: seq.numComputed + numTokens === seq.length });
      scheduled.add(seq);
      budget -= numTokens;
      this.lastRun.set(seq.id, this.stepCount);
      return true;
    };

    // 1. decodes, 2. unfinished prefills (both from `running`, oldest first).
    for (const decodingPass of [true, false]) {
      if (!decodingPass && items.length > 0) budget = Math.min(budget, prefillChunkTokens ?? budget);
      for (const seq of [...this.running]) {
        if (budget === 0) break;
        if (!this.running.includes(seq) || scheduled.has(seq) || !eligible(seq)) continue;
        if ((seq.numUncomputed === 1) !== decodingPass) continue;
        take(seq, seq.numUncomputed);
      }
    }

    // 3. admit waiting sequences, unless memory pressure just forced a preemption.
    if (preempted.length === fairPreemptions) {
      for (const seq of fairAdmissionOrder(this.waiting, this.running, entityOf)) {
        if (budget === 0 || this.running.length >= this.config.maxNumSeqs) break;
        if (!eligible(seq)) continue;
        const live = seq.numComputed === 0 ? this.livePrefix(seq) : null;
        if (live === 'wait') continue; // a running sequence is computing this prompt: copy it when done
        let prefix = seq.numComputed === 0 ? (this.hooks.prefixFor?.(seq) ?? null) : null;
        if (live && (!prefix || live.length > prefix.length)) prefix = live;
        // Room for the first chunk, reclaiming cached prefixes (but not the one we are about to copy).
        const fit = (): number | null => {
          const start = prefix ? prefix.length : seq.numComputed;
          const numTokens = Math.min(seq.length - start, budget);
          let fits = this.blocks.canReserve(seq.id, start + numTokens);
          while (!fits && this.hooks.reclaim?.(prefix?.donorId)) fits = this.blocks.canReserve(seq.id, start + numTokens);
          return fits ? numTokens : null;
        };
        let numTokens = fit();
        if (numTokens === null && prefix) {
          prefix = null; // the donor itself is in the way: start from scratch instead
          numTokens = fit();
        }
        if (numTokens === null) break; // newcomers never preempt running sequences
        this.waiting.splice(this.waiting.indexOf(seq), 1);
        seq.status = 'running';
        insertByArrival(this.running, seq);
        if (prefix) this.hooks.applyPrefix!(seq, prefix);
        take(seq, numTokens);
      }
    }
    return { items, preempted };
  }

  /**
   * Group sharing: the longest prefix of `seq`'s tokens that a running sequence with the same adapter
   * holds in its cache now, or 'wait' when one of them is still prefilling a longer shared part (it runs
   * every step, so the wait is short, and the prefill then happens once for the whole group). Always
   * leaves `seq` one token to compute (the model must run on something to give logits).
   */
  private livePrefix(seq: Sequence): { donorId: number; length: number } | 'wait' | null {
    const min = this.config.groupPrefixMin ?? 0;
    if (min <= 0) return null;
    let best: { donorId: number; length: number } | null = null;
    let pending = 0;
    for (const donor of this.running) {
      // Only within one adapter (its keys/values differ) and one cache scope (tenant: no cross-tenant timing channel).
      if (donor.adapter !== seq.adapter || donor.cacheScope !== seq.cacheScope) continue;
      const limit = Math.min(seq.length - 1, donor.length);
      let shared = 0;
      while (shared < limit && donor.tokenAt(shared) === seq.tokenAt(shared)) shared++;
      const ready = Math.min(shared, donor.numComputed);
      if (ready >= min && (!best || ready > best.length)) best = { donorId: donor.id, length: ready };
      // Only a prompt still being prefilled is worth waiting for (decoding adds one token a step).
      if (donor.numUncomputed > 1) pending = Math.max(pending, shared);
    }
    return pending >= min && pending > (best?.length ?? 0) ? 'wait' : best;
  }

  /** Newest running sequence not yet scheduled this step (or `self` as a last resort). */
  private pickVictim(scheduled: Set<Sequence>, self: Sequence): Sequence | null {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const s = this.running[i];
      if (s !== self && !scheduled.has(s)) return s;
    }
    return this.running.includes(self) ? self : null;
  }

  private preempt(seq: Sequence): void {
    this.running = this.running.filter((s) => s !== seq);
    this.blocks.free(seq.id);
    seq.numComputed = 0;
    seq.preemptions++;
    seq.status = 'waiting';
    insertByArrival(this.waiting, seq);
  }

  /** With single-adapter batches: the adapter of the sequence that has waited longest for a step. */
  private pickAdapter(): string | null {
    if (this.config.mixedAdapterBatches) return null;
    // Never-run waiting sequences count as most starved, so every adapter gets its turn.
    const pool = [...this.running, ...this.waiting];
    let best: Sequence | null = null;
    for (const s of pool) {
      const last = this.lastRun.get(s.id) ?? 0;
      const bestLast = best ? (this.lastRun.get(best.id) ?? 0) : Infinity;
      if (!best || last < bestLast) best = s;
    }
    return best ? best.adapter : null;
  }
}

function insertByArrival(list: Sequence[], seq: Sequence): void {
  let i = list.length;
  while (i > 0 && list[i - 1].arrival > seq.arrival) i--;
  list.splice(i, 0, seq);
}
