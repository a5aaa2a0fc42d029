// Adapts the runtime's loaded model (src/runtime/load-model.ts) to the engine's ports:
// the ONNX ModelRunner keeps one SequenceKv per sequence (contiguous per-sequence arrays, padded
// into a batch on each forward), the runtime tokenizer decodes synchronously from a byte table,
// the chat template is the model's Jinja template, and LoRA adapters (PEFT checkpoint folders)
// are applied per batch row without merging when the model was loaded with `lora: true`.
//
// KV layout and prefix reuse: because each sequence owns its own arrays, sharing a prefix means
// copying it (SequenceKv.copyPrefix, read from a batch row in place), which saves the prefill compute but not memory.
// `copyPrefix` exposes that; the engine's block accounting still charges each sequence fully.

import type { LoadedModel } from '../../src/runtime/load-model.js';
import type { LoraAdapter } from '../../src/runtime/lora.js';
import type { SequenceCache } from '../../src/runtime/runner.js';
import type { ChatMessage, ChatTemplatePort, ModelPort, ServableModel, StepItem, StepOutput, TokenizerPort, ToolDefinition } from './model-port.js';

export class RuntimeModelPort implements ModelPort {
  private readonly kv = new Map<number, SequenceCache>();
  /** Loaded LoRA adapters by folder, most recently used last (a small LRU: RL makes a new one per step). */
  private readonly adapters = new Map<string, LoraAdapter>();
  readonly vocabSize: number;
  readonly maxContext: number;
  /** Every runner graph returns the final hidden state (llama-graph's `hidden` output). */
  readonly hiddenSize: number;
  /** A graph built with LoRA inputs takes a different adapter (or none) in every batch row. */
  readonly mixedAdapterBatches: boolean;

  constructor(
    private readonly loaded: LoadedModel,
    private readonly maxAdapters = 8,
  ) {
    this.vocabSize = loaded.config.vocabSize;
    this.hiddenSize = loaded.config.hiddenSize;
    this.maxContext = loaded.runner.maxPositions;
    this.mixedAdapterBatches = loaded.runner.lora;
  }

  loadAdapter(name: string): void {
    const hit = this.adapters.get(name);
    this.adapters.delete(name);
    this.adapters.set(name, hit ?? this.loaded.loadAdapter(name));
    // Evicting only forgets our copy: a sequence still running with it reloads it on its next step.
    while (this.adapters.size > this.maxAdapters) this.adapters.delete(this.adapters.keys().next().value!);
  }

  private adapter(name: string | null): LoraAdapter | null {
    if (name === null) return null;
    if (!this.adapters.has(name)) this.loadAdapter(name);
    return this.adapters.get(name)!;
  }

  async step(batch: StepItem[]): Promise<StepOutput[]> {
    const items = batch.map((item) => {
      let kv = this.kv.get(item.seqId);
      if (!kv) {
        if (item.pastLength !== 0) throw new Error(`sequence ${item.seqId} has no cache but the engine expects ${item.pastLength} cached tokens`);
        kv = this.loaded.runner.newSequence();
        this.kv.set(item.seqId, kv);
      }
      if (kv.length > item.pastLength) kv.truncate(item.pastLength);
      if (kv.length !== item.pastLength) throw new Error(`sequence ${item.seqId}: ${kv.length} cached tokens, engine expects ${item.pastLength}`);
      return { tokens: item.tokens, kv, adapter: this.adapter(item.adapter) };
    });
    // The runner splits the batch into what one ORT run can take (see ModelRunner.forwardRows).
    return this.loaded.runner.forwardRows(items);
  }

  /**
   * One pass over the whole prompt on a cache of its own, next to the engine's steps (ONNX Runtime runs
   * concurrent calls on one session; nothing here is shared with the engine's sequences).
   */
  async promptLogits(tokens: number[], adapter: string | null): Promise<Float32Array> {
    const kv = this.loaded.runner.newSequence();
    try {
      const [logits] = await this.loaded.runner.forward([{ tokens, kv, adapter: this.adapter(adapter) }], { allLogits: true });
      return logits;
    } finally {
      kv.dispose();
    }
  }

  free(seqId: number): void {
    this.kv.get(seqId)?.dispose(); // out of its batch row without copying it back
    this.kv.delete(seqId);
  }

  /** Starts `to` with the first `length` cached positions of `from` (prefix reuse). */
  copyPrefix(from: number, to: number, length: number): void {
    const src = this.kv.get(from);
    if (!src || src.length < length) throw new Error(`sequence ${from} does not hold ${length} cached tokens`);
    this.kv.get(to)?.dispose();
    this.kv.set(to, src.copyPrefix(length));
  }
}

export function runtimeTokenizerPort(loaded: LoadedModel): TokenizerPort {
  const t = loaded.tokenizer;
  const eos = [...new Set([...loaded.config.eosTokenIds, ...(t.eosTokenId !== null ? [t.eosTokenId] : [])])];
  return {
    vocabSize: t.vocabSize,
    eosTokenIds: eos,
    encode: (text, opts) => t.encode(text, opts),
    decode: (ids, opts) => t.decode(ids, opts),
    tokenBytes: (id) => t.tokenBytes(id),
    isSpecial: (id) => t.specialIds.has(id),
  };
}

export function runtimeChatTemplatePort(loaded: LoadedModel): ChatTemplatePort {
  return {
    render: (messages: ChatMessage[], opts: { tools?: ToolDefinition[]; addGenerationPrompt: boolean; kwargs?: Record<string, unknown> }) =>
      loaded.renderChat(messages as unknown as Parameters<LoadedModel['renderChat']>[0], opts),
  };
}

/** Everything the engine needs, from a model the runtime loaded. */
export function servableFromRuntime(loaded: LoadedModel): ServableModel {
  return { model: new RuntimeModelPort(loaded), tokenizer: runtimeTokenizerPort(loaded), chatTemplate: runtimeChatTemplatePort(loaded) };
}
