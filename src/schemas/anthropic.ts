// Wire shapes of Anthropic's Messages API as Hearth serves it (POST /v1/messages, POST /v1/messages/count_tokens),
// after the @anthropic-ai/sdk type definitions: the request fields Hearth implements, the blocks it can translate
// to a chat request, and the message it answers. Blocks and fields it cannot serve are recognised here and refused
// by name in src/api/anthropic/to-chat.ts (400 invalid_request_error), never ignored.
import { z } from 'zod';

export const TextBlockParam = z.looseObject({ type: z.literal('text'), text: z.string() });

export const ToolUseBlockParam = z.looseObject({ type: z.literal('tool_use'), id: z.string().min(1), name: z.string().min(1), input: z.unknown() });

export const ToolResultBlockParam = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]).optional(),
  is_error: z.boolean().optional(),
});

/** Block types of the API that Hearth recognises but cannot serve (no vision, documents, thinking or server tools). */
export const UNSUPPORTED_BLOCK_TYPES = [
  'image', 'document', 'search_result', 'thinking', 'redacted_thinking', 'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result',
  'code_execution_tool_result', 'bash_code_execution_tool_result', 'text_editor_code_execution_tool_result', 'tool_search_tool_result',
  'container_upload', 'tool_reference', 'mcp_tool_use', 'mcp_tool_result',
] as const;
const UnsupportedBlock = z.looseObject({ type: z.enum(UNSUPPORTED_BLOCK_TYPES) });

export const ContentBlockParam = z.discriminatedUnion('type', [TextBlockParam, ToolUseBlockParam, ToolResultBlockParam, UnsupportedBlock]);
export type ContentBlockParam = z.infer<typeof ContentBlockParam>;

export const MessageParam = z.looseObject({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(ContentBlockParam)]),
});
export type MessageParam = z.infer<typeof MessageParam>;

/** A client tool: name, description and the JSON schema of its input. Server tools (a `type` such as bash_20250124) are refused. */
export const ToolParam = z.looseObject({
  type: z.string().nullish(),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'tool names are 1 to 64 letters, digits, _ or -'),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal('object') }),
});

export const ToolChoiceParam = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('tool'), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('none') }),
]);

const System = z.union([z.string(), z.array(TextBlockParam)]);

/** What count_tokens takes: the prompt half of a create request. */
const promptFields = {
  model: z.string().min(1),
  messages: z.array(MessageParam).min(1),
  system: System.optional(),
  tools: z.array(ToolParam).optional(),
  tool_choice: ToolChoiceParam.optional(),
  thinking: z.looseObject({ type: z.string() }).optional(),
  output_config: z.looseObject({ effort: z.string().nullish(), format: z.looseObject({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) }).nullish() }).optional(),
};

export const MessageCreateRequest = z.looseObject({
  ...promptFields,
  max_tokens: z.number().int().min(1),
  stop_sequences: z.array(z.string().min(1)).optional(),
  stream: z.boolean().optional(),
  // In Anthropic's API (temperature 0–1); not in every SDK version's types, sent by clients that set them.
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  metadata: z.looseObject({ user_id: z.string().nullish() }).optional(),
}).meta({ id: 'AnthropicMessageCreateRequest' });
export type MessageCreateRequest = z.infer<typeof MessageCreateRequest>;

export const MessageCountTokensRequest = z.looseObject(promptFields).meta({ id: 'AnthropicMessageCountTokensRequest' });
export type MessageCountTokensRequest = z.infer<typeof MessageCountTokensRequest>;

export const StopReason = z.enum(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'model_context_window_exceeded']);
export type StopReason = z.infer<typeof StopReason>;

export const AnthropicUsage = z.object({
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  /** Hearth reuses cached prompt prefixes without metering them: these are null (not known), not 0. */
  cache_creation_input_tokens: z.null(),
  cache_read_input_tokens: z.null(),
  cache_creation: z.null(),
  server_tool_use: z.null(),
  output_tokens_details: z.null(),
  inference_geo: z.null(),
  service_tier: z.literal('standard'),
});

export const ResponseContentBlock = z.union([
  z.object({ type: z.literal('text'), text: z.string(), citations: z.null() }),
  z.object({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.unknown(), caller: z.object({ type: z.literal('direct') }) }),
]);
export type ResponseContentBlock = z.infer<typeof ResponseContentBlock>;

export const AnthropicMessage = z.object({
  id: z.string(),
  type: z.literal('message'),
  role: z.literal('assistant'),
  model: z.string(),
  content: z.array(ResponseContentBlock),
  stop_reason: StopReason,
  stop_sequence: z.string().nullable(),
  stop_details: z.null(),
  container: z.null(),
  diagnostics: z.null(),
  usage: AnthropicUsage,
}).meta({ id: 'AnthropicMessage' });
export type AnthropicMessage = z.infer<typeof AnthropicMessage>;

export const MessageTokensCount = z.object({ input_tokens: z.number().int() }).meta({ id: 'AnthropicMessageTokensCount' });

/** Every error on the Anthropic routes (the type follows the status: src/api/errors.ts anthropicErrorType). */
export const AnthropicError = z.object({
  type: z.literal('error'),
  error: z.object({ type: z.string(), message: z.string() }),
}).meta({ id: 'AnthropicError' });
