// One generation stream: a prompt, the tokens generated so far and how far the model has got.
// A request with n > 1 becomes n sequences. vLLM v1 style bookkeeping: `numComputed` counts the
// tokens whose keys/values are in the runner's cache; the scheduler feeds tokens
// [numComputed, allIds.length) in chunks, and a token is sampled once every token is computed.

import type { Rng } from './rng.js';
import type { SamplingParams } from './sampling-params.js';
import type { TokenLogprob } from './sampler.js';

export type SequenceStatus = 'waiting' | 'running' | 'finished';
export type FinishReason = 'stop' | 'length' | 'abort';

export interface GeneratedToken {
  id: number;
  logprob: number;
  topLogprobs: TokenLogprob[];
}

export class Sequence {
  status: SequenceStatus = 'waiting';
  readonly outputIds: number[] = [];
  readonly logprobs: GeneratedToken[] = [];
  /** Tokens (prompt + output) whose KV is cached by the runner. */
  numComputed = 0;
  /** Set when the sequence ends; 'stop' covers EOS, stop tokens and stop strings. */
  finishReason: FinishReason | null = null;
  /** The stop string or stop token id that ended it (OpenAI-compatible `stop_reason`). */
  stopReason: string | number | null = null;
  /** Times this sequence lost its cache to make room for others. */
  preemptions = 0;
  /** Who it may share cached prefixes with (GenerateRequest.cacheScope: the tenant); null = no one else. */
  cacheScope: string | null = null;
  /** The tenant it is generated for (the API key's entity; '' when none): the scheduler shares the batch fairly by it. */
  entity = '';

  constructor(
    readonly id: number,
    readonly promptIds: readonly number[],
    readonly params: SamplingParams,
    readonly rng: Rng,
    readonly adapter: string | null = null,
    /** Monotonic arrival order; the scheduler serves older sequences first. */
    readonly arrival = id,
  ) {
    if (promptIds.length === 0) throw new Error('prompt must contain at least one token');
  }

  get length(): number {
    return this.promptIds.length + this.outputIds.length;
  }

  tokenAt(i: number): number {
    return i < this.promptIds.length ? this.promptIds[i] : this.outputIds[i - this.promptIds.length];
  }

  /** Tokens still to run through the model before the next sample. */
  get numUncomputed(): number {
    return this.length - this.numComputed;
  }

  get isFinished(): boolean {
    return this.status === 'finished';
  }

  append(token: GeneratedToken): void {
    this.outputIds.push(token.id);
    this.logprobs.push(token);
  }
}
