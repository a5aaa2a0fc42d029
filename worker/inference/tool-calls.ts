// Hermes-style tool calls (Qwen 2.5/3, Hermes, ART's vLLM setup with tool_call_parser="hermes"):
// the model writes `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`; we turn each
// block into an OpenAI tool call and keep the text before the first block as content.

import { randomBytes } from 'node:crypto';
import { GrammarConstraint } from './json-constraint.js';
import { ANY_OBJECT, compileSchema, type SchemaNode } from '../../src/domain/json-schema.js';
import type { TokenizerPort, ToolDefinition } from './model-port.js';
import { longestPartialSuffix } from './stop.js';
import type { TokenConstraint } from './token-constraint.js';

export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ParsedOutput {
  content: string | null;
  toolCalls: ToolCall[];
}

export function newToolCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

/**
 * Splits model output into content and tool calls. If any block is not valid JSON with a string
 * `name`, nothing is parsed and the whole text stays content (as vLLM's hermes parser does).
 */
export function parseToolCalls(text: string): ParsedOutput {
  const start = text.indexOf(TOOL_CALL_OPEN);
  if (start < 0) return { content: text, toolCalls: [] };
  const blocks = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;
  const toolCalls: ToolCall[] = [];
  for (const m of text.slice(start).matchAll(blocks)) {
    let call: unknown;
    try {
      call = JSON.parse(m[1].trim());
    } catch {
      return { content: text, toolCalls: [] };
    }
    if (typeof call !== 'object' || call === null || typeof (call as { name?: unknown }).name !== 'string') return { content: text, toolCalls: [] };
    const c = call as { name: string; arguments?: unknown; parameters?: unknown };
    const args = c.arguments ?? c.parameters ?? {};
    toolCalls.push({
      id: newToolCallId(),
      type: 'function',
      function: { name: c.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
    });
  }
  const content = text.slice(0, start);
  return { content: content.trim() === '' ? null : content, toolCalls };
}

/**
 * For streaming: passes content through until a tool call may begin, then holds everything back
 * so the client never sees raw `<tool_call>` markup. `finish()` parses what was held.
 */
export class ToolCallStreamer {
  private held = '';
  private inCall = false;

  push(text: string): string {
    if (this.inCall) {
      this.held += text;
      return '';
    }
    const buf = this.held + text;
    const at = buf.indexOf(TOOL_CALL_OPEN);
    if (at >= 0) {
      this.inCall = true;
      this.held = buf.slice(at);
      return buf.slice(0, at);
    }
    const hold = longestPartialSuffix(buf, [TOOL_CALL_OPEN]);
    this.held = buf.slice(buf.length - hold);
    return buf.slice(0, buf.length - hold);
  }

  /** Remaining content to emit and the parsed tool calls. */
  finish(): { content: string; toolCalls: ToolCall[] } {
    const held = this.held;
    this.held = '';
    if (!this.inCall) return { content: held, toolCalls: [] };
    const parsed = parseToolCalls(held);
    return parsed.toolCalls.length ? { content: '', toolCalls: parsed.toolCalls } : { content: held, toolCalls: [] };
  }
}

export type ToolChoiceParam = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null | undefined;

/**
 * tool_choice "required" or a named function: constrain decoding to exactly one Hermes tool call.
 * With one candidate tool its parameters schema is enforced; with several, `name` is restricted to
 * the tool names and `arguments` to any JSON object (a name-dependent schema is not supported).
 */
export function forcedToolCallConstraint(tokenizer: TokenizerPort, tools: ToolDefinition[], choice: ToolChoiceParam): (() => TokenConstraint) | null {
  if (choice !== 'required' && (typeof choice !== 'object' || choice === null)) return null;
  const candidates = typeof choice === 'object' ? tools.filter((t) => t.function.name === choice.function.name) : tools;
  if (candidates.length === 0) throw new Error(typeof choice === 'object' ? `tool_choice names an unknown function '${choice.function.name}'` : 'tool_choice "required" needs tools');
  const args: SchemaNode = candidates.length === 1 && candidates[0].function.parameters ? compileSchema(candidates[0].function.parameters) : ANY_OBJECT;
  const root: SchemaNode = {
    kind: 'object',
    props: [
      { key: 'name', node: { kind: 'literal', options: candidates.map((t) => JSON.stringify(t.function.name)) } },
      { key: 'arguments', node: args },
    ],
    values: { kind: 'any' },
    required: ['name', 'arguments'],
  };
  return () => new GrammarConstraint(tokenizer, root, { prefix: `${TOOL_CALL_OPEN}\n`, suffix: `\n${TOOL_CALL_CLOSE}` });
}
