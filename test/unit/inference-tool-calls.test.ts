import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../worker/inference/request-params.js';
import { partialToolCalls, ToolCallStreamer, type StreamedPiece } from '../../worker/inference/tool-call-stream.js';
import { forcedToolCallConstraint, parseToolCalls } from '../../worker/inference/tool-calls.js';
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
    const pieces = ['Hi ', 'there <tool', '_call>{"name":', ' "f", "arguments": {}}</tool_call>'].map((p) => s.push(p));
    const end = s.finish(false);
    expect(pieces.map((p) => p.content).join('')).toBe('Hi there ');
    expect(end.content).toBe('');
    expect(s.calls).toHaveLength(1);
    expect(s.calls[0].function).toEqual({ name: 'f', arguments: '{}' });
    const plain = new ToolCallStreamer();
    expect(plain.push('a <tool').content).toBe('a ');
    expect(plain.finish(false)).toEqual({ content: '<tool', toolCalls: [] });
  });
});

describe('streamed tool calls', () => {
  /** Feeds the text a few characters at a time, as tokens arrive. */
  function stream(text: string, opts: { size?: number; cut?: boolean; maxCalls?: number } = {}): { pieces: StreamedPiece[]; s: ToolCallStreamer } {
    const s = new ToolCallStreamer(opts.maxCalls);
    const pieces: StreamedPiece[] = [];
    for (let i = 0; i < text.length; i += opts.size ?? 3) pieces.push(s.push(text.slice(i, i + (opts.size ?? 3))));
    pieces.push(s.finish(opts.cut ?? false));
    return { pieces, s };
  }
  const deltas = (pieces: StreamedPiece[]) => pieces.flatMap((p) => p.toolCalls);

  it('sends the id and name once the name is read, then the arguments in several deltas as they are written', () => {
    const { pieces, s } = stream('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>');
    const d = deltas(pieces);
    expect(d[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather', arguments: '' } });
    const argDeltas = d.slice(1);
    expect(argDeltas.length).toBeGreaterThan(5);
    for (const x of argDeltas) expect(x).toEqual({ index: 0, function: { arguments: expect.any(String) } });
    expect(argDeltas.map((x) => x.function.arguments).join('')).toBe('{"city": "Paris", "days": [1, 2]}');
    expect(pieces.every((p) => p.content === '')).toBe(true); // no empty-content noise: content is '' and is left out of chunks
    expect(s.calls[0].function.arguments).toBe('{"city": "Paris", "days": [1, 2]}');
  });

  it('two calls get indexes 0 and 1; parallel_tool_calls false keeps only the first', () => {
    const text = 'ok <tool_call>{"name": "a", "arguments": {"x": "}"}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>';
    const both = stream(text, { size: 5 });
    expect(both.s.calls.map((c) => [c.function.name, c.function.arguments])).toEqual([['a', '{"x": "}"}'], ['b', '{}']]);
    expect(both.pieces.map((p) => p.content).join('')).toBe('ok ');
    expect(new Set(deltas(both.pieces).map((d) => d.index))).toEqual(new Set([0, 1]));
    const one = stream(text, { size: 5, maxCalls: 1 });
    expect(one.s.calls.map((c) => c.function.name)).toEqual(['a']);
    expect(deltas(one.pieces).every((d) => d.index === 0)).toBe(true);
  });

  it('a call cut by max_tokens ends as generated: partial arguments, or the name alone', () => {
    const cut = stream('<tool_call>\n{"name": "f", "arguments": {"q": "hel', { cut: true });
    expect(cut.s.calls.map((c) => c.function)).toEqual([{ name: 'f', arguments: '{"q": "hel' }]);
    expect(cut.pieces.map((p) => p.content).join('')).toBe('');
    expect(stream('<tool_call>\n{"name": "lo', { cut: true }).s.calls.map((c) => c.function)).toEqual([{ name: 'lo', arguments: '' }]);
    expect(partialToolCalls('sure <tool_call>\n{"name": "f", "arguments": {"a": [1,')).toEqual({ content: 'sure ', toolCalls: [expect.objectContaining({ function: { name: 'f', arguments: '{"a": [1,' } })] });
  });

  it('a block in another key order is parsed whole at its end; one that is not a call stays content', () => {
    const other = stream('<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>');
    expect(other.s.calls.map((c) => c.function)).toEqual([{ name: 'f', arguments: '{"a":1}' }]);
    const junk = stream('x <tool_call>{oops}</tool_call> y');
    expect(junk.s.calls).toEqual([]);
    expect(junk.pieces.map((p) => p.content).join('')).toBe('x <tool_call>{oops}</tool_call> y');
  });
});

describe('forced tool call constraint', () => {
  const tok = new ToyTokenizer();
  const tools = [
    { type: 'function' as const, function: { name: 'name', parameters: { type: 'object', properties: { age: { type: 'integer' } }, required: ['age'] } } },
    { type: 'function' as const, function: { name: 'ab', parameters: { type: 'object', properties: { flag: { type: 'boolean' } }, required: ['flag'], additionalProperties: false } } },
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
      // Each tool's arguments follow that tool's own schema (a union keyed by the name).
      const args = JSON.parse(r.toolCalls[0].function.arguments);
      if (r.toolCalls[0].function.name === 'name') expect(Number.isInteger(args.age), out).toBe(true);
      else expect(Object.keys(args).length === 1 && typeof args.flag === 'boolean', out).toBe(true);
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

  it('a forced tool whose parameters use an unsupported feature is a 400 naming that tool\'s parameters', () => {
    const withPattern = [...tools, { type: 'function' as const, function: { name: 'p', parameters: { type: 'object', properties: { s: { type: 'string', pattern: 'x' } } } } }];
    let refused: unknown;
    try {
      forcedToolCallConstraint(tok, withPattern, 'required');
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(BadRequestError);
    expect(refused).toMatchObject({ param: 'tools[2].function.parameters', code: 'unsupported_parameter', message: expect.stringContaining("'pattern' is not supported") });
    // Not forced: the schema is only shown to the model, nothing to enforce.
    expect(forcedToolCallConstraint(tok, withPattern, 'auto')).toBeNull();
    expect(forcedToolCallConstraint(tok, withPattern, { type: 'function', function: { name: 'ab' } })).not.toBeNull();
  });
});
