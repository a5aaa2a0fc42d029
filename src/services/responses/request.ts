// A Responses API request (POST /v1/responses) → the chat completions request the engine already serves.
// Pure: the route validates the body with ResponsesRequest, calls translateResponsesRequest, and sends the
// chat request down the same path as /v1/chat/completions (the worker takes it as validated). Whatever
// cannot be honoured is refused here with a 400 naming the Responses field, never silently dropped.
//
// Hearth is stateless here (as Ollama is): nothing is stored, so `previous_response_id`, `conversation` and
// `item_reference` inputs are refused; `store: true` (the default of OpenAI's clients) is accepted and
// answered with `store: false` in the response, since retrieving it later is refused too.
import { z } from 'zod';
import { invalid, type DomainErrorOptions } from '../../errors/domain-errors.js';
import { ChatCompletionRequest, unsupportedParams, type ChatMessageParam } from '../../protocol/openai.js';
import {
  FunctionCallItem,
  FunctionCallOutputItem,
  FunctionToolParam,
  InputContentPart,
  InputMessageItem,
  type ResponseObject,
  type ResponsesRequest,
} from '../../schemas/responses.js';

/** The one `include` value Hearth can honour; the others name hosted tools or encrypted reasoning. */
export const INCLUDE_LOGPROBS = 'message.output_text.logprobs';

export interface TranslatedRequest {
  chat: ChatCompletionRequest;
  /** Logprobs go into output_text parts and delta events only when asked (`include` or `top_logprobs`). */
  logprobs: boolean;
}

const unsupported = (message: string, param: string) => invalid(message, { param, code: 'unsupported_parameter' });

const STATELESS =
  'Hearth does not store responses (its Responses API is stateless): send the whole conversation in `input`';

const isSet = (v: unknown) => v !== undefined && v !== null;

/** Request fields that would change the answer but that Hearth cannot honour: a 400 naming the first. */
export function checkSupportedParams(req: ResponsesRequest): void {
  if (isSet(req.previous_response_id)) throw unsupported(`previous_response_id: ${STATELESS}`, 'previous_response_id');
  if (isSet(req.conversation)) throw unsupported(`conversation: ${STATELESS}`, 'conversation');
  if (req.background === true) throw unsupported('background: true is not supported (responses are not stored, so there is nothing to poll); use stream: true for long answers', 'background');
  if (isSet(req.prompt)) throw unsupported('prompt: stored prompt templates are not supported; send `instructions` and `input`', 'prompt');
  for (const key of ['context_management', 'prompt_cache_options', 'prompt_cache_retention', 'moderation'] as const)
    if (isSet(req[key])) throw unsupported(`${key} is not supported by this server`, key);
  if (req.truncation === 'auto') throw unsupported("truncation: 'auto' is not supported (the input is never cut); use 'disabled' and keep the input within the model's context", 'truncation');
  if (req.service_tier && req.service_tier !== 'auto' && req.service_tier !== 'default')
    throw unsupported(`service_tier: '${req.service_tier}' is not supported; use 'auto' or 'default'`, 'service_tier');
  if (isSet(req.text?.verbosity)) throw unsupported('text.verbosity is not supported: the models served here have no verbosity control', 'text.verbosity');
  if (isSet(req.reasoning?.summary) || isSet(req.reasoning?.generate_summary))
    throw unsupported('reasoning.summary is not supported: no reasoning summaries are produced', 'reasoning.summary');
  (req.include ?? []).forEach((value, i) => {
    if (value !== INCLUDE_LOGPROBS) throw unsupported(`include[${i}]: '${value}' is not supported; only '${INCLUDE_LOGPROBS}' is`, `include[${i}]`);
  });
}

/** Parse one piece of the request with its schema; a failure is a 400 naming where it is. */
function parseAt<T>(schema: z.ZodType<T>, value: unknown, param: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const where = [param, ...issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`))].join('');
  const missing = issue.code === 'invalid_type' && (issue as { input?: unknown }).input === undefined;
  throw invalid(`Invalid request: ${where}: ${missing ? 'Field required' : issue.message}`, { param: where, code: missing ? 'missing_required_parameter' : 'invalid_value' });
}

type TextPart = { type: 'text'; text: string };

/** Text parts of a message or a function call's output; images, files and audio are refused. */
function textParts(content: string | Record<string, unknown>[], param: string): string | TextPart[] {
  if (typeof content === 'string') return content;
  return content.map((raw, j) => {
    const type = typeof raw.type === 'string' ? raw.type : String(raw.type);
    if (type !== 'input_text' && type !== 'output_text' && type !== 'refusal')
      throw unsupported(`${param}[${j}].type: '${type}' content is not supported; the models served here read text (input_text) only`, `${param}[${j}].type`);
    const part = parseAt(InputContentPart, raw, `${param}[${j}]`);
    return { type: 'text' as const, text: part.type === 'refusal' ? part.refusal : part.text };
  });
}

/** `input` → chat messages: `instructions` first, consecutive function_call items join one assistant turn. */
export function chatMessagesOf(req: Pick<ResponsesRequest, 'input' | 'instructions'>): ChatMessageParam[] {
  const messages: ChatMessageParam[] = [];
  if (req.instructions) messages.push({ role: 'system', content: req.instructions });
  if (typeof req.input === 'string') {
    messages.push({ role: 'user', content: req.input });
    return messages;
  }
  const callNames = new Map<string, string>();
  req.input.forEach((item, i) => {
    const at = `input[${i}]`;
    const type = item.type === undefined && 'role' in item ? 'message' : item.type;
    if (type === 'message') {
      const m = parseAt(InputMessageItem, item, at);
      messages.push({ role: m.role, content: textParts(m.content, `${at}.content`) } as ChatMessageParam);
    } else if (type === 'function_call') {
      const c = parseAt(FunctionCallItem, item, at);
      callNames.set(c.call_id, c.name);
      const call = { id: c.call_id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } };
      const last = messages[messages.length - 1];
      // An assistant turn that said something and then called tools is one chat message, as chat clients send it.
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      const o = parseAt(FunctionCallOutputItem, item, at);
      const name = callNames.get(o.call_id);
      if (name === undefined) throw invalid(`No tool call found for function call output with call_id ${o.call_id} (${at}); send the function_call item before its output`, { param: `${at}.call_id`, code: 'invalid_value' });
      messages.push({ role: 'tool', tool_call_id: o.call_id, name, content: textParts(o.output, `${at}.output`) });
    } else if (type === 'item_reference') {
      throw unsupported(`${at}: item_reference: ${STATELESS} (the AI SDK sends references unless its provider option \`store\` is false)`, `${at}.type`);
    } else {
      throw unsupported(`${at}.type: '${String(type)}' items are not supported; send message, function_call and function_call_output items`, `${at}.type`);
    }
  });
  if (!messages.some((m) => m.role !== 'system' && m.role !== 'developer'))
    throw invalid('input: at least one message other than instructions is required', { param: 'input', code: 'invalid_value' });
  return messages;
}

function chatTools(tools: ResponsesRequest['tools']): ChatCompletionRequest['tools'] {
  if (!tools?.length) return undefined;
  return tools.map((raw, i) => {
    if (raw.type !== 'function')
      throw unsupported(`tools[${i}].type: '${String(raw.type)}' is not supported; only function tools are (built-in tools such as web_search and file_search are hosted by OpenAI)`, `tools[${i}].type`);
    const t = parseAt(FunctionToolParam, raw, `tools[${i}]`);
    return {
      type: 'function' as const,
      function: { name: t.name, ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { parameters: t.parameters } : {}), strict: t.strict ?? null },
    };
  });
}

function chatToolChoice(choice: ResponsesRequest['tool_choice']): ChatCompletionRequest['tool_choice'] {
  if (choice === undefined || choice === null || typeof choice === 'string') return choice;
  if (choice.type === 'function' && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  throw unsupported(`tool_choice: ${JSON.stringify(choice).slice(0, 200)} is not supported; use 'none', 'auto', 'required' or {"type": "function", "name": …}`, 'tool_choice');
}

function chatResponseFormat(text: ResponsesRequest['text']): ChatCompletionRequest['response_format'] {
  const f = text?.format;
  if (!f || f.type === 'text') return undefined;
  if (f.type === 'json_object') return { type: 'json_object' };
  return { type: 'json_schema', json_schema: { name: f.name, schema: f.schema, ...(f.description ? { description: f.description } : {}), strict: f.strict ?? null } };
}

/**
 * A chat-request field name as the Responses request calls it (the worker and the chat checks name chat
 * fields): messages → input, max_completion_tokens → max_output_tokens, response_format → text.format, …
 */
export function responsesParamOf(chatParam: string): string {
  const rules: [RegExp, string][] = [
    [/^messages(\[\d+\])?.*/, 'input'],
    [/^max_(completion_)?tokens\b/, 'max_output_tokens'],
    [/^response_format(\.json_schema)?/, 'text.format'],
    [/^tools(\[\d+\])\.function/, 'tools$1'],
    [/^tool_choice\.function/, 'tool_choice'],
    [/^logprobs\b/, 'include'],
  ];
  for (const [pattern, replacement] of rules) if (pattern.test(chatParam)) return chatParam.replace(pattern, replacement);
  return chatParam;
}

/** Validate what only the whole request shows, and build the chat request the engine serves. */
export function translateResponsesRequest(req: ResponsesRequest): TranslatedRequest {
  checkSupportedParams(req);
  const logprobs = (req.include ?? []).includes(INCLUDE_LOGPROBS) || (req.top_logprobs ?? 0) > 0;
  const draft = {
    model: req.model,
    messages: chatMessagesOf(req),
    tools: chatTools(req.tools),
    tool_choice: chatToolChoice(req.tool_choice),
    parallel_tool_calls: req.parallel_tool_calls,
    response_format: chatResponseFormat(req.text),
    max_completion_tokens: req.max_output_tokens,
    temperature: req.temperature,
    top_p: req.top_p,
    top_k: req.top_k,
    min_p: req.min_p,
    seed: req.seed,
    presence_penalty: req.presence_penalty,
    frequency_penalty: req.frequency_penalty,
    repetition_penalty: req.repetition_penalty,
    stop: req.stop,
    user: req.user,
    reasoning_effort: req.reasoning?.effort,
    ...(logprobs ? { logprobs: true, top_logprobs: req.top_logprobs ?? 0 } : {}),
    stream: req.stream ?? false,
  };
  const parsed = ChatCompletionRequest.safeParse(JSON.parse(JSON.stringify(draft)));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const param = responsesParamOf(issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i ? `.${String(p)}` : String(p))).join(''));
    throw invalid(`Invalid request: ${param}: ${issue.message}`, { param, code: 'invalid_value' });
  }
  const problems = unsupportedParams(parsed.data);
  if (problems.length) {
    const named = problems.map(responsesParamOf);
    throw unsupported(`unsupported parameters: ${named.join(', ')}`, named[0].split(/[=: ]/)[0]);
  }
  return { chat: parsed.data, logprobs };
}

/** A worker's or the chat checks' error re-labelled with the Responses field it is about. */
export function relabelParam(opts: DomainErrorOptions): DomainErrorOptions {
  return opts.param ? { ...opts, param: responsesParamOf(opts.param) } : opts;
}

/** The response object before any output: what `response.created` carries, and the base of the final one. */
export function responseSkeleton(req: ResponsesRequest, id: string, createdAt: number): ResponseObject {
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    max_tool_calls: req.max_tool_calls ?? null,
    model: req.model,
    output: [],
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: req.reasoning?.effort ?? null, summary: null },
    service_tier: 'default',
    store: false,
    temperature: req.temperature ?? null,
    text: { format: req.text?.format ?? { type: 'text' }, verbosity: 'medium' },
    tool_choice: req.tool_choice ?? 'auto',
    tools: (req.tools ?? []).map((t) => ({ type: 'function', name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null })),
    top_logprobs: req.top_logprobs ?? 0,
    top_p: req.top_p ?? null,
    truncation: 'disabled',
    usage: null,
    user: req.user ?? null,
    metadata: req.metadata ?? {},
  };
}
