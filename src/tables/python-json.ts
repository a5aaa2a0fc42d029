// Emulation of Python's `json.dumps` over losslessly parsed JSON values.
//
// The Weave service digests a table row as sha256(json.dumps(row, sort_keys=True)), where `row` is
// what Python's `json.loads` made of the request text. To reproduce those digests byte for byte we
// re-create Python's view of every value:
//   - a JSON number without fraction or exponent is a Python int: printed verbatim (arbitrary size);
//   - any other number is a Python float: parsed to the nearest double, printed with `repr`
//     (`1.0`, `1e-05`, `1e+16`, `-0.0`, `Infinity` for overflow);
//   - strings are escaped like the C encoder (`ensure_ascii` → `\uXXXX` per UTF-16 unit);
//   - object keys are sorted by code point when `sortKeys` is set.
// Values come from lossless-json, so numbers arrive as LosslessNumber (their written text).

import { isLosslessNumber } from 'lossless-json';

export interface PythonJsonOptions {
  /** `sort_keys=True`: order object keys by Unicode code point, recursively. */
  sortKeys: boolean;
  /** `ensure_ascii=True`: escape every non-ASCII character as `\uXXXX` (surrogate pairs for astral). */
  ensureAscii: boolean;
  /** `separators`: Python's default is (', ', ': '); FastAPI responses use (',', ':'). */
  itemSeparator: string;
  keySeparator: string;
}

/** Python `json.dumps(value, sort_keys=True)` with all other arguments at their defaults. */
export const DIGEST_JSON: PythonJsonOptions = {
  sortKeys: true,
  ensureAscii: true,
  itemSeparator: ', ',
  keySeparator: ': ',
};

/** The form the service sends rows back in: key order kept, compact, UTF-8 (FastAPI's JSONResponse). */
export const COMPACT_JSON: PythonJsonOptions = {
  sortKeys: false,
  ensureAscii: false,
  itemSeparator: ',',
  keySeparator: ':',
};

/** Thrown for values Python's json module would not have produced or accepted. */
export class PythonJsonError extends Error {}

/** Python caps int<->str conversion at 4300 digits (sys.int_info.default_max_str_digits). */
const PYTHON_MAX_INT_DIGITS = 4300;

const INTEGER_TEXT = /^-?(?:0|[1-9]\d*)$/;

/**
 * Serialize a JSON value the way Python's json.dumps would after json.loads of the same text.
 * Accepts lossless-json output (LosslessNumber for numbers) as well as plain JS values
 * (a JS number is an int when Number.isInteger, else a float; a bigint is an int).
 */
export function pythonJsonDumps(value: unknown, options: PythonJsonOptions = DIGEST_JSON): string {
  const out: string[] = [];
  writeValue(value, options, out);
  return out.join('');
}

function writeValue(value: unknown, options: PythonJsonOptions, out: string[]): void {
  if (value === null) {
    out.push('null');
  } else if (typeof value === 'string') {
    out.push(options.ensureAscii ? quoteAscii(value) : quoteUnicode(value));
  } else if (typeof value === 'boolean') {
    out.push(value ? 'true' : 'false');
  } else if (typeof value === 'number') {
    out.push(Number.isInteger(value) ? pythonIntText(String(BigInt(value))) : pythonFloatRepr(value));
  } else if (typeof value === 'bigint') {
    out.push(value.toString());
  } else if (isLosslessNumber(value)) {
    out.push(pythonNumberText(value.value));
  } else if (Array.isArray(value)) {
    if (value.length === 0) {
      out.push('[]');
      return;
    }
    out.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(options.itemSeparator);
      writeValue(value[i], options, out);
    }
    out.push(']');
  } else if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 0) {
      out.push('{}');
      return;
    }
    if (options.sortKeys) keys.sort(compareCodePoints);
    out.push('{');
    for (let i = 0; i < keys.length; i++) {
      if (i > 0) out.push(options.itemSeparator);
      const key = keys[i];
      out.push(options.ensureAscii ? quoteAscii(key) : quoteUnicode(key), options.keySeparator);
      writeValue(record[key], options, out);
    }
    out.push('}');
  } else {
    throw new PythonJsonError(`cannot serialize a value of type ${typeof value} as JSON`);
  }
}

/**
 * The text Python prints for a JSON number literal after json.loads: ints verbatim
 * (`-0` becomes `0`), everything with a fraction or exponent as a float repr.
 */
export function pythonNumberText(written: string): string {
  if (INTEGER_TEXT.test(written)) return pythonIntText(written);
  const parsed = Number(written);
  if (Number.isNaN(parsed)) throw new PythonJsonError(`not a JSON number: ${written}`);
  return pythonFloatRepr(parsed);
}

function pythonIntText(digits: string): string {
  const unsigned = digits.startsWith('-') ? digits.slice(1) : digits;
  if (unsigned.length > PYTHON_MAX_INT_DIGITS) {
    throw new PythonJsonError(
      `integer with ${unsigned.length} digits exceeds Python's limit of ${PYTHON_MAX_INT_DIGITS} digits`,
    );
  }
  return unsigned === '0' ? '0' : digits;
}

/**
 * Python's `repr(float)`: the shortest digits that round-trip (same as JS), but laid out by
 * Python's rules: positional when -4 <= exponent < 16 (with `.0` added to whole numbers),
 * otherwise `d[.ddd]e±XX` with at least two exponent digits.
 */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';

  const sign = x < 0 ? '-' : '';
  // toExponential() without an argument gives the shortest round-trip digits: "d.ddde±N".
  const [mantissa, exponentText] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exponent = Number(exponentText);

  if (exponent < -4 || exponent >= 16) {
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : '';
    const expSign = exponent < 0 ? '-' : '+';
    const expDigits = String(Math.abs(exponent)).padStart(2, '0');
    return `${sign}${digits[0]}${frac}e${expSign}${expDigits}`;
  }
  if (exponent < 0) {
    return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  }
  const intDigits = exponent + 1;
  if (digits.length <= intDigits) {
    return `${sign}${digits}${'0'.repeat(intDigits - digits.length)}.0`;
  }
  return `${sign}${digits.slice(0, intDigits)}.${digits.slice(intDigits)}`;
}

// Characters the C encoder writes as short escapes; every other control char is \u00XX.
const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

// ensure_ascii escapes everything outside printable ASCII (space..~), including DEL (0x7f).
const NEEDS_ASCII_ESCAPE = /["\\\u0000-\u001f\u007f-\uffff]/g;
// Without ensure_ascii only quotes, backslashes and control characters are escaped, plus lone
// surrogates: they have no UTF-8 form, and SQLite would store them as U+FFFD (JSON.stringify does the same).
const NEEDS_UNICODE_ESCAPE = /["\\\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function escapeChar(ch: string): string {
  return SHORT_ESCAPES[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** Python `json.dumps(s)` (ensure_ascii): astral characters become a surrogate pair of escapes. */
export function quoteAscii(s: string): string {
  NEEDS_ASCII_ESCAPE.lastIndex = 0;
  if (!NEEDS_ASCII_ESCAPE.test(s)) return `"${s}"`;
  return `"${s.replace(NEEDS_ASCII_ESCAPE, escapeChar)}"`;
}

/** Python `json.dumps(s, ensure_ascii=False)`, except that lone surrogates are escaped (see above). */
export function quoteUnicode(s: string): string {
  NEEDS_UNICODE_ESCAPE.lastIndex = 0;
  if (!NEEDS_UNICODE_ESCAPE.test(s)) return `"${s}"`;
  return `"${s.replace(NEEDS_UNICODE_ESCAPE, escapeChar)}"`;
}

/**
 * Python orders str by code point; JS `<` orders by UTF-16 unit, which differs when an astral
 * character (a surrogate pair) meets a character in U+E000..U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n) return a.length - b.length;
  const ua = a.charCodeAt(i);
  const ub = b.charCodeAt(i);
  if (ua < 0xd800 && ub < 0xd800) return ua - ub;
  // At least one side may be part of a surrogate pair: compare whole code points. If the
  // differing unit is a low surrogate, the (identical) unit before it may start the pair.
  const start = i > 0 && isHighSurrogate(a.charCodeAt(i - 1)) && (isLowSurrogate(ua) || isLowSurrogate(ub)) ? i - 1 : i;
  return codePointAtOrUnit(a, start) - codePointAtOrUnit(b, start);
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

function codePointAtOrUnit(s: string, index: number): number {
  return s.codePointAt(index) ?? 0;
}
