import { describe, expect, it } from 'vitest';
import { forcedToolCallConstraint, parseToolCalls, ToolCallStreamer } from '../../worker/inference/tool-calls.js';
import { createRng } from '../../worker/inference/rng.js';
import { ToyTokenizer } from './inference-toy-model.js';

describe('Hermes tool-call parsing', () => {
  it('turns <tool_call> blocks into OpenAI tool calls and keeps leading content', () => {
    const text = 'let me look.\n<tool_call>\n{"name": "search_kb", "arguments": {"keywords": ["pair", "thermostat"]}}\n</tool_call>\n<tool_call>{"name":"now","arguments":{}}</tool_call>';
    const r = parseToolCalls(text);
    expect(r.content).toBe('let me look.\n');
    expect(r.toolCalls).toHaveLength(2);
    expect(r.toolCalls[0]).toMatchObject({ type: 'function', function: { name: 'search_kb', arguments: '{"keywords":["pair","thermostat"]}' } });
    expect(r.toolCalls[0].id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(r.toolCalls[0].id).not.toBe(r.toolCalls[1].id);
    expect(r.toolCalls[1].function).toEqual({ name: 'now', arguments: '{}' });
  });

  it('content is null when only tool calls were written; unclosed last block is accepted', () => {
    const r = parseToolCalls('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n');
    expect(r.content).toBeNull();
    expect(r.toolCalls[0].function.arguments).toBe('{"a":1}');
  });

  it('leaves malformed calls as plain content', () => {
    const text = 'x <tool_call>{"name": "f", "arguments": {oops}}</tool_call>';
    expect(parseToolCalls(text)).toEqual({ content: text, toolCalls: [] });
    expect(parseToolCalls('no tools here')).toEqual({ content: 'no tools here', toolCalls: [] });
  });

  it('streaming holds back markup, including a tag split over deltas', () => {
    const s = new ToolCallStreamer();
    let shown = '';
    for (const piece of ['Hi ', 'there <tool', '_call>{"name":', ' "f", "arguments": {}}</tool_call>']) shown += s.push(piece);
    const end = s.finish();
    expect(shown).toBe('Hi there ');
    expect(end.content).toBe('');
    expect(end.toolCalls[0].function.name).toBe('f');
    const plain = new ToolCallStreamer();
    expect(plain.push('a <tool')).toBe('a ');
    expect(plain.finish()).toEqual({ content: '<tool', toolCalls: [] });
  });
});

describe('forced tool call constraint', () => {
  const tok = new ToyTokenizer();
  const tools = [
    { type: 'function' as const, function: { name: 'name', parameters: { type: 'object', properties: { age: { type: 'integer' } }, required: ['age'] } } },
    { type: 'function' as const, function: { name: 'ab', parameters: { type: 'object', properties: {} } } },
  ];

  function sample(choice: Parameters<typeof forcedToolCallConstraint>[2], seed: number): string {
    const c = forcedToolCallConstraint(tok, tools, choice)!();
    const rng = createRng(seed);
    const ids: number[] = [];
    for (let i = 0; i < 400; i++) {
      const mask = c.allowedTokens();
      const allowed = [...mask.keys()].filter((id) => mask[id]);
      const id = allowed[Math.floor(rng.next() * allowed.length)];
      if (id === 0) return tok.decode(ids);
      c.advance(id);
      ids.push(id);
    }
    return 'TOO LONG';
  }

  it('"required" always yields one parseable call to a known tool', () => {
    const names = new Set<string>();
    for (let seed = 0; seed < 25; seed++) {
      const out = sample('required', seed);
      expect(out, `seed ${seed}: no complete call in 400 tokens`).not.toBe('TOO LONG');
      const r = parseToolCalls(out);
      expect(r.toolCalls, out).toHaveLength(1);
      expect(['name', 'ab']).toContain(r.toolCalls[0].function.name);
      expect(typeof JSON.parse(r.toolCalls[0].function.arguments)).toBe('object');
      names.add(r.toolCalls[0].function.name);
    }
    expect([...names].sort()).toEqual(['ab', 'name']); // the model may pick either tool
  });

  it('a named tool call enforces that tool and its parameters schema', () => {
    for (let seed = 0; seed < 25; seed++) {
      const out = sample({ type: 'function', function: { name: 'name' } }, seed);
      expect(out, `seed ${seed}: no complete call in 400 tokens`).not.toBe('TOO LONG');
      const r = parseToolCalls(out);
      expect(r.toolCalls[0].function.name).toBe('name');
      expect(Number.isInteger(JSON.parse(r.toolCalls[0].function.arguments).age)).toBe(true);
    }
  });

  it('auto/none need no constraint; an unknown name is an error', () => {
    expect(forcedToolCallConstraint(tok, tools, 'auto')).toBeNull();
    expect(forcedToolCallConstraint(tok, tools, 'none')).toBeNull();
    expect(() => forcedToolCallConstraint(tok, tools, { type: 'function', function: { name: 'zz' } })).toThrow(/unknown function 'zz'/);
  });
});
