// Hearth model runtime: public API for the inference engine, the training side and the CLI.
//
// Loading and generating
//   const model = await loadModel('publisher/name' | folder, { device: 'cpu' | 'cuda:N', lora?: true, log })
//   model.config            ModelConfig (model-config.ts)
//   model.tokenizer         encode(text, {addSpecialTokens}) → Promise<number[]>; decode(ids); streamDecoder()
//   model.renderChat(messages, { tools, addGenerationPrompt, kwargs }) → string
//                           (then tokenizer.encode(text, { addSpecialTokens: false }): templates write BOS)
//   model.runner            ModelRunner (below); model.loadAdapter(peftDir) → LoraAdapter
//
// ModelRunner — run it in a worker thread/process: session.run blocks its thread.
//   const kv = runner.newSequence()                        one SequenceKv per sequence
//   const logits = await runner.forward([{ tokens, kv, adapter? }, …], { allLogits? })
//     - any mix of sequences: different cached lengths and different numbers of new tokens
//       (prefill chunks and single decode tokens may share a call);
//     - returns one Float32Array per item: [vocab] for its last new token, or [n × vocab] with allLogits;
//     - each kv is extended by its new tokens. kv.truncate(n) rolls back; kv.copyPrefix(n) forks a prefix.
//   Caches are right-padded [KV, capacity, hd] arrays; the graph returns only the new positions, which
//   the runner appends. Batching: keep calling forward with the same sequences in the same order and
//   their caches stay packed in one [B, KV, P, hd] tensor per layer (no per-step repacking); adding or
//   removing a sequence repacks once. Prefill new requests alone (or together), then join them into
//   the decode batch. runner.timing reports time inside/outside ORT.
//
// Training side
//   readModelWeights(dir) → { config, weights } (float32, HF names and layout)
export { loadModel, loadTokenizer, resolveModelDir, hearthHome, type LoadedModel, type LoadOptions } from './load-model.js';
export { ModelRunner, createSession, type ForwardItem, type ForwardOptions, type RunnerTiming } from './runner.js';
export { SequenceKv } from './kv-cache.js';
export { Tokenizer, StreamDecoder } from './tokenizer.js';
export { ChatTemplate, chatTemplateFromConfig, CHATML_TEMPLATE, type ChatMessage, type RenderOptions } from './chat-template.js';
export { readModelWeights, readHfConfig, parseHfConfig, toHfConfig } from './hf-model.js';
export { readGgufModel } from './gguf-model.js';
export { buildDecoderGraph, defaultAttention, type AttentionKind, type GraphOptions } from './llama-graph.js';
export { loadLoraAdapter, readPeftAdapter, prepareLoraAdapter, type LoraAdapter } from './lora.js';
export { generateText, generateIds, sampleToken, argmax, seededRandom, type GenerateOptions, type GenerateResult } from './generate.js';
export type { ModelConfig, Weights, Tensor32, Architecture, RopeScaling } from './model-config.js';
