// Wire shapes of the OpenAI-compatible inference API: POST /v1/chat/completions and
// POST /v1/completions (requests and responses, streaming chunks included), with the parameter
// ranges OpenAI enforces plus vLLM's sampling extras. Unknown extra fields are accepted (the
// W&B spec declares additionalProperties), but extras we know would change the result and that
// we do not implement are named by `unsupportedParams` so the route can answer 400.
import { z } from 'zod';
import { SchemaTooComplexError, unsupportedSchemaFeatures } from '../domain/json-schema.js';

// ---------------------------------------------------------------- messages

export const TextContentPart = z.looseObject({ type: z.literal('text'), text: z.string() });
/** Any content part; non-text parts are reported by unsupportedParams rather than failing validation. */
export const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const Content = z.union([z.string(), z.array(ContentPart)]);

export const ToolCall = z.looseObject({
  id: z.string(),
  type: z.literal('function').default('function'),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

export const ChatMessageParam = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('developer'), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('user'), content: Content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal('assistant'),
    content: Content.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(ToolCall).nullish(),
    refusal: z.string().nullish(),
  }),
  z.looseObject({ role: z.literal('tool'), content: Content, tool_call_id: z.string(), name: z.string().optional() }),
]);
export type ChatMessageParam = z.infer<typeof ChatMessageParam>;

export const FunctionTool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().min(1).max(64),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

export const ToolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
]);

export const ResponseFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: z.string().max(64).default('response'),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

// ---------------------------------------------------------------- sampling parameters

const Stop = z.union([z.string(), z.array(z.string())]).nullish();

/** Parameters shared by chat and text completions (OpenAI ranges; vLLM extras). */
const samplingFields = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(-1).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  seed: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).nullish(),
  stop: Stop,
  stop_token_ids: z.array(z.number().int().min(0)).nullish(),
  n: z.number().int().min(1).max(128).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().gt(0).max(10).nullish(),
  logit_bias: z.record(z.string().regex(/^\d+$/, 'logit_bias keys must be token ids'), z.number().min(-100).max(100)).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() }).nullish(),
  user: z.string().nullish(),
  min_tokens: z.number().int().min(0).nullish(),
  ignore_eos: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  // Accepted for compatibility: logprob tokens are always written `token_id:<id>`.
  return_tokens_as_token_ids: z.boolean().nullish(),
  /** vLLM's option: answer with `token_ids` per choice and `prompt_token_ids` (absent otherwise). */
  return_token_ids: z.boolean().nullish(),
};

export const ChatCompletionRequest = z.looseObject({
  ...samplingFields,
  messages: z.array(ChatMessageParam).min(1),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  tools: z.array(FunctionTool).nullish(),
  tool_choice: ToolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: ResponseFormat.nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  reasoning_effort: z.string().nullish(),
}).meta({ id: 'ChatCompletionRequest' });
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

export const CompletionRequest = z.looseObject({
  ...samplingFields,
  prompt: z.union([z.string(), z.array(z.string()).min(1), z.array(z.number().int().min(0)).min(1), z.array(z.array(z.number().int().min(0)).min(1)).min(1)]),
  max_tokens: z.number().int().min(1).nullish(),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.boolean().nullish(),
  best_of: z.number().int().min(1).nullish(),
  suffix: z.string().nullish(),
}).meta({ id: 'CompletionRequest' });
export type CompletionRequest = z.infer<typeof CompletionRequest>;

/**
 * Parameters that would change the result but that Hearth does not implement. The route answers
 * 400 naming them instead of silently ignoring them. Each entry starts with the parameter's path as OpenAI
 * writes `param` (`tools[0].function.parameters`), then optionally `: why`, `=value` or ` (why)`: see unsupportedParamPath.
 */
export function unsupportedParams(req: ChatCompletionRequest | CompletionRequest): string[] {
  const r = req as Record<string, unknown>;
  const out: string[] = [];
  const set = (k: string) => r[k] !== undefined && r[k] !== null && r[k] !== false;
  // vLLM / legacy OpenAI extras we do not implement.
  for (const k of [
    'prompt_logprobs', 'use_beam_search', 'length_penalty', 'guided_json', 'guided_regex', 'guided_choice', 'guided_grammar',
    'structured_outputs', 'bad_words', 'allowed_token_ids', 'truncate_prompt_tokens', 'logits_processors', 'functions',
    'function_call', 'audio', 'web_search_options', 'continue_final_message', 'suffix', 'guided_decoding_backend',
    // OpenAI's: how terse the answer should be (GPT-5), a small local model has no such control; `store: true`
    // keeps the completion for later retrieval, and Hearth keeps none (`store: false` is what it does anyway).
    'verbosity', 'store',
  ])
    if (set(k)) out.push(k);
  if (Array.isArray(r.modalities) && r.modalities.some((m) => m !== 'text')) out.push('modalities');
  if (Array.isArray(r.messages)) {
    const chat = req as ChatCompletionRequest;
    if (set('echo')) out.push('echo');
    chat.messages.forEach((m, i) => {
      if (Array.isArray(m.content))
        m.content.forEach((p, j) => {
          if (p.type !== 'text' || typeof p.text !== 'string') out.push(`messages[${i}].content[${j}].type=${p.type}`);
        });
    });
    const rf = chat.response_format;
    if (rf?.type === 'json_schema' && rf.json_schema.schema)
      for (const f of schemaFeaturesAt(rf.json_schema.schema, 'response_format')) out.push(`response_format.json_schema.schema: ${f}`);
    const choice = chat.tool_choice;
    // A forced call (required, or a named function) is decoded under its tools' parameter schemas.
    if (choice === 'required' || (choice && typeof choice === 'object'))
      (chat.tools ?? []).forEach((t, i) => {
        if (typeof choice === 'object' && t.function.name !== choice.function.name) return;
        if (t.function.parameters) for (const f of schemaFeaturesAt(t.function.parameters, `tools[${i}].function.parameters`)) out.push(`tools[${i}].function.parameters: ${f}`);
      });
    if (choice && typeof choice === 'object' && !(chat.tools ?? []).some((t) => t.function.name === choice.function.name))
      out.push(`tool_choice.function.name=${choice.function.name} (no such tool)`);
    if (choice && (choice === 'required' || typeof choice === 'object') && !(chat.tools ?? []).length) out.push('tool_choice (no tools given)');
  } else {
    // echo is implemented for whole responses; streamed, the prompt would have to be sent as a first chunk.
    if (set('echo') && r.stream === true) out.push('echo (with stream)');
    if (typeof r.best_of === 'number' && r.best_of !== ((r.n as number | null | undefined) ?? 1)) out.push('best_of');
  }
  return out;
}

/** OpenAI's `param` for an entry of unsupportedParams: its leading path. */
export function unsupportedParamPath(entry: string): string {
  return /^[^:=( ]+/.exec(entry)?.[0] ?? entry;
}

// ---------------------------------------------------------------- responses

export const TopLogprob = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()).nullable() });
export const TokenLogprobEntry = TopLogprob.extend({ top_logprobs: z.array(TopLogprob) });
export const ChoiceLogprobs = z.object({ content: z.array(TokenLogprobEntry).nullable(), refusal: z.array(TokenLogprobEntry).nullable() });

export const ToolCallOut = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const FinishReason = z.enum(['stop', 'length', 'tool_calls', 'abort']);

export const Usage = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  /** Prompt tokens served from the prefix cache (OpenAI's field; present when some were). */
  prompt_tokens_details: z.object({ cached_tokens: z.number().int() }).optional(),
});
export type Usage = z.infer<typeof Usage>;

export const ChatCompletionResponse = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({
          role: z.literal('assistant'),
          content: z.string().nullable(),
          refusal: z.null(),
          /** Absent when the model called no tool (OpenAI's answer), never []. */
          tool_calls: z.array(ToolCallOut).optional(),
        }),
        logprobs: ChoiceLogprobs,
        finish_reason: FinishReason,
        stop_reason: z.union([z.string(), z.number().int()]).nullable(),
        /** Only with return_token_ids. */
        token_ids: z.array(z.number().int()).optional(),
      }),
    ),
    usage: Usage,
    /** Only with return_token_ids. */
    prompt_token_ids: z.array(z.number().int()).optional(),
    system_fingerprint: z.string().nullable(),
  })
  .meta({ id: 'ChatCompletionResponse' });
export type ChatCompletionResponse = z.infer<typeof ChatCompletionResponse>;

export const ToolCallDelta = z.object({
  index: z.number().int(),
  id: z.string().optional(),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string().optional() }),
});

export const ChatCompletionChunk = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion.chunk'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        delta: z.object({
          role: z.literal('assistant').optional(),
          content: z.string().nullable().optional(),
          tool_calls: z.array(ToolCallDelta).optional(),
        }),
        logprobs: ChoiceLogprobs.nullable(),
        finish_reason: FinishReason.nullable(),
        stop_reason: z.union([z.string(), z.number().int()]).nullable().optional(),
        token_ids: z.array(z.number().int()).nullable().optional(),
      }),
    ),
    usage: Usage.nullable().optional(),
    prompt_token_ids: z.array(z.number().int()).nullable().optional(),
    system_fingerprint: z.string().nullable().optional(),
  })
  .meta({ id: 'ChatCompletionChunk' });
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;

/** Legacy completions logprobs: parallel arrays (with `echo`, the prompt's first token has null entries). */
export const CompletionLogprobs = z.object({
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number().nullable()),
  top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullable(),
  text_offset: z.array(z.number().int()),
});

export const CompletionResponse = z
  .object({
    id: z.string(),
    object: z.literal('text_completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        text: z.string(),
        logprobs: CompletionLogprobs.nullable(),
        finish_reason: FinishReason.nullable(),
        stop_reason: z.union([z.string(), z.number().int()]).nullable(),
        token_ids: z.array(z.number().int()).nullable().optional(),
        prompt_token_ids: z.array(z.number().int()).nullable().optional(),
      }),
    ),
    usage: Usage.nullable().optional(),
    system_fingerprint: z.string().nullable().optional(),
  })
  .meta({ id: 'CompletionResponse' });
export type CompletionResponse = z.infer<typeof CompletionResponse>;

/** unsupportedSchemaFeatures of the schema at `param`; a schema past the compile caps is that field's 400. */
function schemaFeaturesAt(schema: unknown, param: string): string[] {
  try {
    return unsupportedSchemaFeatures(schema);
  } catch (err) {
    if (err instanceof SchemaTooComplexError) throw new SchemaTooComplexError(err.message, param);
    throw err;
  }
}
