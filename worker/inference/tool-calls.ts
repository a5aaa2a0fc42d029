// Hermes-style tool calls (Qwen 2.5/3, Hermes, ART's vLLM setup with tool_call_parser="hermes"):
// the model writes `<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`; we turn each
// block into an OpenAI tool call and keep the text before the first block as content.

import { randomBytes } from 'node:crypto';
import { GrammarConstraint } from './json-constraint.js';
import { GrammarState } from './json-grammar.js';
import { ANY_OBJECT, compileSchema, SchemaTooComplexError, UnsupportedSchemaError, type SchemaNode } from '../../src/domain/json-schema.js';
import type { TokenizerPort, ToolDefinition } from './model-port.js';
import { BadRequestError } from './request-params.js';
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

export type ToolChoiceParam = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null | undefined;

/** How a forced call begins and ends: Hermes' tags around `{"name": …, "arguments": …}`, keys in that order. */
export const FORCED_CALL_PREFIX = `${TOOL_CALL_OPEN}\n{"name": "`;
const FORCED_CALL_ARGS = ', "arguments": ';
const FORCED_CALL_SUFFIX = `}\n${TOOL_CALL_CLOSE}`;

/**
 * tool_choice "required" or a named function: constrain decoding to exactly one Hermes tool call, a union keyed
 * by the tool's name: once the model has written a tool's name, its `arguments` follow that tool's own
 * `parameters` schema (as vLLM enforces), or any JSON object for a tool without one. A schema the grammar
 * cannot enforce is refused as a 400 naming `tools[i].function.parameters`.
 */
export function forcedToolCallConstraint(tokenizer: TokenizerPort, tools: ToolDefinition[], choice: ToolChoiceParam): (() => TokenConstraint) | null {
  if (choice !== 'required' && (typeof choice !== 'object' || choice === null)) return null;
  const candidates = tools.map((tool, index) => ({ tool, index })).filter(({ tool }) => typeof choice !== 'object' || tool.function.name === choice.function.name);
  if (candidates.length === 0) throw new Error(typeof choice === 'object' ? `tool_choice names an unknown function '${choice.function.name}'` : 'tool_choice "required" needs tools');
  const branches = candidates.map(({ tool, index }) => ({
    // The name's JSON text without its opening quote (in the prefix); its closing quote keeps the branches prefix-free.
    text: `${JSON.stringify(tool.function.name).slice(1)}${FORCED_CALL_ARGS}`,
    node: argumentsSchema(tool, index),
  }));
  const start = GrammarState.startBranches(FORCED_CALL_PREFIX, branches, FORCED_CALL_SUFFIX);
  return () => new GrammarConstraint(tokenizer, start);
}

function argumentsSchema(tool: ToolDefinition, index: number): SchemaNode {
  const parameters = tool.function.parameters;
  if (!parameters) return ANY_OBJECT;
  try {
    return compileSchema(parameters, { orderedKeys: tool.function.strict === true });
  } catch (err) {
    if (!(err instanceof UnsupportedSchemaError)) throw err;
    const param = `tools[${index}].function.parameters`;
    const code = err instanceof SchemaTooComplexError ? err.code : 'unsupported_parameter';
    throw new BadRequestError(`unsupported parameters: ${param}: ${err.features.join('; ')}`, param, code);
  }
}
