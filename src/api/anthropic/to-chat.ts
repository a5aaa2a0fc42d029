// An Anthropic Messages request → the chat-completions request the inference workers run. Pure: throws `invalid`
// (400 invalid_request_error) naming the field for what Hearth cannot serve, instead of dropping it.
//
// The mapping: `system` (string or text blocks) and role "system" messages → system messages; user text blocks →
// a user message, each tool_result block → a tool message (in block order, so results stay right after the
// assistant's calls, as chat templates expect); assistant text → content and tool_use blocks → tool_calls (input
// as JSON arguments); tools → function tools; tool_choice auto / any / tool / none → "auto" / "required" / that
// function / "none", disable_parallel_tool_use → parallel_tool_calls false; stop_sequences → stop; output_config's
// json_schema format → response_format.
import { invalid } from '../../errors/domain-errors.js';
import { MessageCreateRequest, UNSUPPORTED_BLOCK_TYPES, type ContentBlockParam, type MessageCountTokensRequest, type MessageParam } from '../../schemas/anthropic.js';

type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[] }
  | { role: 'tool'; content: string; tool_call_id: string };

/** The chat body (ChatCompletionRequest's input shape) for a create request; `stream` as asked. */
export function chatRequestOf(req: MessageCreateRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { ...promptOf(req), max_tokens: req.max_tokens };
  if (req.stop_sequences?.length) body.stop = req.stop_sequences;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.top_p !== undefined) body.top_p = req.top_p;
  if (req.top_k !== undefined) body.top_k = req.top_k;
  if (req.stream) {
    body.stream = true;
    // The first chunk then carries the prompt's token ids, whose count message_start reports as input_tokens.
    body.return_token_ids = true;
  }
  return body;
}

/** The prompt half (model, messages, tools, tool_choice, format): what count_tokens renders and counts. */
export function promptOf(req: MessageCountTokensRequest | MessageCreateRequest): Record<string, unknown> {
  refuseUnsupported(req);
  const messages: ChatMessage[] = [];
  const system = systemText(req.system);
  if (system !== null) messages.push({ role: 'system', content: system });
  req.messages.forEach((m, i) => messages.push(...chatMessagesOf(m, i)));
  const last = req.messages[req.messages.length - 1];
  if (last.role === 'assistant')
    throw invalid('messages: the last message must be a user message (continuing a prefilled assistant turn is not supported by this server)', { param: `messages.${req.messages.length - 1}.role` });
  const body: Record<string, unknown> = { model: req.model, messages };
  if (req.tools?.length) {
    body.tools = req.tools.map((t) => ({ type: 'function', function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.input_schema } }));
  }
  const choice = req.tool_choice;
  if (choice) {
    if (choice.type !== 'auto' && choice.type !== 'none' && !req.tools?.length) throw invalid(`tool_choice: type "${choice.type}" needs tools`, { param: 'tool_choice' });
    if (choice.type === 'tool' && !req.tools!.some((t) => t.name === choice.name)) throw invalid(`tool_choice.name: no tool named "${choice.name}" in tools`, { param: 'tool_choice.name' });
    body.tool_choice = choice.type === 'auto' ? 'auto' : choice.type === 'any' ? 'required' : choice.type === 'none' ? 'none' : { type: 'function', function: { name: choice.name } };
    if ('disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true) body.parallel_tool_calls = false;
  }
  const format = req.output_config?.format;
  if (format) body.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict: true } };
  return body;
}

/** Request fields of Anthropic's API that change nothing Hearth computes (hints, routing, bookkeeping): accepted. */
const NO_EFFECT_FIELDS = new Set(['metadata', 'service_tier', 'cache_control', 'inference_geo', 'speed', 'diagnostics', 'user_profile_id', 'workspace_id']);
/** Fields that would change the result and that Hearth does not implement: refused when set. */
const REFUSED_FIELDS = ['container', 'mcp_servers', 'context_management'];

function refuseUnsupported(req: MessageCountTokensRequest | MessageCreateRequest): void {
  const r = req as Record<string, unknown>;
  for (const key of REFUSED_FIELDS) {
    if (r[key] !== undefined && r[key] !== null) throw invalid(`${key}: not supported by this server`, { param: key });
  }
  // Anything else the schema does not name is refused as Anthropic's API refuses it, rather than silently ignored.
  const unknown = Object.keys(r).find((k) => !(k in MessageCreateRequest.shape) && !NO_EFFECT_FIELDS.has(k) && !REFUSED_FIELDS.includes(k));
  if (unknown !== undefined) throw invalid(`${unknown}: Extra inputs are not permitted`, { param: unknown });
  if (req.thinking && req.thinking.type !== 'disabled') throw invalid(`thinking: extended thinking ("${req.thinking.type}") is not supported by this server; leave it out or send {"type": "disabled"}`, { param: 'thinking' });
  if (req.output_config?.effort != null) throw invalid('output_config.effort: not supported by this server', { param: 'output_config.effort' });
  req.tools?.forEach((t, i) => {
    if (t.type != null && t.type !== 'custom') throw invalid(`tools.${i}.type: server tools ("${t.type}") are not supported by this server; give client tools (name, description, input_schema)`, { param: `tools.${i}.type` });
  });
}

function systemText(system: MessageCreateRequest['system']): string | null {
  if (system === undefined) return null;
  return typeof system === 'string' ? system : system.map((b) => b.text).join('\n');
}

function textOf(content: string | { type: string; text?: string }[] | undefined, where: string): string {
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  return content
    .map((b, i) => {
      if (b.type !== 'text' || typeof b.text !== 'string') throw invalid(`${where}.${i}: only text blocks are supported inside a tool_result (got "${b.type}")`, { param: `${where}.${i}.type` });
      return b.text;
    })
    .join('\n');
}

function refuseBlock(block: ContentBlockParam, where: string): never {
  const type = block.type;
  const known = (UNSUPPORTED_BLOCK_TYPES as readonly string[]).includes(type);
  throw invalid(`${where}: ${known ? `${type} blocks are not supported by this server` : `unknown block type "${type}"`} (text, tool_use and tool_result are)`, { param: `${where}.type` });
}

function chatMessagesOf(m: MessageParam, i: number): ChatMessage[] {
  const where = `messages.${i}.content`;
  if (typeof m.content === 'string') return [m.role === 'assistant' ? { role: 'assistant', content: m.content } : { role: m.role, content: m.content }];
  if (m.role === 'assistant') {
    const text: string[] = [];
    const calls: NonNullable<Extract<ChatMessage, { role: 'assistant' }>['tool_calls']> = [];
    m.content.forEach((b, j) => {
      if (b.type === 'text') text.push(b.text);
      else if (b.type === 'tool_use') calls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
      else if (b.type === 'tool_result') throw invalid(`${where}.${j}: tool_result blocks belong in user messages`, { param: `${where}.${j}.type` });
      else refuseBlock(b, `${where}.${j}`);
    });
    const content = text.join('');
    return [{ role: 'assistant', content: calls.length && !content ? null : content, ...(calls.length ? { tool_calls: calls } : {}) }];
  }
  // User (or system) blocks in order: runs of text become one message, each tool result its own tool message.
  const out: ChatMessage[] = [];
  let text: string[] = [];
  const flush = () => {
    if (text.length) out.push({ role: m.role as 'user' | 'system', content: text.join('\n') });
    text = [];
  };
  m.content.forEach((b, j) => {
    if (b.type === 'text') text.push(b.text);
    else if (b.type === 'tool_result' && m.role === 'user') {
      flush();
      const result = textOf(b.content, `${where}.${j}.content`);
      // The chat machinery has no error flag on tool results: the text says it, as the model would read it.
      out.push({ role: 'tool', tool_call_id: b.tool_use_id, content: b.is_error ? `Error: ${result}` : result });
    } else if (b.type === 'tool_use' || b.type === 'tool_result') throw invalid(`${where}.${j}: ${b.type} blocks do not belong in ${m.role} messages`, { param: `${where}.${j}.type` });
    else refuseBlock(b, `${where}.${j}`);
  });
  flush();
  if (!out.length) out.push({ role: m.role as 'user' | 'system', content: '' });
  return out;
}
