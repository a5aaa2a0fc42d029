import { describe, expect, it } from 'vitest';
import { Engine } from '../../worker/inference/engine.js';
import { GrammarConstraint, responseFormatConstraint } from '../../worker/inference/json-constraint.js';
import { GrammarState } from '../../worker/inference/json-grammar.js';
import { compileSchema, unsupportedSchemaFeatures, ANY_OBJECT } from '../../src/domain/json-schema.js';
import { createRng } from '../../worker/inference/rng.js';
import { defaultSamplingParams } from '../../worker/inference/sampling-params.js';
import { ToyModel, ToyTokenizer } from './inference-toy-model.js';

const tok = new ToyTokenizer();

/** A small validator for the schema subset, written independently of the grammar. */
function matches(v: unknown, s: Record<string, any>, root: Record<string, any> = s): boolean {
  if (s.$ref) return matches(v, root.$defs[s.$ref.split('/').pop()], root);
  if (s.allOf) return s.allOf.every((b: any) => matches(v, b, root));
  if ('const' in s) return JSON.stringify(v) === JSON.stringify(s.const);
  if (s.enum) return s.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v));
  if (s.anyOf) return s.anyOf.some((b: any) => matches(v, b, root));
  const types: string[] = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  if (!types.length) return true;
  return types.some((t) => {
    switch (t) {
      case 'string': return typeof v === 'string' && [...v].length >= (s.minLength ?? 0) && [...v].length <= (s.maxLength ?? Infinity);
      case 'number': return typeof v === 'number';
      case 'integer': return Number.isInteger(v);
      case 'boolean': return typeof v === 'boolean';
      case 'null': return v === null;
      case 'array':
        return Array.isArray(v) && v.length >= (s.minItems ?? 0) && v.length <= (s.maxItems ?? Infinity) && v.every((x) => matches(x, s.items ?? {}, root));
      case 'object': {
        if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
        const o = v as Record<string, unknown>;
        if ((s.required ?? []).some((k: string) => !(k in o))) return false;
        if (!s.properties) return true;
        return Object.entries(o).every(([k, x]) => k in s.properties && matches(x, s.properties[k], root));
      }
    }
    return false;
  });
}

/** Samples uniformly among allowed tokens (EOS as soon as allowed, with probability 1/2). */
function randomRun(constraint: GrammarConstraint, seed: number, maxSteps = 300): string | null {
  const rng = createRng(seed);
  const ids: number[] = [];
  for (let i = 0; i < maxSteps; i++) {
    const mask = constraint.allowedTokens();
    if (mask[0] && rng.next() < 0.5) return tok.decode(ids);
    const allowed = [...mask.keys()].filter((id) => mask[id] && id !== 0);
    if (!allowed.length) return mask[0] ? tok.decode(ids) : 'STUCK';
    const id = allowed[Math.floor(rng.next() * allowed.length)];
    constraint.advance(id);
    ids.push(id);
  }
  return null; // ran out of steps: fine, just not counted
}

const schemas: Record<string, any>[] = [
  { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false },
  { type: 'object', properties: { ok: { type: 'boolean' }, tag: { enum: ['red', 'green', 1, null] }, v: { type: ['number', 'null'] } }, required: ['ok'] },
  { type: 'array', items: { type: 'object', properties: { x: { type: 'number' } }, required: ['x'] }, minItems: 1, maxItems: 3 },
  { type: 'object', properties: { list: { type: 'array', items: { type: 'string' }, maxItems: 2 }, n: { anyOf: [{ type: 'integer' }, { type: 'null' }] } }, required: ['list', 'n'] },
  { type: 'integer' },
  // Pydantic-style: nested model via $defs/$ref, Optional via anyOf, allOf wrapper, string lengths.
  {
    $defs: { Pet: { type: 'object', properties: { name: { type: 'string', minLength: 2, maxLength: 5 } }, required: ['name'], title: 'Pet' } },
    type: 'object',
    properties: { pet: { $ref: '#/$defs/Pet' }, best: { allOf: [{ $ref: '#/$defs/Pet' }], description: 'x' }, note: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }], default: null } },
    required: ['pet', 'note'],
  },
];

describe('JSON schema constraint', () => {
  it('random sampling under the mask always yields JSON that parses and matches the schema', () => {
    for (const schema of schemas) {
      let completed = 0;
      for (let seed = 0; seed < 40; seed++) {
        const out = randomRun(new GrammarConstraint(tok, compileSchema(schema)), seed);
        if (out === null) continue;
        expect(out).not.toBe('STUCK');
        let parsed: unknown;
        expect(() => (parsed = JSON.parse(out)), out).not.toThrow();
        expect(matches(parsed, schema), `${out} vs ${JSON.stringify(schema)}`).toBe(true);
        completed++;
      }
      expect(completed).toBeGreaterThan(10);
    }
  });

  it('json_object mode yields objects', () => {
    let completed = 0;
    for (let seed = 0; seed < 30; seed++) {
      const out = randomRun(new GrammarConstraint(tok, ANY_OBJECT), seed, 200);
      if (out === null) continue;
      const v = JSON.parse(out);
      expect(typeof v === 'object' && v !== null && !Array.isArray(v)).toBe(true);
      completed++;
    }
    expect(completed).toBeGreaterThan(5);
  });

  it('the grammar accepts valid and rejects invalid texts', () => {
    const enc = new TextEncoder();
    const node = compileSchema(schemas[0]);
    const ok = (t: string) => GrammarState.start(node).feedBytes(enc.encode(t))?.canEnd ?? false;
    expect(ok('{"name":"é\\u00e9\\n","age":-12}')).toBe(true);
    expect(ok('{ "age" : 3 , "name" : "x" }')).toBe(true);
    expect(ok('{"name":"x"}')).toBe(false); // missing required
    expect(ok('{"name":"x","age":1.5}')).toBe(false); // not an integer
    expect(ok('{"name":"x","age":01}')).toBe(false);
    expect(ok('{"name":"x","age":1,"name":"y"}')).toBe(false); // duplicate key
    expect(ok('{"nam":"x","age":1}')).toBe(false);
    expect(ok('{"name":"a\u0001","age":1}')).toBe(false); // raw control char
    const short = compileSchema({ type: 'string', minLength: 2, maxLength: 3 });
    const okS = (t: string) => GrammarState.start(short).feedBytes(enc.encode(t))?.canEnd ?? false;
    expect([okS('"a"'), okS('"ab"'), okS('"é\\n"'), okS('"abcd"'), okS('"\\u00e9x"')]).toEqual([false, true, true, false, true]);
    expect(GrammarState.start(short).feedBytes(enc.encode('"\\ud83d'))).toBeNull(); // no escaped surrogates
    const num = compileSchema({ type: 'number' });
    expect(GrammarState.start(num).feedBytes(enc.encode('-1.5e+3'))?.canEnd).toBe(true);
    expect(GrammarState.start(num).feedBytes(enc.encode('1.'))?.canEnd).toBe(false);
  });

  it('names unsupported schema features', () => {
    expect(unsupportedSchemaFeatures({ type: 'string', pattern: 'a+' })).toEqual(["#: 'pattern' is not supported"]);
    expect(unsupportedSchemaFeatures({ type: 'object', properties: { d: { type: 'string', format: 'date' } } })).toEqual([
      "#/properties/d: 'format' is not supported",
    ]);
    expect(unsupportedSchemaFeatures({ $ref: '#/$defs/x' })[0]).toMatch(/\$ref/);
    expect(unsupportedSchemaFeatures({ anyOf: [{ type: 'integer' }, { type: 'number' }] })[0]).toMatch(/same character/);
    expect(unsupportedSchemaFeatures(schemas[1])).toEqual([]);
    expect(() => compileSchema({ oneOf: [] })).toThrow(/oneOf/);
    expect(unsupportedSchemaFeatures({ $defs: { N: { type: 'object', properties: { next: { $ref: '#/$defs/N' } } } }, $ref: '#/$defs/N' })[0]).toMatch(/recursive/);
    expect(unsupportedSchemaFeatures({ $ref: 'http://x/schema' })[0]).toMatch(/only local/);
    // Integer bounds are enforced (test/unit/inference-json-bounds.test.ts); bounds on other numbers are not.
    expect(unsupportedSchemaFeatures({ type: 'number', minimum: 0 })).toEqual(['#: bounds on a non-integer number are not supported']);
    expect(unsupportedSchemaFeatures(schemas[5])).toEqual([]);
  });

  it('drives the engine: sampled output with response_format json_schema parses and matches', async () => {
    const schema = schemas[0];
    const engine = new Engine(new ToyModel({ maxContext: 200 }), tok, { kvCacheTokens: 2000, blockSize: 8 });
    const make = responseFormatConstraint(tok, { type: 'json_schema', json_schema: { schema } })!;
    const outs = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(
        (seed) =>
          new Promise<{ text: string; finish: string }>((resolve) =>
            engine.submit(
              { promptIds: tok.encode('give json'), params: defaultSamplingParams({ temperature: 1, seed, maxTokens: 150 }), constraint: make },
              (e) => e.type === 'finished' && resolve({ text: e.text, finish: e.finishReason }),
            ),
          ),
      ),
    );
    const done = outs.filter((o) => o.finish === 'stop');
    expect(done.length).toBeGreaterThan(0);
    for (const o of done) expect(matches(JSON.parse(o.text), schema)).toBe(true);
  });
});

describe('JSON grammar (properties)', () => {
  const enc = new TextEncoder();
  const any = compileSchema({});
  const accepts = (text: string) => GrammarState.start(any).feedBytes(enc.encode(text))?.canEnd ?? false;

  it('accepts every JSON text JSON.stringify produces', async () => {
    const fc = (await import('fast-check')).default;
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(accepts(JSON.stringify(v)), JSON.stringify(v)).toBe(true);
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it('whatever it accepts, JSON.parse accepts', async () => {
    const fc = (await import('fast-check')).default;
    const piece = fc.constantFrom('{', '}', '[', ']', '"', ':', ',', ' ', '0', '1', '-', '.', 'e', 'a', '\\\\', 'n', 'u', 'true', 'null', '"k"');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 16 }).map((a) => a.join('')), (text) => {
        if (accepts(text)) expect(() => JSON.parse(text), text).not.toThrow();
      }),
      { numRuns: 3000, seed: 11 },
    );
  });
});
