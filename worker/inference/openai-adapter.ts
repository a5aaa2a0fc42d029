// The engine entry a worker process runs: OpenAI requests in, OpenAI objects out.
//
//   const hearth = createEngineFromRuntime(await loadModel(dir, { lora: true }), { maxNumSeqs: 8 });
//   const handle = await hearth.submit({ kind: 'chat', body, model: 'name-to-echo', adapter: null }, (ev) => …);
//   handle.cancel();   // client went away
// (worker-handler.ts does exactly this for the worker host.)
//
// Events are the protocol's (src/protocol/inference-events.ts), plain JSON that crosses to the API unchanged:
//   stream:     { type: 'chunk', data } …  then { type: 'result', data: { usage } }   (the HTTP side writes `data: [DONE]`;
//               usage is there whether or not the client asked for the usage chunk, so the server can always book it)
//   non-stream: { type: 'result', data }
//   failure:    { type: 'error', status, message, param?, code? }   (400 for bad requests, 500 otherwise)

import { randomUUID } from 'node:crypto';
import type { InferenceEvent } from '../../src/protocol/inference-events.js';
import {
  ChatCompletionRequest,
  CompletionRequest,
  unsupportedParamPath,
  unsupportedParams,
  type ChatCompletionChunk,
  type ChatCompletionResponse,
  type CompletionResponse,
  type Usage,
} from '../../src/protocol/openai.js';
import { Engine, type EngineEvent, type EngineOptions, type GenerateRequest } from './engine.js';
import { responseFormatConstraint } from './json-constraint.js';
import { SchemaTooComplexError, UnsupportedSchemaError } from '../../src/domain/json-schema.js';
import type { ChatMessage, ServableModel, ToolDefinition } from './model-port.js';
import {
  buildChatCompletion,
  buildCompletion,
  ChatChunkStream,
  completionChunk,
  completionLogprobs,
  echoedPrompt,
  type FinishedChoice,
  usageOf,
  withEchoedPrompt,
  withoutTokenIds,
} from './openai-format.js';
import { promptLogprobs, type PromptTokenLogprob } from './prompt-logprobs.js';
import type { LoadedModel } from '../../src/runtime/load-model.js';
import { blocksForMemory } from './block-manager.js';
import { servableFromRuntime } from './runtime-model.js';
import { BadRequestError, defaultsFromGenerationConfig, maxTokensFor, samplingParamsFrom } from './request-params.js';
import type { SamplingParams } from './sampling-params.js';
import { forcedToolCallConstraint } from './tool-calls.js';
import { checkAnswerSize, checkSequenceCount, requestCapsFrom, type RequestCaps } from './request-caps.js';
import { EmbeddingRequest, type EmbeddingResponse } from '../../src/protocol/openai-embeddings.js';
import { submitEmbedding } from './embeddings.js';

// entity: the tenant the request is served for; prompt-prefix caches are shared only within one entity (see
// GenerateRequest.cacheScope), so no tenant can time another's prompts. null/absent: a partition of its own.
export type InferenceRequest =
  | { kind: 'chat'; body: unknown; model: string; adapter?: string | null; validated?: boolean; entity?: string | null }
  | { kind: 'completion'; body: unknown; model: string; adapter?: string | null; validated?: boolean; entity?: string | null }
  /** POST /v1/embeddings (embeddings.ts): the response is an EmbeddingResponse. */
  | { kind: 'embedding'; body: unknown; model: string; adapter?: string | null; validated?: boolean; entity?: string | null }
  /** A chat request's prompt tokens without running it (Anthropic's count_tokens): the response is `{ prompt_tokens }`. */
  | { kind: 'chat_tokens'; body: unknown; model: string; adapter?: string | null; validated?: boolean; entity?: string | null };
// validated: the body was already parsed with the request schema of its kind (the API's inference routes do so
// before they enqueue), so it is not parsed again; the checks beyond the schema still run. A body is validated
// once, at the edge: a second parse of a completion body, its code cold between model steps, cost ~0.35 ms of
// the time to first token on a 2-core machine (measured against the same server parsing once).

export type { InferenceEvent };

export interface InferenceHandle {
  cancel(): void;
}

export interface HearthEngine {
  readonly engine: Engine;
  /** Validates, tokenizes and queues a request; events follow through `onEvent`. Never throws. */
  submit(req: InferenceRequest, onEvent: (e: InferenceEvent) => void): Promise<InferenceHandle>;
}

export interface CreateEngineOptions extends Partial<EngineOptions> {
  /** Sampling defaults from the model's generation_config.json. */
  samplingDefaults?: Partial<SamplingParams>;
  /** Work bounds per request (request-caps.ts); default: from the environment. */
  requestCaps?: RequestCaps;
}

export function createEngine(servable: ServableModel, opts: CreateEngineOptions = {}): HearthEngine {
  const { samplingDefaults, requestCaps, ...engineOpts } = opts;
  const engine = new Engine(servable.model, servable.tokenizer, engineOpts);
  const ctx: Ctx = { servable, engine, samplingDefaults, caps: requestCaps ?? requestCapsFrom(process.env) };
  return {
    engine,
    async submit(req, onEvent) {
      try {
        if (req.kind === 'embedding') return await submitEmbeddingRequest(ctx, req, onEvent);
        if (req.kind === 'chat_tokens') {
          const { promptIds } = await renderChatPrompt(ctx, parse(ChatCompletionRequest, req.body, req.validated));
          onEvent({ type: 'result', data: { prompt_tokens: promptIds.length } });
          return { cancel() {} };
        }
        return req.kind === 'chat' ? await submitChat(ctx, req, onEvent) : await submitCompletion(ctx, req, onEvent);
      } catch (err) {
        const status = err instanceof BadRequestError || err instanceof UnsupportedSchemaError ? 400 : 500;
        const schema = err instanceof SchemaTooComplexError ? { param: err.param ?? 'response_format', code: err.code } : { param: 'response_format', code: 'unsupported_parameter' };
        const where = err instanceof BadRequestError ? { param: err.param, code: err.code } : err instanceof UnsupportedSchemaError ? schema : {};
        onEvent({ type: 'error', status, message: err instanceof Error ? err.message : String(err), ...where });
        return { cancel() {} };
      }
    },
  };
}

/**
 * The usual entry for a worker: an engine over a model the runtime loaded, with the KV budget
 * given in bytes (default 1 GiB, at least one full-length sequence) and the model's
 * generation_config.json as sampling defaults.
 */
export function createEngineFromRuntime(loaded: LoadedModel, opts: CreateEngineOptions & { kvCacheBytes?: number } = {}): HearthEngine {
  const { kvCacheBytes = 2 ** 30, ...rest } = opts;
  const blockSize = rest.blockSize ?? 16;
  const c = loaded.config;
  const fromBytes = blocksForMemory({ bytes: kvCacheBytes, blockSize, numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim }) * blockSize;
  const kvCacheTokens = rest.kvCacheTokens ?? Math.max(fromBytes, loaded.runner.maxPositions);
  return createEngine(servableFromRuntime(loaded), {
    ...rest,
    blockSize,
    kvCacheTokens,
    samplingDefaults: rest.samplingDefaults ?? defaultsFromGenerationConfig(loaded.generationConfig),
  });
}

interface Ctx {
  servable: ServableModel;
  engine: Engine;
  samplingDefaults?: Partial<SamplingParams>;
  caps: RequestCaps;
}

function parse<T>(schema: { safeParse(x: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } }, body: unknown, validated = false): T {
  const r = validated ? { success: true as const, data: body as T } : schema.safeParse(body);
  if (!r.success) throw new BadRequestError(r.error.issues.map((i) => `${i.path.map(String).join('.') || 'body'}: ${i.message}`).join('; '));
  const unsupported = unsupportedParams(r.data as ChatCompletionRequest);
  if (unsupported.length) throw new BadRequestError(`unsupported parameters: ${unsupported.join(', ')}`, unsupportedParamPath(unsupported[0]), 'unsupported_parameter');
  return r.data;
}

function argumentsObject(args: string): string | Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : args;
  } catch {
    return args;
  }
}

function contentText(content: unknown): string | null {
  if (content == null) return null;
  if (typeof content === 'string') return content;
  return (content as { text?: string }[]).map((p) => p.text ?? '').join('\n'); // text parts join with newlines, as in vLLM
}

async function submitEmbeddingRequest(ctx: Ctx, req: InferenceRequest, onEvent: (e: InferenceEvent) => void): Promise<InferenceHandle> {
  const r = req.validated ? { success: true as const, data: req.body as EmbeddingRequest } : EmbeddingRequest.safeParse(req.body);
  if (!r.success) throw new BadRequestError(r.error.issues.map((i) => `${i.path.map(String).join('.') || 'body'}: ${i.message}`).join('; '));
  return submitEmbedding(ctx.servable, ctx.engine, r.data, req.model, req.adapter ?? null, onEvent);
}

/** A chat request's prompt as the model's template renders it, tokenized; and how its tools are used. */
async function renderChatPrompt(ctx: Ctx, body: ChatCompletionRequest) {
  const { tokenizer, chatTemplate } = ctx.servable;
  const tools = (body.tools ?? []) as ToolDefinition[];
  const toolChoice = body.tool_choice ?? (tools.length ? 'auto' : 'none');
  // Like vLLM: the template still lists the tools under tool_choice "none"; we just don't parse calls.
  const useTools = tools.length > 0 && toolChoice !== 'none';
  const messages: ChatMessage[] = body.messages.map((m) => {
    // `developer` is OpenAI's newer name for `system`; chat templates only know the latter.
    // Null content becomes '' so templates that concatenate strings still render.
    const msg: ChatMessage = { role: m.role === 'developer' ? 'system' : m.role, content: contentText(m.content) ?? '' };
    if (typeof m.name === 'string') msg.name = m.name;
    if (m.role === 'assistant' && m.tool_calls)
      msg.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.function.name, arguments: argumentsObject(c.function.arguments) } }));
    if (m.role === 'tool') msg.tool_call_id = m.tool_call_id;
    return msg;
  });
  const kwargs: Record<string, unknown> = { ...(body.chat_template_kwargs ?? {}) };
  if (body.reasoning_effort) kwargs.reasoning_effort = body.reasoning_effort;
  const prompt = chatTemplate.render(messages, { tools: tools.length ? tools : undefined, addGenerationPrompt: body.add_generation_prompt ?? true, kwargs });
  const promptIds = await tokenizer.encode(prompt, { addSpecialTokens: false });
  return { promptIds, tools, toolChoice, useTools };
}

async function submitChat(ctx: Ctx, req: InferenceRequest, onEvent: (e: InferenceEvent) => void): Promise<InferenceHandle> {
  const body = parse(ChatCompletionRequest, req.body, req.validated);
  // OpenAI answers 400 here too; logprobs are returned either way, top ones only when asked properly.
  if (body.top_logprobs != null && body.logprobs !== true) {
    throw new BadRequestError("top_logprobs is only allowed when logprobs is true", 'top_logprobs');
  }
  const { tokenizer } = ctx.servable;
  const { promptIds, tools, toolChoice, useTools } = await renderChatPrompt(ctx, body);

  const maxTokens = maxTokensFor(body.max_completion_tokens ?? body.max_tokens, promptIds.length, ctx.engine.maxSequenceLength, null);
  const params = samplingParamsFrom(body, { maxTokens, topLogprobs: body.top_logprobs ?? 0, vocabSize: ctx.servable.model.vocabSize, defaults: ctx.samplingDefaults });
  checkSequenceCount(1, body.n ?? 1, ctx.caps);
  checkAnswerSize([{ promptTokens: promptIds.length, maxTokens }], body.n ?? 1, body.top_logprobs ?? 0, ctx.caps, 'top_logprobs');
  const constraint =
    (useTools ? forcedToolCallConstraint(tokenizer, tools, toolChoice) : null) ?? responseFormatConstraint(tokenizer, body.response_format);
  const n = body.n ?? 1;
  const meta = { id: `chatcmpl-${randomUUID().replaceAll('-', '')}`, created: Math.floor(Date.now() / 1000), model: req.model, promptTokenIds: promptIds };
  const genReq: GenerateRequest = { promptIds, params, n, adapter: req.adapter ?? null, constraint: constraint ?? undefined, entity: req.entity ?? undefined, cacheScope: req.entity ?? null };
  const formatOpts = { parseTools: useTools, parallelToolCalls: body.parallel_tool_calls ?? true };

  const ids = tokenIdsAsAsked(body.return_token_ids);

  if (body.stream) {
    const stream = new ChatChunkStream(meta, tokenizer, { ...formatOpts, includeUsage: body.stream_options?.include_usage ?? false });
    return ctx.engine.submit(genReq, (e) => {
      if (e.type === 'error') return onEvent({ type: 'error', status: e.status ?? 500, message: e.message });
      for (const chunk of stream.onEvent(e)) onEvent({ type: 'chunk', data: ids(chunk) });
      if (e.type === 'done') onEvent({ type: 'result', data: { usage: usageOf(e.promptTokens, e.completionTokens, e.cachedTokens) } });
    });
  }
  const finished: FinishedChoice[] = [];
  return ctx.engine.submit(genReq, (e) => {
    if (e.type === 'error') return onEvent({ type: 'error', status: e.status ?? 500, message: e.message });
    if (e.type === 'finished') finished.push(e);
    if (e.type === 'done') {
      const response = buildChatCompletion(meta, finished, tokenizer, formatOpts);
      response.usage = usageOf(response.usage.prompt_tokens, response.usage.completion_tokens, e.cachedTokens);
      onEvent({ type: 'result', data: ids(response) });
    }
  });
}

/** Keep token ids in responses only when the request set `return_token_ids` (vLLM's option). */
function tokenIdsAsAsked(returnTokenIds: boolean | null | undefined): <T>(response: T) => T {
  return returnTokenIds === true ? (response) => response : withoutTokenIds;
}

async function submitCompletion(ctx: Ctx, req: InferenceRequest, onEvent: (e: InferenceEvent) => void): Promise<InferenceHandle> {
  const body = parse(CompletionRequest, req.body, req.validated);
  const { tokenizer } = ctx.servable;
  // prompt: text, list of texts, token ids, or list of token-id lists.
  const p = body.prompt;
  const prompts: (string | number[])[] = typeof p === 'string' ? [p] : typeof p[0] === 'number' ? [p as number[]] : (p as (string | number[])[]);
  const vocabSize = ctx.servable.model.vocabSize;
  checkSequenceCount(prompts.length, body.n ?? 1, ctx.caps);
  for (const x of prompts) {
    if (typeof x === 'string') continue;
    const bad = x.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
    if (bad !== undefined) throw new BadRequestError(`prompt: token id ${bad} is outside the vocabulary (0..${vocabSize - 1})`, 'prompt', 'invalid_value');
  }
  const promptIds = await Promise.all(prompts.map(async (x) => (typeof x === 'string' ? tokenizer.encode(x, { addSpecialTokens: true }) : x)));
  const n = body.n ?? 1;
  const meta = { id: `cmpl-${randomUUID().replaceAll('-', '')}`, created: Math.floor(Date.now() / 1000), model: req.model };
  const topLogprobs = body.logprobs ?? 0;
  const requests = promptIds.map((ids) => {
    const maxTokens = maxTokensFor(body.max_tokens, ids.length, ctx.engine.maxSequenceLength, 16, 'prompt');
    const params = samplingParamsFrom(body, { maxTokens, topLogprobs, vocabSize: ctx.servable.model.vocabSize, defaults: ctx.samplingDefaults });
    return { promptIds: ids, params, n, adapter: req.adapter ?? null, entity: req.entity ?? undefined, cacheScope: req.entity ?? null } satisfies GenerateRequest;
  });
  checkAnswerSize(requests.map((r) => ({ promptTokens: r.promptIds.length, maxTokens: r.params.maxTokens })), n, topLogprobs, ctx.caps);
  // echo (whole responses only; unsupportedParams refuses it streamed): each prompt's own tokens scored in one pass.
  // Each prompt's echoed part is built once and shared by its n choices (not rebuilt per choice).
  let echoed: ReturnType<typeof echoedPrompt>[] | null = null;
  if (body.echo === true) {
    const model = ctx.servable.model;
    if (!model.promptLogits) throw new BadRequestError('echo is not supported by this engine', 'echo', 'unsupported_parameter');
    const scored: PromptTokenLogprob[][] = await Promise.all(promptIds.map(async (ids) => promptLogprobs(await model.promptLogits!(ids, req.adapter ?? null), ids, vocabSize, topLogprobs)));
    echoed = scored.map((prompt) => echoedPrompt(tokenizer, prompt, topLogprobs));
  }

  let open = requests.length;
  let promptTokens = 0;
  let completionTokens = 0;
  let cachedTokens = 0;
  const finished: { index: number; promptTokenIds: number[]; finished: FinishedChoice }[] = [];
  const textSoFar = new Map<number, number>();
  const includeUsage = body.stream_options?.include_usage ?? false;
  const handles: { cancel(): void }[] = [];
  const ids = tokenIdsAsAsked(body.return_token_ids);
  const onEngineEvent = (genReq: GenerateRequest, pi: number) => (e: EngineEvent) => {
    if (e.type === 'error') return onEvent({ type: 'error', status: e.status ?? 500, message: e.message });
    if (e.type === 'delta' && body.stream && (e.text || e.tokens.length)) {
      const index = pi * n + e.index;
      const lp = completionLogprobs(tokenizer, e.tokens, genReq.promptIds, topLogprobs);
      const base = textSoFar.get(index) ?? 0;
      // Offsets count from the start of this choice's text, not of the chunk.
      lp!.text_offset = lp!.text_offset.map((o) => o + base);
      textSoFar.set(index, base + e.text.length);
      onEvent({ type: 'chunk', data: ids(completionChunk(meta, index, e.text, lp, null, e.tokens.map((t) => t.id))) });
    }
    if (e.type === 'finished') {
      const index = pi * n + e.index;
      if (body.stream) onEvent({ type: 'chunk', data: ids(completionChunk(meta, index, '', null, { reason: e.finishReason, stopReason: e.stopReason }, [])) });
      else finished.push({ index, promptTokenIds: genReq.promptIds, finished: e });
    }
    if (e.type === 'done') {
      promptTokens += e.promptTokens;
      completionTokens += e.completionTokens;
      cachedTokens += e.cachedTokens;
      if (--open > 0) return;
      if (!body.stream) {
        const response = buildCompletion(meta, finished, tokenizer, { promptTokens, completionTokens }, topLogprobs);
        response.usage = usageOf(promptTokens, completionTokens, cachedTokens);
        if (echoed) response.choices = response.choices.map((c) => withEchoedPrompt(c, echoed![Math.floor(c.index / n)]));
        return onEvent({ type: 'result', data: ids(response) });
      }
      const usage = usageOf(promptTokens, completionTokens, cachedTokens);
      if (includeUsage) onEvent({ type: 'chunk', data: { ...meta, object: 'text_completion', choices: [], usage } });
      onEvent({ type: 'result', data: { usage } });
    }
  };
  try {
    requests.forEach((genReq, pi) => handles.push(ctx.engine.submit(genReq, onEngineEvent(genReq, pi))));
  } catch (err) {
    handles.forEach((h) => h.cancel()); // all prompts or none
    throw err;
  }
  return { cancel: () => handles.forEach((h) => h.cancel()) };
}
