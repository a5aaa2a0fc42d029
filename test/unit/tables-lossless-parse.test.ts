import fc from 'fast-check';
import { isLosslessNumber, parse as losslessParse } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import { canUsePlainParse, parseLosslessJson } from '../../src/tables/lossless-parse.js';
import { COMPACT_JSON, DIGEST_JSON, pythonJsonDumps } from '../../src/tables/python-json.js';

describe('parseLosslessJson', () => {
  it('falls back to lossless numbers exactly when JSON.parse would lose the written form', () => {
    expect(canUsePlainParse('{"a": 1, "b": 2.5, "c": "1.0 inside a string", "d": -3e-7}')).toBe(true);
    for (const text of ['{"a": 1.0}', '[1e2]', '[-0.0]', '[12345678901234567]', '{"a": "x\\"", "b": 0.0}']) {
      expect(canUsePlainParse(text)).toBe(false);
    }
    const value = parseLosslessJson('{"x": 1.0}') as { x: unknown };
    expect(isLosslessNumber(value.x)).toBe(true);
  });

  it('last duplicate key wins in both paths', () => {
    expect(parseLosslessJson('{"a":1,"a":2}')).toEqual({ a: 2 });
    expect(pythonJsonDumps(parseLosslessJson('{"a":1.0,"a":2.0}'))).toBe('{"a": 2.0}');
  });

  it('rejects invalid JSON in both paths', () => {
    expect(() => parseLosslessJson('{"a": 1,}')).toThrow(SyntaxError);
    expect(() => parseLosslessJson('{"a": 1.0,}')).toThrow(SyntaxError);
  });

  // Number literals as clients write them, including the forms where int/float matters.
  const numberText = fc.oneof(
    fc.integer().map(String),
    fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => (Object.is(x, -0) ? '-0.0' : String(x))),
    fc.constantFrom('1.0', '0.0', '-0.0', '1E2', '1.50', '10000000000000000.0', '1e-05', '2.5', '1e400'),
  );
  const { json } = fc.letrec((tie) => ({
    json: fc.oneof(
      { depthSize: 'small' },
      numberText,
      fc.string().map((s) => JSON.stringify(s)),
      fc.constantFrom('true', 'false', 'null'),
      fc.array(tie('json'), { maxLength: 4 }).map((items) => `[${items.join(', ')}]`),
      fc
        .array(fc.tuple(fc.string({ maxLength: 4 }), tie('json')), { maxLength: 4 })
        .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(', ')}}`),
    ),
  }));

  it('gives the same Python serialisations as a fully lossless parse', () => {
    fc.assert(
      fc.property(json, (text) => {
        const reference = losslessParse(text, null, { onDuplicateKey: ({ newValue }) => newValue });
        const parsed = parseLosslessJson(text);
        expect(pythonJsonDumps(parsed, DIGEST_JSON)).toBe(pythonJsonDumps(reference, DIGEST_JSON));
        expect(pythonJsonDumps(parsed, COMPACT_JSON)).toBe(pythonJsonDumps(reference, COMPACT_JSON));
      }),
      { numRuns: 1000, seed: 11 },
    );
  });
});
