// The JSON grammar's limits that keep small models' structured output short and valid: one whitespace
// byte per gap, keys in the schema's order under strict, integer bounds (zod's int() emits ±(2^53 − 1))
// and maxLength, each checked byte by byte on the grammar itself.
import { describe, expect, it } from 'vitest';
import { GrammarState } from '../../worker/inference/json-grammar.js';
import { compileSchema, unsupportedSchemaFeatures } from '../../src/domain/json-schema.js';

const enc = new TextEncoder();
const accepts = (schema: unknown, text: string, opts: { orderedKeys?: boolean } = {}) =>
  GrammarState.start(compileSchema(schema, opts)).feedBytes(enc.encode(text))?.canEnd ?? false;
/** The text is a prefix the grammar can still continue (not necessarily complete). */
const continues = (schema: unknown, text: string, opts: { orderedKeys?: boolean } = {}) =>
  GrammarState.start(compileSchema(schema, opts)).feedBytes(enc.encode(text)) !== null;

const pet = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 4 }, age: { type: 'integer' }, tag: { type: 'string' } },
  required: ['name', 'age'],
  additionalProperties: false,
};

describe('whitespace', () => {
  it('allows one space or newline between tokens, never two, and no tabs', () => {
    expect(accepts(pet, '{"name":"a","age":1}')).toBe(true);
    expect(accepts(pet, '{ "name": "a",\n"age": 1 }')).toBe(true);
    expect(continues(pet, '{  ')).toBe(false);
    expect(continues(pet, '{"name":\n\n')).toBe(false);
    expect(continues(pet, '{\t')).toBe(false);
    expect(continues(pet, '{"name":"a" ,  ')).toBe(false);
  });
});

describe('key order', () => {
  it('free order without strict; the schema\'s order with it, optional keys skippable but never revisited', () => {
    expect(accepts(pet, '{"age":1,"name":"a"}')).toBe(true);
    expect(accepts(pet, '{"age":1,"name":"a"}', { orderedKeys: true })).toBe(false);
    expect(accepts(pet, '{"name":"a","age":1}', { orderedKeys: true })).toBe(true);
    expect(accepts(pet, '{"name":"a","age":1,"tag":"x"}', { orderedKeys: true })).toBe(true);
    const optionalFirst = { ...pet, required: ['age'] };
    expect(accepts(optionalFirst, '{"age":1}', { orderedKeys: true })).toBe(true); // name skipped
    expect(accepts(optionalFirst, '{"age":1,"name":"a"}', { orderedKeys: true })).toBe(false); // no going back
    // After the last key only the closing brace may come.
    expect(continues(pet, '{"name":"a","age":1,"tag":"x",', { orderedKeys: true })).toBe(false);
  });
});

describe('integer bounds', () => {
  const small = { type: 'integer', minimum: -5, maximum: 120 };
  it('accepts exactly the integers within minimum..maximum', () => {
    const inRange = [-5, -1, 0, 7, 99, 120].map((n) => accepts(small, String(n)));
    const outside = [-6, -10, 121, 200, 1000].map((n) => accepts(small, String(n)));
    expect(inRange).toEqual([true, true, true, true, true, true]);
    expect(outside).toEqual([false, false, false, false, false]);
    // Prefixes that cannot end in range are cut at once: "121" and "-6" have no in-range continuation.
    expect(continues(small, '121')).toBe(false);
    expect(continues(small, '12')).toBe(true);
    expect(continues(small, '130')).toBe(false);
    expect(continues(small, '-6')).toBe(false);
  });

  it('exclusive bounds, no minus sign when the minimum is ≥ 0, zod int()\'s safe-integer bounds', () => {
    expect([0, 1, 9, 10].map((n) => accepts({ type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 }, String(n)))).toEqual([false, true, true, false]);
    expect(continues({ type: 'integer', minimum: 0 }, '-')).toBe(false);
    const zodInt = { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 };
    expect(accepts(zodInt, '9007199254740991')).toBe(true);
    expect(accepts(zodInt, '9007199254740992')).toBe(false);
    expect(accepts(zodInt, '-42')).toBe(true);
  });

  it('refuses bounds it cannot enforce, by name', () => {
    expect(unsupportedSchemaFeatures({ type: 'number', minimum: 0 })).toEqual(['#: bounds on a non-integer number are not supported']);
    expect(unsupportedSchemaFeatures({ type: 'integer', minimum: 3, maximum: 2 })).toEqual(['#: no integer lies between the bounds']);
  });
});

describe('maxLength', () => {
  it('closes strings at maxLength characters (counted as characters, not bytes)', () => {
    expect(accepts(pet, '{"name":"abcd","age":1}')).toBe(true);
    expect(continues(pet, '{"name":"abcde')).toBe(false);
    expect(accepts(pet, '{"name":"éééé","age":1}')).toBe(true);
  });
});
