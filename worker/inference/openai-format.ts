// Builds OpenAI-shaped objects from engine events: chat.completion, chat.completion.chunk (SSE
// stream) and text_completion. Every choice carries per-token logprobs even when not asked, with
// `token` written as `token_id:<id>` and `bytes` the token's raw bytes (what ART's trainer parses,
// see spec §2.1), per-choice `token_ids` and top-level `prompt_token_ids` like vLLM (sent only when the
// request asks with `return_token_ids`: see withoutTokenIds).

import type {
  ChatCompletionChunk,
  ChatCompletionResponse,
  CompletionResponse,
  Usage,
} from '../../src/protocol/openai.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import type { EngineEvent } from './engine.js';
import type { TokenizerPort } from './model-port.js';
import type { GeneratedToken } from './sequence.js';
import type { PromptTokenLogprob } from './prompt-logprobs.js';
import { partialToolCalls, ToolCallStreamer, type StreamedPiece } from './tool-call-stream.js';
import { parseToolCalls, TOOL_CALL_OPEN, type ToolCall } from './tool-calls.js';

type LogprobEntry = ChatCompletionResponse['choices'][number]['logprobs']['content'] extends (infer E)[] | null ? E : never;
type FinishReason = ChatCompletionResponse['choices'][number]['finish_reason'];

/** OpenAI reports impossible tokens as -9999 (JSON has no -Infinity). */
function finiteLogprob(x: number): number {
  return Number.isFinite(x) ? x : -9999;
}

/**
 * vLLM's `return_token_ids`: the generated and prompt token ids go out only when asked. Dropped in place
 * otherwise, because ART sends every Choice back whole in its training uploads (token ids there were ~5% of
 * a body that the body limit caps) and OpenAI's SDKs do not know these fields.
 */
export function withoutTokenIds<T>(response: T): T {
  const r = response as { prompt_token_ids?: unknown; choices?: { token_ids?: unknown; prompt_token_ids?: unknown }[] };
  delete r.prompt_token_ids;
  for (const choice of r.choices ?? []) {
    delete choice.token_ids;
    delete choice.prompt_token_ids;
  }
  return response;
}

/** OpenAI's usage object; `prompt_tokens_details.cached_tokens` when some of the prompt came from the prefix cache. */
export function usageOf(promptTokens: number, completionTokens: number, cachedTokens = 0): Usage {
  const usage: Usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  if (cachedTokens > 0) usage.prompt_tokens_details = { cached_tokens: cachedTokens };
  return usage;
}

export function tokenLabel(id: number): string {
  return `token_id:${id}`;
}

/** The token's raw bytes; special tokens (EOS, <|im_end|>) are not text and give [] (spec §2.1 example). */
function tokenBytes(tokenizer: TokenizerPort, id: number): number[] {
  return tokenizer.isSpecial(id) ? [] : Array.from(tokenizer.tokenBytes(id));
}

export function logprobEntry(tokenizer: TokenizerPort, t: GeneratedToken): LogprobEntry {
  return {
    token: tokenLabel(t.id),
    logprob: finiteLogprob(t.logprob),
    bytes: tokenBytes(tokenizer, t.id),
    top_logprobs: t.topLogprobs.map((a) => ({ token: tokenLabel(a.id), logprob: finiteLogprob(a.logprob), bytes: tokenBytes(tokenizer, a.id) })),
  };
}

export interface ResponseMeta {
  id: string;
  created: number;
  model: string;
  promptTokenIds: number[];
}

/** What one finished choice looks like to the formatter (the engine's 'finished' event). */
export type FinishedChoice = Extract<EngineEvent, { type: 'finished' }>;

function finishReason(choice: FinishedChoice, toolCalls: readonly ToolCall[]): FinishReason {
  if (choice.finishReason === 'stop' && toolCalls.length) return 'tool_calls';
  return choice.finishReason;
}

/**
 * A whole answer's content and tool calls. A call cut by max_tokens (which does not parse) comes back as the
 * partial call it was, arguments as generated, with finish_reason "length", as OpenAI answers, rather than as
 * raw `<tool_call>` markup in `content`.
 */
function contentAndToolCalls(choice: FinishedChoice, parallelToolCalls: boolean): { content: string | null; toolCalls: ToolCall[] } {
  const maxCalls = parallelToolCalls ? Infinity : 1;
  const parsed = parseToolCalls(choice.text);
  if (!parsed.toolCalls.length && choice.finishReason === 'length' && choice.text.includes(TOOL_CALL_OPEN)) return partialToolCalls(choice.text, maxCalls);
  return { content: parsed.content, toolCalls: parsed.toolCalls.slice(0, maxCalls) };
}

export function newCompletionId(prefix: 'chatcmpl' | 'cmpl'): string {
  return `${prefix}-${crypto.randomUUID().replaceAll('-', '')}`;
}

/** The non-streaming chat answer. `parseTools` is false for tool_choice "none" or no tools. */
export function buildChatCompletion(
  meta: ResponseMeta,
  choices: FinishedChoice[],
  tokenizer: TokenizerPort,
  opts: { parseTools: boolean; parallelToolCalls?: boolean },
): ChatCompletionResponse {
  const sorted = [...choices].sort((a, b) => a.index - b.index);
  const completionTokens = sorted.reduce((a, c) => a + c.tokens.length, 0);
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    choices: sorted.map((c) => {
      const parsed = opts.parseTools ? contentAndToolCalls(c, opts.parallelToolCalls !== false) : { content: c.text, toolCalls: [] };
      const toolCalls = parsed.toolCalls;
      return {
        index: c.index,
        message: { role: 'assistant' as const, content: parsed.content, refusal: null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        logprobs: { content: c.tokens.map((t) => logprobEntry(tokenizer, t)), refusal: null },
        finish_reason: finishReason(c, toolCalls),
        stop_reason: c.stopReason,
        token_ids: c.tokens.map((t) => t.id),
      };
    }),
    usage: usageOf(meta.promptTokenIds.length, completionTokens),
    prompt_token_ids: meta.promptTokenIds,
    system_fingerprint: null,
  };
}

/**
 * Turns the engine's event stream into chat.completion.chunk objects, in OpenAI order: a role
 * chunk per choice, content chunks (with their logprobs and token ids), tool-call deltas, a
 * finish chunk per choice and, with include_usage, a last chunk with empty choices and usage.
 */
export class ChatChunkStream {
  private readonly toolStreams = new Map<number, ToolCallStreamer>();
  private readonly started = new Set<number>();
  private first = true;

  constructor(
    private readonly meta: ResponseMeta,
    private readonly tokenizer: TokenizerPort,
    private readonly opts: { parseTools: boolean; includeUsage: boolean; parallelToolCalls?: boolean },
  ) {}

  /**
   * Chunks for one engine event (possibly none). With tools, content and tool-call deltas come from the
   * ToolCallStreamer: no empty `content` beside a tool call, and a call's arguments in as many deltas as the
   * model wrote them. A delta with neither still goes out when it carries tokens (their logprobs and ids).
   */
  onEvent(e: EngineEvent): ChatCompletionChunk[] {
    const out: ChatCompletionChunk[] = [];
    if (e.type === 'delta' || e.type === 'finished') {
      if (!this.started.has(e.index)) {
        this.started.add(e.index);
        out.push(this.chunk([{ index: e.index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
      }
    }
    if (e.type === 'delta') {
      const piece = this.opts.parseTools ? this.toolStream(e.index).push(e.text) : { content: e.text, toolCalls: [] };
      if (piece.content || piece.toolCalls.length || e.tokens.length)
        out.push(
          this.chunk([
            {
              index: e.index,
              delta: deltaOf(piece),
              logprobs: { content: e.tokens.map((t) => logprobEntry(this.tokenizer, t)), refusal: null },
              finish_reason: null,
              token_ids: e.tokens.map((t) => t.id),
            },
          ]),
        );
    } else if (e.type === 'finished') {
      let toolCalls: readonly ToolCall[] = [];
      if (this.opts.parseTools) {
        const stream = this.toolStream(e.index);
        const rest = stream.finish(e.finishReason === 'length');
        toolCalls = stream.calls;
        if (rest.content || rest.toolCalls.length) out.push(this.chunk([{ index: e.index, delta: deltaOf(rest), logprobs: null, finish_reason: null }]));
      }
      out.push(this.chunk([{ index: e.index, delta: {}, logprobs: null, finish_reason: finishReason(e, toolCalls), stop_reason: e.stopReason }]));
    } else if (e.type === 'done' && this.opts.includeUsage) {
      out.push({ ...this.chunk([]), usage: usageOf(e.promptTokens, e.completionTokens, e.cachedTokens) });
    }
    return out;
  }

  private toolStream(index: number): ToolCallStreamer {
    let s = this.toolStreams.get(index);
    if (!s) this.toolStreams.set(index, (s = new ToolCallStreamer(this.opts.parallelToolCalls === false ? 1 : Infinity)));
    return s;
  }

  private chunk(choices: ChatCompletionChunk['choices']): ChatCompletionChunk {
    const c: ChatCompletionChunk = { id: this.meta.id, object: 'chat.completion.chunk', created: this.meta.created, model: this.meta.model, choices };
    if (this.opts.includeUsage) c.usage = null;
    if (this.first) {
      c.prompt_token_ids = this.meta.promptTokenIds;
      this.first = false;
    }
    return c;
  }
}

/** A chunk's delta: content only when there is some, tool-call deltas only when there are some. */
function deltaOf(piece: StreamedPiece): ChatCompletionChunk['choices'][number]['delta'] {
  return { ...(piece.content ? { content: piece.content } : {}), ...(piece.toolCalls.length ? { tool_calls: piece.toolCalls } : {}) };
}

/** Legacy completions logprobs (parallel arrays; text offsets are character offsets into `text`). */
export function completionLogprobs(
  tokenizer: TokenizerPort,
  tokens: GeneratedToken[],
  promptIds: number[],
  /** `logprobs: N` of the request: 0 (or none) gives `top_logprobs: null`, as OpenAI answers, not `[{}, …]`. */
  topLogprobs: number,
  skipSpecialTokens = true,
): CompletionResponse['choices'][number]['logprobs'] {
  return {
    tokens: tokens.map((t) => tokenLabel(t.id)),
    token_logprobs: tokens.map((t) => finiteLogprob(t.logprob)),
    top_logprobs: topLogprobs > 0 ? tokens.map((t) => Object.fromEntries(t.topLogprobs.map((a) => [tokenLabel(a.id), finiteLogprob(a.logprob)]))) : null,
    text_offset: textOffsets(tokenizer, tokens, promptIds, skipSpecialTokens),
  };
}

/** Where each token's text starts, counted from the first token's (a streamed delta is usually one token: 0). */
function textOffsets(tokenizer: TokenizerPort, tokens: GeneratedToken[], promptIds: number[], skipSpecialTokens: boolean): number[] {
  if (tokens.length <= 1) return tokens.map(() => 0);
  const detok = new IncrementalDetokenizer(tokenizer, skipSpecialTokens, promptIds);
  const offsets: number[] = [];
  let at = 0;
  for (const t of tokens) {
    offsets.push(at);
    at += detok.push(t.id).length;
  }
  return offsets;
}

export interface CompletionChoiceInput {
  /** Position in the response (prompt index × n + choice index). */
  index: number;
  promptTokenIds: number[];
  finished: FinishedChoice;
}

export function buildCompletion(
  meta: Omit<ResponseMeta, 'promptTokenIds'>,
  choices: CompletionChoiceInput[],
  tokenizer: TokenizerPort,
  /** Prompt tokens are counted once per prompt, not per choice, so the caller sums them. */
  usage: { promptTokens: number; completionTokens: number },
  topLogprobs = 0,
): CompletionResponse {
  const sorted = [...choices].sort((a, b) => a.index - b.index);
  const { promptTokens, completionTokens } = usage;
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: sorted.map((c) => ({
      index: c.index,
      text: c.finished.text,
      logprobs: completionLogprobs(tokenizer, c.finished.tokens, c.promptTokenIds, topLogprobs),
      finish_reason: c.finished.finishReason,
      stop_reason: c.finished.stopReason,
      token_ids: c.finished.tokens.map((t) => t.id),
      prompt_token_ids: c.promptTokenIds,
    })),
    usage: usageOf(promptTokens, completionTokens),
    system_fingerprint: null,
  };
}

type CompletionChoice = CompletionResponse['choices'][number];

/** A prompt as `echo` writes it before each of its choices: its text and its tokens' logprobs, built once per prompt. */
export interface EchoedPrompt {
  text: string;
  logprobs: NonNullable<CompletionChoice['logprobs']>;
}

/** The echoed part of a prompt (promptLogprobs(); the first token's logprob null, and its top_logprobs). */
export function echoedPrompt(tokenizer: TokenizerPort, prompt: PromptTokenLogprob[], topLogprobs: number): EchoedPrompt {
  const lp = completionLogprobs(tokenizer, prompt.map((t) => ({ id: t.id, logprob: t.logprob ?? 0, topLogprobs: t.topLogprobs })), [], topLogprobs)!;
  return {
    text: tokenizer.decode(prompt.map((t) => t.id)),
    logprobs: {
      tokens: lp.tokens,
      token_logprobs: prompt.map((t, i) => (t.logprob === null ? null : lp.token_logprobs[i])),
      top_logprobs: lp.top_logprobs && lp.top_logprobs.map((top, i) => (prompt[i].logprob === null ? null : top)),
      text_offset: lp.text_offset,
    },
  };
}

/**
 * A completion choice with its prompt in front (`echo`): the prompt's text before the generated text, and the
 * prompt tokens' logprobs before the generated tokens'. The prompt's entries are the shared objects of `prompt`
 * (echoedPrompt), not copies: n choices of one prompt hold one set of them.
 */
export function withEchoedPrompt(choice: CompletionChoice, prompt: EchoedPrompt): CompletionChoice {
  const lp = prompt.logprobs;
  const generated = choice.logprobs;
  return {
    ...choice,
    text: prompt.text + choice.text,
    logprobs: generated && {
      tokens: [...lp.tokens, ...generated.tokens],
      token_logprobs: [...lp.token_logprobs, ...generated.token_logprobs],
      top_logprobs: lp.top_logprobs && generated.top_logprobs ? [...lp.top_logprobs, ...generated.top_logprobs] : null,
      text_offset: [...lp.text_offset, ...generated.text_offset.map((o) => o + prompt.text.length)],
    },
  };
}

/** One streamed text_completion chunk (OpenAI streams completions as text_completion objects). */
export function completionChunk(
  meta: Omit<ResponseMeta, 'promptTokenIds'>,
  index: number,
  text: string,
  logprobs: CompletionResponse['choices'][number]['logprobs'],
  finish: { reason: FinishReason; stopReason: string | number | null } | null,
  tokenIds: number[],
): CompletionResponse {
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: [{ index, text, logprobs, finish_reason: finish?.reason ?? null, stop_reason: finish?.stopReason ?? null, token_ids: tokenIds }],
  };
}

/** Server-sent events framing. */
export function sseData(obj: unknown): string {
  return `data: ${JSON.stringify(obj)}\n\n`;
}
export const SSE_DONE = 'data: [DONE]\n\n';
