// POST /v1/embeddings on the engine: every input is an engine request that only runs its prompt (embed: true), so
// embedding prompts are scheduled, chunked and batched with the chat traffic of the same model; each one's final
// hidden state at its last position is the embedding, L2-normalized.
//
// Pooling: last token. The served models are decoder-only LLMs with causal attention and no embedding head: only
// the last position has attended to the whole input, while a mean would weigh early positions that saw only a
// prefix. Decoder-based embedding models pool the same way (Qwen3-Embedding, e5-mistral, SFR-Embedding, gte-Qwen2:
// last token of the final, normed hidden states, L2-normalized), so such a model served here gives its own vectors.
//
// dimensions: only the model's width. Truncating and renormalizing (Matryoshka) is meaningful only for models
// trained for it; an LLM's hidden state has no privileged leading coordinates, so any other value answers 400.
import { EmbeddingRequest, unsupportedEmbeddingParams, type EmbeddingResponse } from '../../src/protocol/openai-embeddings.js';
import type { Engine, EngineEvent } from './engine.js';
import type { ServableModel } from './model-port.js';
import { BadRequestError } from './request-params.js';
import { defaultSamplingParams } from './sampling-params.js';

/** A copy of `v` scaled to unit Euclidean length (a zero vector stays zero). */
export function l2Normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  const out = new Float32Array(v.length);
  if (norm > 0) for (let i = 0; i < v.length; i++) out[i] = v[i] / norm;
  return out;
}

/** OpenAI's base64 form: the float32 values as little-endian bytes, base64-encoded. */
export function base64Float32(v: Float32Array): string {
  const bytes = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i], i * 4);
  return bytes.toString('base64');
}

/** The request's inputs as a list: each a text or a list of token ids. */
export function embeddingInputs(input: EmbeddingRequest['input']): (string | number[])[] {
  if (typeof input === 'string') return [input];
  if (input.length > 0 && typeof input[0] === 'number') return [input as number[]];
  return input as (string | number[])[];
}

/** The request checks that need the model: it has hidden states, dimensions is its width, token ids are in its vocabulary. */
export function checkEmbeddingRequest(body: EmbeddingRequest, model: { hiddenSize?: number; vocabSize: number }, modelName: string): void {
  const unsupported = unsupportedEmbeddingParams(body);
  if (unsupported.length) throw new BadRequestError(`unsupported parameters: ${unsupported.join(', ')}`, unsupported[0], 'unsupported_parameter');
  if (!model.hiddenSize) throw new BadRequestError(`The model \`${modelName}\` cannot produce embeddings (its runtime returns no hidden states)`, 'model', 'model_not_supported');
  if (body.dimensions != null && body.dimensions !== model.hiddenSize)
    throw new BadRequestError(
      `dimensions must be ${model.hiddenSize}, the width of \`${modelName}\`'s hidden states: the served models are not trained for shortened (Matryoshka) embeddings`,
      'dimensions', 'invalid_value',
    );
  for (const x of embeddingInputs(body.input)) {
    if (typeof x === 'string') continue;
    const bad = x.find((id) => id >= model.vocabSize);
    if (bad !== undefined) throw new BadRequestError(`input: token id ${bad} is outside the vocabulary (0..${model.vocabSize - 1})`, 'input', 'invalid_value');
  }
}

/** The events of an embeddings request (src/protocol/inference-events.ts): one result, or one error. */
export type EmbeddingEvent = { type: 'result'; data: EmbeddingResponse } | { type: 'error'; status: number; message: string };

/**
 * Tokenizes the inputs (texts as completions do: with the tokenizer's special tokens), submits one embed request
 * per input and answers once all are in. Throws BadRequestError for what can be told before running; a prompt over
 * the context fails the whole request before anything runs.
 */
export async function submitEmbedding(
  servable: ServableModel, engine: Engine, body: EmbeddingRequest, modelName: string, adapter: string | null, onEvent: (e: EmbeddingEvent) => void,
): Promise<{ cancel(): void }> {
  checkEmbeddingRequest(body, servable.model, modelName);
  const inputs = embeddingInputs(body.input);
  const promptIds = await Promise.all(inputs.map(async (x) => (typeof x === 'string' ? servable.tokenizer.encode(x, { addSpecialTokens: true }) : x)));
  promptIds.forEach((ids, i) => {
    if (ids.length === 0) throw new BadRequestError(`input[${i}] has no tokens`, 'input', 'invalid_value');
    if (ids.length >= engine.maxSequenceLength)
      throw new BadRequestError(
        `This model's maximum context length is ${engine.maxSequenceLength - 1} tokens. However, input[${i}] resulted in ${ids.length} tokens.`, 'input', 'context_length_exceeded',
      );
  });
  const vectors: (Float32Array | null)[] = inputs.map(() => null);
  let open = inputs.length;
  let promptTokens = 0;
  let failed = false;
  const handles: { cancel(): void }[] = [];
  const cancelAll = () => handles.forEach((h) => h.cancel());
  const params = defaultSamplingParams({ maxTokens: 1 });
  const onEngineEvent = (i: number) => (e: EngineEvent) => {
    if (failed) return;
    if (e.type === 'error') {
      failed = true;
      cancelAll();
      return onEvent({ type: 'error', status: e.status ?? 500, message: e.message });
    }
    if (e.type === 'embedding') vectors[i] = l2Normalize(e.hidden);
    if (e.type !== 'done') return;
    promptTokens += e.promptTokens;
    if (--open > 0) return;
    const base64 = body.encoding_format === 'base64';
    onEvent({
      type: 'result',
      data: {
        object: 'list',
        data: vectors.map((v, index) => ({ object: 'embedding' as const, index, embedding: base64 ? base64Float32(v!) : Array.from(v!) })),
        model: modelName,
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
      },
    });
  };
  try {
    promptIds.forEach((ids, i) => handles.push(engine.submit({ promptIds: ids, params, adapter, embed: true }, onEngineEvent(i))));
  } catch (err) {
    cancelAll(); // all inputs or none
    throw err;
  }
  return { cancel: cancelAll };
}
