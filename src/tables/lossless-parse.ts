// Parse request JSON without losing how numbers were written.
//
// `1.0` and `1` digest differently (Python float vs int) and big integers must not be rounded,
// so the table routes parse bodies with lossless-json: numbers become LosslessNumber (their text).
// lossless-json is ~10x slower than JSON.parse, so when a quick scan shows JSON.parse cannot lose
// anything that matters (see canUsePlainParse) the built-in parser is used instead.

import { parse } from 'lossless-json';

/**
 * Parse JSON text the way Python's json.loads sees it, keeping number text where it matters.
 * Numbers come back as LosslessNumber, or as JS numbers when those are exact (pythonJsonDumps
 * prints both the same way). Duplicate keys: the last value wins, as in Python.
 * Throws SyntaxError (with a position) on invalid JSON.
 */
export function parseLosslessJson(text: string): unknown {
  if (canUsePlainParse(text)) return JSON.parse(text);
  return parse(text, null, { onDuplicateKey: ({ newValue }) => newValue });
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/**
 * JSON.parse keeps every number of `text` exactly as Python would see it iff
 *   - no integer literal can exceed 2^53 (at most 15 digits), and
 *   - no float literal (with '.' or an exponent) has an integral value, since a JS number
 *     cannot tell 1.0 from 1 (non-integral floats are the same double in both languages).
 * Scans outside string literals only; invalid JSON is left for the parser to reject.
 */
export function canUsePlainParse(text: string): boolean {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i += 2;
        else if (d === QUOTE) break;
        else i++;
      }
      i++;
    } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const start = i;
      let isFloat = false;
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d >= ZERO && d <= NINE) i++;
        else if (d === DOT || d === LOWER_E || d === UPPER_E || d === PLUS || d === MINUS) {
          isFloat = true;
          i++;
        } else break;
      }
      if (isFloat ? Number.isInteger(Number(text.slice(start, i))) : i - start > 15) return false;
    } else {
      i++;
    }
  }
  return true;
}
