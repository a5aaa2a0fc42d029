// Per-sequence generation settings, already validated and with defaults applied. The OpenAI
// request schema (src/protocol/openai.ts) is mapped onto this by request-params.ts.

export interface SamplingParams {
  /** 0 means greedy (argmax). */
  temperature: number;
  topP: number;
  /** 0 or -1 disables top-k. */
  topK: number;
  minP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  /** Multiplicative penalty on every token already in prompt or output (1 = off). */
  repetitionPenalty: number;
  /** token id → additive bias on the logit. */
  logitBias: Map<number, number>;
  /** null: a random seed is drawn. */
  seed: number | null;
  maxTokens: number;
  /** EOS and stop tokens are blocked until this many tokens were generated. */
  minTokens: number;
  stop: string[];
  stopTokenIds: number[];
  ignoreEos: boolean;
  includeStopStrInOutput: boolean;
  skipSpecialTokens: boolean;
  /** How many alternatives to report per position (0-20). Logprobs of the chosen token are always kept. */
  topLogprobs: number;
}

export function defaultSamplingParams(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return {
    temperature: 1,
    topP: 1,
    topK: 0,
    minP: 0,
    presencePenalty: 0,
    frequencyPenalty: 0,
    repetitionPenalty: 1,
    logitBias: new Map(),
    seed: null,
    maxTokens: 16,
    minTokens: 0,
    stop: [],
    stopTokenIds: [],
    ignoreEos: false,
    includeStopStrInOutput: false,
    skipSpecialTokens: true,
    topLogprobs: 0,
    ...overrides,
  };
}

/** Below this temperature we decode greedily, like vLLM (_SAMPLING_EPS). */
export const GREEDY_EPS = 1e-5;
