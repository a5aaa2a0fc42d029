// The small interface the inference engine needs from a model. The runtime (src/runtime)
// provides the real implementation (ONNX runner + HF tokenizer + chat template); tests use a tiny
// deterministic model. Keeping the port this narrow lets the scheduler, sampler and engine be
// tested without ONNX at all.

/** One sequence's slice of a forward step. */
export interface StepItem {
  /** Engine-wide sequence id; the runner keys its KV cache by it. */
  seqId: number;
  /** Tokens to run now (a prefill chunk, or the one newest token when decoding). */
  tokens: number[];
  /** How many earlier tokens of this sequence the runner already holds in its KV cache. */
  pastLength: number;
  /** LoRA adapter to apply (null = base model); for the runtime runner, the PEFT checkpoint folder. */
  adapter: string | null;
}

/** One sequence's result of a step. */
export interface StepOutput {
  /** Logits at the last position of the item's tokens (length vocabSize). */
  logits: Float32Array;
  /** log Σ exp(logits) when the model computed it (saves the sampler an exp over the vocabulary), else NaN. */
  logSumExp: number;
  /**
   * The model's final hidden state (after its last norm) at the same position, [hiddenSize]; absent or null when
   * the model does not expose it, and then it cannot serve embeddings.
   */
  hidden?: Float32Array | null;
}

export interface ModelPort {
  readonly vocabSize: number;
  /** Width of StepOutput.hidden; absent when the model returns no hidden states (it cannot serve embeddings). */
  readonly hiddenSize?: number;
  /** Longest sequence (prompt + output) the model can attend over. */
  readonly maxContext: number;
  /** Whether one step may mix sequences that use different adapters. */
  readonly mixedAdapterBatches: boolean;
  /**
   * Runs one forward step over a batch and returns, for every item, the logits at the last
   * position of `tokens`. After the step the runner holds pastLength + tokens.length cached
   * positions for each sequence.
   */
  step(batch: StepItem[]): Promise<StepOutput[]>;
  /** Forgets a sequence's KV cache (finished, cancelled or preempted). Idempotent. */
  free(seqId: number): void;
  /**
   * Optional: make adapter `name` ready (read its files once). Called when a request arrives, so a
   * bad adapter fails that request instead of a later batch. Throws if it cannot be served.
   */
  loadAdapter?(name: string): void;
  /**
   * Optional: the logits after every token of `tokens` ([tokens.length × vocabSize]), from one pass outside the
   * engine's batches (completions `echo` with `logprobs` scores the prompt with it). Absent: echo is refused.
   */
  promptLogits?(tokens: number[], adapter: string | null): Promise<Float32Array>;
  /** Optional: start sequence `to` with a copy of the first `length` cached positions of `from`. */
  copyPrefix?(from: number, to: number, length: number): void;
}

export interface TokenizerPort {
  readonly vocabSize: number;
  /** The HF tokenizer encodes asynchronously; test tokenizers may answer at once. */
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[] | Promise<number[]>;
  /** Text of a token list; special tokens are skipped unless `skipSpecialTokens` is false. */
  decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string;
  /**
   * The raw bytes this token stands for (byte-level BPE: the original UTF-8 bytes, which may be
   * part of a multi-byte character). Used for logprob `bytes` and for grammar-constrained decoding.
   */
  tokenBytes(id: number): Uint8Array;
  /** Control tokens such as <|im_end|> that are not text. */
  isSpecial(id: number): boolean;
  /** End-of-sequence ids: generation stops when one is sampled (unless ignore_eos). */
  readonly eosTokenIds: number[];
}

/** An OpenAI-style chat message after validation (content flattened to text). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string | null;
  name?: string;
  /** `arguments` is parsed to an object when it is JSON, as vLLM does: templates apply `tojson` to it. */
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string | Record<string, unknown> } }[];
  tool_call_id?: string;
}

export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export interface ChatTemplatePort {
  render(
    messages: ChatMessage[],
    opts: {
      tools?: ToolDefinition[];
      addGenerationPrompt: boolean;
      /** Extra template variables (`chat_template_kwargs`, e.g. enable_thinking). */
      kwargs?: Record<string, unknown>;
    },
  ): string;
}

/** Everything the engine needs to serve one model. */
export interface ServableModel {
  model: ModelPort;
  tokenizer: TokenizerPort;
  chatTemplate: ChatTemplatePort;
}
