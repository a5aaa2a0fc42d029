// Python json.dumps emulation. Expected strings were produced by CPython 3 (json.dumps(json.loads(text))).

import fc from 'fast-check';
import { LosslessNumber } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import { parseLosslessJson } from '../../src/tables/lossless-parse.js';
import {
  COMPACT_JSON,
  compareCodePoints,
  DIGEST_JSON,
  PythonJsonError,
  pythonFloatRepr,
  pythonJsonDumps,
  pythonNumberText,
} from '../../src/tables/python-json.js';

// [JSON number as written, Python's json.dumps(json.loads(written))]
const NUMBER_CASES: [string, string][] = [
  ['1.0', '1.0'], ['1', '1'], ['-0.0', '-0.0'], ['-0', '0'], ['0.0', '0.0'], ['1e-05', '1e-05'],
  ['0.0001', '0.0001'], ['1e16', '1e+16'], ['1E2', '100.0'], ['1.50', '1.5'],
  ['10000000000000000.0', '1e+16'], ['1000000000000000.0', '1000000000000000.0'],
  ['123456789012345678901234567890', '123456789012345678901234567890'], ['0.1', '0.1'],
  ['1.7976931348623157e308', '1.7976931348623157e+308'], ['5e-324', '5e-324'], ['1e400', 'Infinity'],
  ['-1e400', '-Infinity'], ['2.5e-7', '2.5e-07'], ['123.456', '123.456'], ['1e22', '1e+22'],
  ['9007199254740993.0', '9007199254740992.0'], ['0.30000000000000004', '0.30000000000000004'],
  ['12345678901234567.0', '1.2345678901234568e+16'], ['1.5e300', '1.5e+300'], ['-2.5E-3', '-0.0025'],
  ['3.14159', '3.14159'], ['100.0', '100.0'], ['1e+0', '1.0'], ['0e10', '0.0'], ['-0e-5', '-0.0'],
  ['4.35', '4.35'], ['1234567890123456.7', '1234567890123456.8'], ['0.000123', '0.000123'],
];

describe('pythonNumberText', () => {
  for (const [written, python] of NUMBER_CASES) {
    it(`${written} → ${python}`, () => {
      expect(pythonNumberText(written)).toBe(python);
    });
  }

  it('refuses integers beyond Python\'s 4300-digit limit', () => {
    expect(() => pythonNumberText('9'.repeat(4301))).toThrow(PythonJsonError);
    expect(pythonNumberText('9'.repeat(4300))).toBe('9'.repeat(4300));
  });
});

describe('pythonFloatRepr', () => {
  it('NaN and infinities', () => {
    expect(pythonFloatRepr(NaN)).toBe('NaN');
    expect(pythonFloatRepr(Infinity)).toBe('Infinity');
    expect(pythonFloatRepr(-Infinity)).toBe('-Infinity');
  });

  it('round-trips every finite double and uses the same digits as JS', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        const repr = pythonFloatRepr(x);
        expect(Object.is(Number(repr), x)).toBe(true);
        // Python layout: a float always shows a '.', an 'e' or is special.
        expect(/[.e]/.test(repr)).toBe(true);
      }),
      { numRuns: 2000, seed: 42 },
    );
  });
});

describe('strings', () => {
  it('ensure_ascii escapes like CPython (surrogate pairs, DEL, controls)', () => {
    expect(pythonJsonDumps('h\u00e9llo \u4e16\u754c \u{1F600}')).toBe('"h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00"');
    expect(pythonJsonDumps('\x7f')).toBe('"\\u007f"');
    expect(pythonJsonDumps('\x00\x01\x1f')).toBe('"\\u0000\\u0001\\u001f"');
    expect(pythonJsonDumps('tab\tq"b\\/')).toBe('"tab\\tq\\"b\\\\/"');
    expect(pythonJsonDumps('\ud800')).toBe('"\\ud800"');
    expect(pythonJsonDumps('\u2028')).toBe('"\\u2028"');
  });

  it('ensure_ascii=False keeps non-ASCII and escapes only controls', () => {
    expect(pythonJsonDumps('h\u00e9 \u{1F600}\x7f\n', COMPACT_JSON)).toBe('"h\u00e9 \u{1F600}\x7f\\n"');
  });

  it('compact form escapes lone surrogates so the text stays valid UTF-8', () => {
    const text = pythonJsonDumps('a\ud800b\udc00\u{1F600}\ud83d', COMPACT_JSON);
    expect(text).toBe('"a\\ud800b\\udc00\u{1F600}\\ud83d"');
    expect(text).toBe(JSON.stringify('a\ud800b\udc00\u{1F600}\ud83d'));
  });
});

describe('objects and arrays', () => {
  it('sorts keys by code point, recursively, with Python separators', () => {
    const value = parseLosslessJson('{"b":{"z":1,"a":[{"d":2,"c":3}]},"a":null,"\\ue000":1,"\\ud83d\\ude00":2}');
    expect(pythonJsonDumps(value, DIGEST_JSON)).toBe(
      '{"a": null, "b": {"a": [{"c": 3, "d": 2}], "z": 1}, "\\ue000": 1, "\\ud83d\\ude00": 2}',
    );
  });

  it('compact form keeps key order and number text normalisation', () => {
    const value = parseLosslessJson('{"z": 1E2, "a": [1, 2.50, {}], "big": 123456789012345678901234567890}');
    expect(pythonJsonDumps(value, COMPACT_JSON)).toBe('{"z":100.0,"a":[1,2.5,{}],"big":123456789012345678901234567890}');
  });

  it('duplicate keys: the last value wins, as in Python', () => {
    expect(pythonJsonDumps(parseLosslessJson('{"a":1,"b":2,"a":3}'))).toBe('{"a": 3, "b": 2}');
  });

  it('a "__proto__" key is plain data', () => {
    expect(pythonJsonDumps(parseLosslessJson('{"__proto__":{"x":1}}'))).toBe('{"__proto__": {"x": 1}}');
  });

  it('plain JS numbers and bigints', () => {
    expect(pythonJsonDumps({ a: 1, b: 1.5, c: 10n, d: new LosslessNumber('1.0') })).toBe('{"a": 1, "b": 1.5, "c": 10, "d": 1.0}');
  });

  it('refuses values JSON cannot hold', () => {
    expect(() => pythonJsonDumps({ f: () => 1 })).toThrow(PythonJsonError);
  });
});

describe('compareCodePoints', () => {
  it('orders like Python sorted()', () => {
    const keys = ['\uffff', '\u{1F600}', 'a', '\ue000', 'B'];
    expect([...keys].sort(compareCodePoints)).toEqual(['B', 'a', '\ue000', '\uffff', '\u{1F600}']);
  });

  it('agrees with code point arrays on random strings', () => {
    const byCodePoints = (a: string, b: string): number => {
      const x = [...a].map((c) => c.codePointAt(0)!);
      const y = [...b].map((c) => c.codePointAt(0)!);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
      return x.length - y.length;
    };
    const str = fc.string({ unit: 'binary', maxLength: 6 });
    fc.assert(
      fc.property(str, str, (a, b) => {
        expect(Math.sign(compareCodePoints(a, b))).toBe(Math.sign(byCodePoints(a, b)));
      }),
      { numRuns: 1000, seed: 7 },
    );
  });
});
