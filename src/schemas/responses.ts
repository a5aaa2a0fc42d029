// Wire shapes of POST /v1/responses (OpenAI's Responses API) as Hearth serves it: stateless, one assistant turn
// translated onto the chat-completions engine (src/services/responses/). Every request field OpenAI documents is
// named here, so an unknown one answers 400 `unknown_parameter` as api.openai.com does; the fields Hearth cannot
// honour are accepted by the schema and refused with a 400 naming them by `unsupportedResponsesParams`
// (src/services/responses/request.ts). Input items, tools and tool_choice are checked item by item there too,
// so an unsupported item type gets its own message instead of a union error.
import { z } from 'zod';

const JsonObject = z.record(z.string(), z.unknown());

export const ResponsesTextFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    name: z.string().min(1).max(64),
    schema: JsonObject,
    description: z.string().nullish(),
    strict: z.boolean().nullish(),
  }),
]);
export type ResponsesTextFormat = z.infer<typeof ResponsesTextFormat>;

export const ResponsesRequest = z
  .strictObject({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(JsonObject)]),
    instructions: z.string().nullish(),
    tools: z.array(JsonObject).nullish(),
    tool_choice: z.union([z.enum(['none', 'auto', 'required']), JsonObject]).nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    max_tool_calls: z.number().int().min(1).nullish(),
    text: z.strictObject({ format: ResponsesTextFormat.nullish(), verbosity: z.enum(['low', 'medium', 'high']).nullish() }).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    max_output_tokens: z.number().int().min(1).nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    include: z.array(z.string()).nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.looseObject({ include_obfuscation: z.boolean().nullish() }).nullish(),
    store: z.boolean().nullish(),
    metadata: z.record(z.string().max(64), z.string().max(512)).nullish(),
    user: z.string().nullish(),
    safety_identifier: z.string().nullish(),
    prompt_cache_key: z.string().nullish(),
    service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullish(),
    truncation: z.enum(['auto', 'disabled']).nullish(),
    reasoning: z.looseObject({ effort: z.string().nullish(), summary: z.string().nullish(), generate_summary: z.string().nullish() }).nullish(),
    // Refused when set (stateful or hosted features; see unsupportedResponsesParams).
    previous_response_id: z.string().nullish(),
    conversation: z.unknown().optional(),
    background: z.boolean().nullish(),
    prompt: z.unknown().optional(),
    context_management: z.unknown().optional(),
    prompt_cache_options: z.unknown().optional(),
    prompt_cache_retention: z.unknown().optional(),
    moderation: z.unknown().optional(),
    // Hearth's (vLLM's) sampling extras, as on the chat route.
    seed: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).nullish(),
    top_k: z.number().int().min(-1).nullish(),
    min_p: z.number().min(0).max(1).nullish(),
    presence_penalty: z.number().min(-2).max(2).nullish(),
    frequency_penalty: z.number().min(-2).max(2).nullish(),
    repetition_penalty: z.number().gt(0).max(10).nullish(),
    stop: z.union([z.string(), z.array(z.string())]).nullish(),
  })
  .meta({ id: 'ResponsesRequest' });
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

// ---------------------------------------------------------------- items the translation reads from `input`

const InputText = z.looseObject({ type: z.literal('input_text'), text: z.string() });
const OutputText = z.looseObject({ type: z.literal('output_text'), text: z.string() });
const Refusal = z.looseObject({ type: z.literal('refusal'), refusal: z.string() });
/** Text parts of a message (an assistant message echoed back from an earlier output carries output_text). */
export const InputContentPart = z.discriminatedUnion('type', [InputText, OutputText, Refusal]);

export const InputMessageItem = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(JsonObject)]),
  id: z.string().optional(),
  status: z.string().optional(),
});

export const FunctionCallItem = z.looseObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().optional(),
  status: z.string().optional(),
});

export const FunctionCallOutputItem = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(JsonObject)]),
  id: z.string().nullish(),
  status: z.string().nullish(),
});

export const FunctionToolParam = z.looseObject({
  type: z.literal('function'),
  name: z.string().min(1).max(64),
  description: z.string().nullish(),
  parameters: JsonObject.nullish(),
  strict: z.boolean().nullish(),
});
export type FunctionToolParam = z.infer<typeof FunctionToolParam>;

// ---------------------------------------------------------------- the response object (for the OpenAPI document)

const LogprobTop = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()) });
export const OutputTextLogprob = LogprobTop.extend({ top_logprobs: z.array(LogprobTop) });
export type OutputTextLogprob = z.infer<typeof OutputTextLogprob>;

export const OutputTextPart = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()),
  logprobs: z.array(OutputTextLogprob),
});
export type OutputTextPart = z.infer<typeof OutputTextPart>;

const ItemStatus = z.enum(['in_progress', 'completed', 'incomplete']);

export const OutputMessage = z.object({
  id: z.string(),
  type: z.literal('message'),
  status: ItemStatus,
  role: z.literal('assistant'),
  content: z.array(OutputTextPart),
});
export type OutputMessage = z.infer<typeof OutputMessage>;

export const OutputFunctionCall = z.object({
  id: z.string(),
  type: z.literal('function_call'),
  status: ItemStatus,
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
});
export type OutputFunctionCall = z.infer<typeof OutputFunctionCall>;

export const OutputItem = z.discriminatedUnion('type', [OutputMessage, OutputFunctionCall]);
export type OutputItem = z.infer<typeof OutputItem>;

export const ResponsesUsage = z.object({
  input_tokens: z.number().int(),
  input_tokens_details: z.object({ cached_tokens: z.number().int() }),
  output_tokens: z.number().int(),
  output_tokens_details: z.object({ reasoning_tokens: z.number().int() }),
  total_tokens: z.number().int(),
});
export type ResponsesUsage = z.infer<typeof ResponsesUsage>;

export const ResponseObject = z
  .object({
    id: z.string(),
    object: z.literal('response'),
    created_at: z.number().int(),
    status: z.enum(['completed', 'incomplete', 'in_progress', 'failed']),
    background: z.boolean(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    incomplete_details: z.object({ reason: z.string() }).nullable(),
    instructions: z.string().nullable(),
    max_output_tokens: z.number().int().nullable(),
    max_tool_calls: z.number().int().nullable(),
    model: z.string(),
    output: z.array(OutputItem),
    parallel_tool_calls: z.boolean(),
    previous_response_id: z.null(),
    reasoning: z.object({ effort: z.string().nullable(), summary: z.string().nullable() }),
    service_tier: z.string(),
    store: z.boolean(),
    temperature: z.number().nullable(),
    text: z.object({ format: z.unknown(), verbosity: z.string() }),
    tool_choice: z.unknown(),
    tools: z.array(z.unknown()),
    top_logprobs: z.number().int(),
    top_p: z.number().nullable(),
    truncation: z.string(),
    usage: ResponsesUsage.nullable(),
    user: z.string().nullable(),
    metadata: z.record(z.string(), z.string()),
  })
  .meta({ id: 'Response' });
export type ResponseObject = z.infer<typeof ResponseObject>;
