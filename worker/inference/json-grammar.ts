// A byte-at-a-time JSON recogniser that follows a compiled schema (json-schema.ts). States are
// immutable (a linked-list stack of frames), so the constraint can try every vocabulary token from
// the same state without copying. feed() returns the next state, or null when the byte would make
// the text invalid or not match the schema. A grammar is: literal prefix, one JSON value, literal
// suffix (the prefix/suffix carry e.g. Hermes `<tool_call>` tags around a forced tool call).

import type { SchemaNode } from '../../src/domain/json-schema.js';

/**
 * Whitespace allowed between tokens of JSON: one space or newline per gap (outlines allows one space;
 * llama.cpp's JSON grammar a newline and some indent). Small models otherwise spend their max_tokens on
 * blanks before they close the object; compact JSON is as valid.
 */
const MAX_WS = 1;
/** Longest number we let the model write (digits, sign, dot, exponent). */
const MAX_NUMBER_LEN = 24;

type Frame =
  | { t: 'text'; bytes: Uint8Array; pos: number }
  | { t: 'value'; node: SchemaNode; ws: number }
  | { t: 'object'; node: Extract<SchemaNode, { kind: 'object' }>; seen: string[]; phase: 'start' | 'key' | 'colon' | 'value' | 'next'; pending: SchemaNode | null; ws: number }
  | { t: 'key'; candidates: { key: string; bytes: Uint8Array; node: SchemaNode }[]; pos: number }
  | { t: 'array'; node: Extract<SchemaNode, { kind: 'array' }>; count: number; phase: 'start' | 'value' | 'next'; ws: number }
  /**
   * len counts characters only while a length limit still matters (see counting()). `utf8` is the number of
   * continuation bytes still due for the current character, and [lo, hi] the range the next one must lie in.
   */
  | { t: 'string'; esc: number; utf8: number; lo: number; hi: number; key: boolean; len: number; min: number; max: number }
  /** Bounded integers carry their digits so far (`value`, `neg`) to keep every prefix able to land in range. */
  | { t: 'number'; integer: boolean; phase: 'sign' | 'zero' | 'int' | 'dot' | 'frac' | 'e' | 'esign' | 'exp'; len: number; neg: boolean; value: bigint; min?: bigint; max?: bigint }
  | { t: 'literal'; options: Uint8Array[]; pos: number }
  /** One of several texts, each followed by its own value (see GrammarState.startBranches). */
  | { t: 'branch'; options: { bytes: Uint8Array; node: SchemaNode }[]; pos: number };

interface Stack {
  frame: Frame;
  next: Stack | null;
}

/** A grammar state. `null` stack = everything matched. */
export class GrammarState {
  private constructor(private readonly stack: Stack | null) {}

  static start(root: SchemaNode, prefix = '', suffix = ''): GrammarState {
    let s: Stack | null = null;
    if (suffix) s = { frame: { t: 'text', bytes: utf8(suffix), pos: 0 }, next: s };
    s = { frame: { t: 'value', node: root, ws: 0 }, next: s };
    if (prefix) s = { frame: { t: 'text', bytes: utf8(prefix), pos: 0 }, next: s };
    return new GrammarState(s);
  }

  /**
   * `prefix`, then one of `branches` (its text, then a value of its schema), then `suffix`: a value whose
   * schema depends on the text before it, e.g. a forced tool call whose `arguments` follow the chosen tool's
   * `parameters` (`{"name": "get_weather", "arguments": ` + that tool's schema). The branch texts must be
   * prefix-free (no text a prefix of another), which a closing quote after each name makes them.
   */
  static startBranches(prefix: string, branches: { text: string; node: SchemaNode }[], suffix = ''): GrammarState {
    let s: Stack | null = null;
    if (suffix) s = { frame: { t: 'text', bytes: utf8(suffix), pos: 0 }, next: s };
    s = { frame: { t: 'branch', options: branches.map((b) => ({ bytes: utf8(b.text), node: b.node })), pos: 0 }, next: s };
    if (prefix) s = { frame: { t: 'text', bytes: utf8(prefix), pos: 0 }, next: s };
    return new GrammarState(s);
  }

  feed(byte: number): GrammarState | null {
    const next = step(this.stack, byte);
    return next === FAIL ? null : new GrammarState(next);
  }

  feedBytes(bytes: Uint8Array): GrammarState | null {
    let s: Stack | null | typeof FAIL = this.stack;
    for (const b of bytes) {
      s = step(s, b);
      if (s === FAIL) return null;
    }
    return new GrammarState(s);
  }

  /** True when the text so far is a complete match (a number at the end needs no delimiter). */
  get canEnd(): boolean {
    let s = this.stack;
    while (s && isCompletable(s.frame)) s = complete(s);
    return s === null;
  }

  get isDone(): boolean {
    return this.stack === null;
  }

  /**
   * Inside a string with no escape or multi-byte character pending, how many more characters may
   * come that cannot close or break the string: Infinity for an unlimited string, the room left
   * under maxLength once minLength is met, else -1. Within that room every printable ASCII byte
   * except `"` and `\\` is accepted whatever came before (see isPlainStringByte).
   */
  get plainStringRoom(): number {
    const f = this.stack?.frame;
    if (f?.t !== 'string' || f.esc !== 0 || f.utf8 !== 0 || f.len < f.min) return -1;
    return f.max - f.len;
  }

  /** Identity of the state: equal keys mean equal states (states are immutable and shared). */
  get key(): object {
    return this.stack ?? DONE_KEY;
  }
}

const DONE_KEY = {};

export function isPlainStringByte(b: number): boolean {
  return b >= 0x20 && b < 0x80 && b !== 0x22 && b !== 0x5c;
}

const FAIL = Symbol('fail');
type Result = Stack | null | typeof FAIL;

function isWs(b: number): boolean {
  return b === 0x20 || b === 0x0a;
}

function step(s: Stack | null, b: number): Result {
  if (!s) return FAIL; // nothing may follow a finished match
  const f = s.frame;
  switch (f.t) {
    case 'text':
      if (f.bytes[f.pos] !== b) return FAIL;
      return f.pos + 1 === f.bytes.length ? s.next : { frame: { ...f, pos: f.pos + 1 }, next: s.next };
    case 'value':
      if (isWs(b)) return f.ws < MAX_WS ? { frame: { ...f, ws: f.ws + 1 }, next: s.next } : FAIL;
      return startValue(f.node, b, s.next);
    case 'object':
      return stepObject(f, s, b);
    case 'key':
      return stepKey(f, s, b);
    case 'array':
      return stepArray(f, s, b);
    case 'string':
      return stepString(f, s, b);
    case 'number':
      return stepNumber(f, s, b);
    case 'literal':
      return stepLiteral(f, s, b);
    case 'branch': {
      const done = f.options.find((o) => o.bytes.length === f.pos + 1 && o.bytes[f.pos] === b);
      if (done) return { frame: { t: 'value', node: done.node, ws: 0 }, next: s.next };
      const options = f.options.filter((o) => o.bytes.length > f.pos + 1 && o.bytes[f.pos] === b);
      return options.length ? { frame: { t: 'branch', options, pos: f.pos + 1 }, next: s.next } : FAIL;
    }
  }
}

/** Begins the value `node` with its first byte `b`, on top of `rest`. */
function startValue(node: SchemaNode, b: number, rest: Stack | null): Result {
  switch (node.kind) {
    case 'any':
      if (b === 0x7b) return startValue({ kind: 'object', props: null, values: node, required: [] }, b, rest);
      if (b === 0x5b) return startValue({ kind: 'array', items: node, minItems: 0, maxItems: Infinity }, b, rest);
      if (b === 0x22) return startValue({ kind: 'string', minLength: 0, maxLength: Infinity }, b, rest);
      if (b === 0x2d || (b >= 0x30 && b <= 0x39)) return startValue({ kind: 'number', integer: false }, b, rest);
      return startValue({ kind: 'literal', options: ['true', 'false', 'null'] }, b, rest);
    case 'union': {
      for (const o of node.options) {
        const r = startValue(o, b, rest);
        if (r !== FAIL) return r;
      }
      return FAIL;
    }
    case 'object':
      if (b !== 0x7b) return FAIL;
      return { frame: { t: 'object', node, seen: [], phase: 'start', pending: null, ws: 0 }, next: rest };
    case 'array':
      if (b !== 0x5b) return FAIL;
      return { frame: { t: 'array', node, count: 0, phase: 'start', ws: 0 }, next: rest };
    case 'string':
      if (b !== 0x22) return FAIL;
      return { frame: { t: 'string', esc: 0, utf8: 0, lo: CONT_LO, hi: CONT_HI, key: false, len: 0, min: node.minLength, max: node.maxLength }, next: rest };
    case 'number':
      return stepNumber({ t: 'number', integer: node.integer, phase: 'sign', len: 0, neg: false, value: 0n, min: node.min, max: node.max }, { frame: null as never, next: rest }, b);
    case 'literal':
      return stepLiteral({ t: 'literal', options: node.options.map(utf8), pos: 0 }, { frame: null as never, next: rest }, b);
  }
}

function stepObject(f: Extract<Frame, { t: 'object' }>, s: Stack, b: number): Result {
  const ws = (): Result => (f.ws < MAX_WS ? { frame: { ...f, ws: f.ws + 1 }, next: s.next } : FAIL);
  const fresh = { ...f, ws: 0 };
  switch (f.phase) {
    case 'start':
    case 'key': {
      if (isWs(b)) return ws();
      if (b === 0x7d && f.phase === 'start') return requiredDone(f) ? complete(s) : FAIL;
      if (b !== 0x22) return FAIL;
      if (f.node.props === null) return { frame: { t: 'string', esc: 0, utf8: 0, lo: CONT_LO, hi: CONT_HI, key: true, len: 0, min: 0, max: Infinity }, next: { frame: { ...fresh, phase: 'colon', pending: f.node.values }, next: s.next } };
      const candidates = nextKeys(f).map((p) => ({ key: p.key, node: p.node, bytes: utf8(JSON.stringify(p.key).slice(1)) }));
      if (!candidates.length) return FAIL;
      return { frame: { t: 'key', candidates, pos: 0 }, next: { frame: fresh, next: s.next } };
    }
    case 'colon':
      if (isWs(b)) return ws();
      if (b !== 0x3a) return FAIL;
      return { frame: { t: 'value', node: f.pending!, ws: 0 }, next: { frame: { ...fresh, phase: 'value', pending: null }, next: s.next } };
    case 'next':
      if (isWs(b)) return ws();
      if (b === 0x7d) return requiredDone(f) ? complete(s) : FAIL;
      if (b === 0x2c && (f.node.props === null || nextKeys(f).length > 0)) return { frame: { ...fresh, phase: 'key' }, next: s.next };
      return FAIL;
    case 'value':
      return FAIL; // unreachable: the value frame sits on top while the value is parsed
  }
}

/**
 * The declared properties that may come next: any unseen one, or for an ordered object the ones after the
 * last written, up to and including the first required one (optional keys may be skipped, never revisited).
 */
function nextKeys(f: Extract<Frame, { t: 'object' }>): { key: string; node: SchemaNode }[] {
  const props = f.node.props ?? [];
  if (!f.node.ordered) return props.filter((p) => !f.seen.includes(p.key));
  let from = 0;
  for (let i = 0; i < props.length; i++) if (f.seen.includes(props[i].key)) from = i + 1;
  const out: { key: string; node: SchemaNode }[] = [];
  for (const p of props.slice(from)) {
    out.push(p);
    if (f.node.required.includes(p.key)) break;
  }
  return out;
}

function requiredDone(f: Extract<Frame, { t: 'object' }>): boolean {
  return f.node.required.every((k) => f.seen.includes(k));
}

/** Keys of declared properties are matched against the remaining candidates (closing quote included). */
function stepKey(f: Extract<Frame, { t: 'key' }>, s: Stack, b: number): Result {
  const done = f.candidates.find((c) => c.bytes.length === f.pos + 1 && c.bytes[f.pos] === b);
  if (done) {
    const obj = s.next!.frame as Extract<Frame, { t: 'object' }>;
    return { frame: { ...obj, seen: [...obj.seen, done.key], phase: 'colon', pending: done.node, ws: 0 }, next: s.next!.next };
  }
  const candidates = f.candidates.filter((c) => c.bytes.length > f.pos + 1 && c.bytes[f.pos] === b);
  if (!candidates.length) return FAIL;
  return { frame: { t: 'key', candidates, pos: f.pos + 1 }, next: s.next };
}

function stepArray(f: Extract<Frame, { t: 'array' }>, s: Stack, b: number): Result {
  const ws = (): Result => (f.ws < MAX_WS ? { frame: { ...f, ws: f.ws + 1 }, next: s.next } : FAIL);
  switch (f.phase) {
    case 'start':
      if (isWs(b)) return ws();
      if (b === 0x5d) return f.node.minItems === 0 ? complete(s) : FAIL;
      if (f.node.maxItems === 0) return FAIL;
      return startValue(f.node.items, b, { frame: { ...f, phase: 'value', ws: 0 }, next: s.next });
    case 'next':
      if (isWs(b)) return ws();
      if (b === 0x5d) return f.count >= f.node.minItems ? complete(s) : FAIL;
      if (b === 0x2c && f.count < f.node.maxItems) return { frame: { t: 'value', node: f.node.items, ws: 0 }, next: { frame: { ...f, phase: 'value', ws: 0 }, next: s.next } };
      return FAIL;
    case 'value':
      return FAIL;
  }
}

const CONT_LO = 0x80;
const CONT_HI = 0xbf;

/**
 * Well-formed UTF-8 only (Unicode's table 3-7): a lead byte fixes how many continuation bytes follow and the
 * range of the first one, which rules out overlong forms (E0 80–9F, F0 80–8F), UTF-16 surrogates (ED A0–BF)
 * and code points above U+10FFFF (F4 90+, F5–FF). Anything else would decode to U+FFFD, and one bad byte
 * would then count as a character of its own, breaking minLength/maxLength.
 */
function utf8Lead(b: number): { more: number; lo: number; hi: number } | null {
  if (b >= 0xc2 && b <= 0xdf) return { more: 1, lo: CONT_LO, hi: CONT_HI };
  if (b === 0xe0) return { more: 2, lo: 0xa0, hi: CONT_HI };
  if (b === 0xed) return { more: 2, lo: CONT_LO, hi: 0x9f };
  if (b >= 0xe1 && b <= 0xef) return { more: 2, lo: CONT_LO, hi: CONT_HI };
  if (b === 0xf0) return { more: 3, lo: 0x90, hi: CONT_HI };
  if (b === 0xf4) return { more: 3, lo: CONT_LO, hi: 0x8f };
  if (b >= 0xf1 && b <= 0xf3) return { more: 3, lo: CONT_LO, hi: CONT_HI };
  return null; // 80–C1 (a stray continuation or an overlong 2-byte lead) and F5–FF never start a character
}

function stepString(f: Extract<Frame, { t: 'string' }>, s: Stack, b: number): Result {
  const same = (esc: number): Stack => ({ frame: { ...f, esc }, next: s.next });
  if (f.utf8 > 0) {
    if (b < f.lo || b > f.hi) return FAIL;
    return { frame: { ...f, utf8: f.utf8 - 1, lo: CONT_LO, hi: CONT_HI }, next: s.next };
  }
  if (f.esc === 1) {
    if (b === 0x75) return same(2); // \u then 4 hex digits (esc 2..5; 6 = after a leading D)
    return '"\\/bfnrt'.includes(String.fromCharCode(b)) ? same(0) : FAIL;
  }
  if (f.esc >= 2) {
    const c = String.fromCharCode(b);
    if (!/[0-9a-fA-F]/.test(c)) return FAIL;
    // No escaped surrogates (\uD800-\uDFFF): a pair would be one character written as two
    // escapes, which would break length counting; real text uses UTF-8 bytes for those anyway.
    if (f.esc === 2 && (c === 'd' || c === 'D')) return same(6);
    if (f.esc === 6) return /[0-7]/.test(c) ? same(4) : FAIL;
    return same(f.esc === 5 ? 0 : f.esc + 1);
  }
  if (b === 0x22) return f.len >= f.min ? complete(s) : FAIL;
  // Every other byte here starts a new character.
  if (f.len >= f.max || b < 0x20) return FAIL;
  const counting = f.len < f.min || f.max < Infinity;
  const len = counting ? f.len + 1 : f.len;
  if (b === 0x5c) return { frame: { ...f, esc: 1, len }, next: s.next };
  if (b < 0x80) return counting ? { frame: { ...f, len }, next: s.next } : s; // unchanged state: lets the constraint reuse masks
  const lead = utf8Lead(b);
  if (!lead) return FAIL;
  return { frame: { ...f, utf8: lead.more, lo: lead.lo, hi: lead.hi, len }, next: s.next };
}

function stepNumber(f: Extract<Frame, { t: 'number' }>, s: Stack, b: number): Result {
  const isDigit = b >= 0x30 && b <= 0x39;
  const to = (phase: typeof f.phase): Result => (f.len + 1 > MAX_NUMBER_LEN ? FAIL : { frame: { ...f, phase, len: f.len + 1 }, next: s.next });
  const bounded = f.min !== undefined || f.max !== undefined;
  /** An integer digit: only if some number starting with the digits so far still lies within the bounds. */
  const digit = (phase: 'zero' | 'int'): Result => {
    if (!bounded) return to(phase);
    const value = f.value * 10n + BigInt(b - 0x30);
    const next: Extract<Frame, { t: 'number' }> = { ...f, phase, len: f.len + 1, value };
    if (next.len > MAX_NUMBER_LEN || !reachable(next)) return FAIL;
    return { frame: next, next: s.next };
  };
  switch (f.phase) {
    case 'sign':
      if (b === 0x2d && f.len === 0) return f.min !== undefined && f.min >= 0n ? FAIL : { frame: { ...f, len: 1, neg: true }, next: s.next };
      if (b === 0x30) return digit('zero');
      return isDigit ? digit('int') : FAIL;
    case 'zero':
    case 'int':
      if (isDigit && f.phase === 'int') return digit('int');
      if (b === 0x2e && !f.integer) return to('dot');
      if ((b === 0x65 || b === 0x45) && !f.integer) return to('e');
      if (bounded && !inBounds(f)) return FAIL;
      return refeed(s, b);
    case 'dot':
      return isDigit ? to('frac') : FAIL;
    case 'frac':
      if (isDigit) return to('frac');
      if (b === 0x65 || b === 0x45) return to('e');
      return refeed(s, b);
    case 'e':
      if (b === 0x2b || b === 0x2d) return to('esign');
      return isDigit ? to('exp') : FAIL;
    case 'esign':
      return isDigit ? to('exp') : FAIL;
    case 'exp':
      return isDigit ? to('exp') : refeed(s, b);
  }
}

function stepLiteral(f: Extract<Frame, { t: 'literal' }>, s: Stack, b: number): Result {
  const options = f.options.filter((o) => o.length > f.pos && o[f.pos] === b);
  if (!options.length) return f.options.some((o) => o.length === f.pos) ? refeed(s, b) : FAIL;
  const pos = f.pos + 1;
  const frame: Frame = { t: 'literal', options, pos };
  // Finished as soon as no longer option remains (e.g. `true`, `"red"`); `1` vs `10` waits for a delimiter.
  if (options.every((o) => o.length === pos)) return complete({ frame, next: s.next });
  return { frame, next: s.next };
}

/** The top value ended without consuming `b` (a number needs a delimiter): finish it, then feed `b`. */
function refeed(s: Stack, b: number): Result {
  return step(complete(s), b);
}

/** The integer written so far, within its bounds. */
function inBounds(f: Extract<Frame, { t: 'number' }>): boolean {
  const v = f.neg ? -f.value : f.value;
  return (f.min === undefined || v >= f.min) && (f.max === undefined || v <= f.max);
}

/**
 * Whether the digits so far can still become an in-range integer: with k more digits the value lies in
 * [p·10^k, p·10^k + 10^k − 1] (negated for a minus sign); some k within the length cap must meet the bounds.
 * A leading 0 takes no more digits.
 */
function reachable(f: Extract<Frame, { t: 'number' }>): boolean {
  const lo = f.min ?? null;
  const hi = f.max ?? null;
  const maxMore = f.phase === 'zero' ? 0 : MAX_NUMBER_LEN - f.len;
  let scale = 1n;
  for (let k = 0; k <= maxMore; k++, scale *= 10n) {
    const a = f.value * scale;
    const b = a + scale - 1n;
    const [from, to] = f.neg ? [-b, -a] : [a, b];
    if ((hi === null || from <= hi) && (lo === null || to >= lo)) return true;
    if (!f.neg && hi !== null && a > hi) return false; // longer numbers only grow
    if (f.neg && lo !== null && -a < lo) return false;
  }
  return false;
}

function isCompletable(f: Frame): boolean {
  if (f.t === 'number') {
    if ((f.min !== undefined || f.max !== undefined) && (f.phase === 'zero' || f.phase === 'int')) return inBounds(f);
    return f.phase === 'zero' || f.phase === 'int' || f.phase === 'frac' || f.phase === 'exp';
  }
  if (f.t === 'literal') return f.options.some((o) => o.length === f.pos);
  return false;
}

/** Pops a finished value and tells its container. */
function complete(s: Stack): Stack | null {
  const parent = s.next;
  if (!parent) return null;
  const p = parent.frame;
  if (p.t === 'object' && p.phase === 'colon' && (s.frame.t === 'string' && s.frame.key)) return parent; // free key read; ':' next
  if (p.t === 'object' && p.phase === 'value') return { frame: { ...p, phase: 'next', ws: 0 }, next: parent.next };
  if (p.t === 'array' && p.phase === 'value') return { frame: { ...p, phase: 'next', count: p.count + 1, ws: 0 }, next: parent.next };
  return parent;
}

function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
