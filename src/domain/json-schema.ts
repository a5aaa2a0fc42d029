// Compiles the supported subset of JSON Schema into a small tree the JSON grammar
// (json-grammar.ts) walks while decoding. Supported:
//   type (one or a list), object with properties / required / additionalProperties,
//   string (minLength / maxLength), number, integer, boolean, null, enum, const,
//   array with items / minItems / maxItems, anyOf whose branches start with different characters
//   (e.g. string | null), allOf with one member, nullable, local non-recursive $ref into
//   $defs / definitions (what Pydantic emits for nested models), and annotations
//   (title, description, default, examples, $schema, $id, $comment).
// Everything else (pattern, format, minimum/maximum, oneOf, recursive $ref, …) is rejected with a
// clear error rather than silently producing output that might not match.
// A definition is compiled once however often it is used: every $ref to it gets the same node, so the tree
// is a DAG (the grammar only follows references down it). Expanding each use instead was exponential in a
// chain of definitions each used twice (24 of them in a 2.8 KB schema hung the worker, issue #44). Compiling
// is also capped in nodes and time (schemaLimits), answered 400 naming the cap.
// Objects only ever get their declared properties (valid for any additionalProperties setting);
// an object without properties accepts any keys, with values matching additionalProperties.
import { positiveIntSetting } from './positive-int-setting.js';

export type SchemaNode =
  | { kind: 'any' }
  /** `ordered`: declared keys come in the schema's order (strict schemas), optional ones may be skipped. */
  | { kind: 'object'; props: { key: string; node: SchemaNode }[] | null; values: SchemaNode; required: string[]; ordered?: boolean }
  | { kind: 'array'; items: SchemaNode; minItems: number; maxItems: number }
  | { kind: 'string'; minLength: number; maxLength: number }
  /** `min`/`max`: inclusive bounds of an integer (minimum, maximum, exclusive ones made inclusive). */
  | { kind: 'number'; integer: boolean; min?: bigint; max?: bigint }
  | { kind: 'literal'; options: string[] } // JSON texts of the allowed values (enum, const, true/false, null)
  | { kind: 'union'; options: SchemaNode[] };

const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$schema', '$id', '$comment', 'deprecated', 'readOnly', 'writeOnly', 'strict']);
const SUPPORTED = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'anyOf', 'allOf', 'minItems', 'maxItems',
  'minLength', 'maxLength', 'nullable', '$ref', '$defs', 'definitions',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
]);

/** What building a schema needs besides the node: the root (for $ref) and the problems found. */
interface BuildContext {
  root: unknown;
  problems: string[];
  /** $refs being expanded, to refuse recursion (it would need a grammar with a stack of schemas). */
  expanding: string[];
  /** Objects' keys in declaration order (OpenAI's `strict: true`). */
  orderedKeys: boolean;
  /** Definitions already compiled, by $ref: each is built once and shared by all its uses. */
  defs: Map<string, SchemaNode>;
  /** Schema objects visited so far, and when compiling began (performance.now()), for the caps. */
  nodes: number;
  startedMs: number;
  limits: SchemaLimits;
}

/** How much compiling one schema may cost (HEARTH_SCHEMA_MAX_NODES, HEARTH_SCHEMA_MAX_MS). */
export interface SchemaLimits {
  /** Schema objects (subschemas, $ref uses included) one compile may visit. */
  maxNodes: number;
  /** Wall-clock ms one compile may take (a backstop: the node cap normally ends it first). */
  maxMs: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxNodes: 10_000, maxMs: 1_000 };

/** The caps from the environment (read by whichever process compiles: API or worker), defaults above. */
export function schemaLimitsFrom(env: NodeJS.ProcessEnv = process.env): SchemaLimits {
  const read = (name: string, fallback: number) => positiveIntSetting(env, name, fallback);
  return { maxNodes: read('HEARTH_SCHEMA_MAX_NODES', DEFAULT_SCHEMA_LIMITS.maxNodes), maxMs: read('HEARTH_SCHEMA_MAX_MS', DEFAULT_SCHEMA_LIMITS.maxMs) };
}

export class UnsupportedSchemaError extends Error {
  constructor(
    readonly features: string[],
    message = `unsupported JSON schema features: ${features.join('; ')}`,
  ) {
    super(message);
  }
}

/** A schema past a compile cap: refused (400) before any decoding, naming the cap and its setting. */
export class SchemaTooComplexError extends UnsupportedSchemaError {
  readonly code = 'schema_too_complex';
  /** @param param the request field that holds the schema, where the caller knows it. */
  constructor(message: string, readonly param?: string) {
    super([message], message);
  }
}

function newContext(schema: unknown, orderedKeys: boolean, limits: SchemaLimits): BuildContext {
  return { root: schema, problems: [], expanding: [], orderedKeys, defs: new Map(), nodes: 0, startedMs: performance.now(), limits };
}

/** Names every unsupported feature in a schema (empty when the schema can be enforced). Throws SchemaTooComplexError past a cap. */
export function unsupportedSchemaFeatures(schema: unknown, limits: SchemaLimits = schemaLimitsFrom()): string[] {
  const cx = newContext(schema, false, limits);
  build(schema, '#', cx);
  return cx.problems;
}

/**
 * `orderedKeys` (for `strict: true` schemas) makes objects write their declared keys in the schema's order,
 * as OpenAI's structured outputs do: a small model then cannot wander between keys, and clients that read
 * the object as it streams see the fields in the order they declared.
 */
export function compileSchema(schema: unknown, opts: { orderedKeys?: boolean; limits?: SchemaLimits } = {}): SchemaNode {
  const cx = newContext(schema, opts.orderedKeys ?? false, opts.limits ?? schemaLimitsFrom());
  const node = build(schema, '#', cx);
  if (cx.problems.length) throw new UnsupportedSchemaError(cx.problems);
  return node;
}

/** `response_format: json_object`: any JSON object. */
export const ANY_OBJECT: SchemaNode = { kind: 'object', props: null, values: { kind: 'any' }, required: [] };

function build(schema: unknown, path: string, cx: BuildContext): SchemaNode {
  countNode(cx);
  const problems = cx.problems;
  if (schema === true || (isObj(schema) && Object.keys(schema).every((k) => ANNOTATIONS.has(k) || k === '$defs' || k === 'definitions')))
    return { kind: 'any' };
  if (!isObj(schema)) {
    problems.push(`${path}: a schema must be an object`);
    return { kind: 'any' };
  }
  for (const k of Object.keys(schema)) if (!SUPPORTED.has(k) && !ANNOTATIONS.has(k)) problems.push(`${path}: '${k}' is not supported`);
  if (typeof schema.$ref === 'string') return buildRef(schema, path, cx);

  let node = buildCore(schema, path, cx);
  if (schema.nullable === true) node = union([node, { kind: 'literal', options: ['null'] }], path, problems);
  return node;
}

/** Enforces the caps: every schema object visited counts, and the clock is read every 256 of them. */
function countNode(cx: BuildContext): void {
  const { maxNodes, maxMs } = cx.limits;
  if (++cx.nodes > maxNodes)
    throw new SchemaTooComplexError(`the JSON schema has more than ${maxNodes} subschemas to compile (the limit, HEARTH_SCHEMA_MAX_NODES); simplify it or raise the limit`);
  if (cx.nodes % 256 === 0 && performance.now() - cx.startedMs > maxMs)
    throw new SchemaTooComplexError(`compiling the JSON schema took more than ${maxMs} ms (the limit, HEARTH_SCHEMA_MAX_MS); simplify it or raise the limit`);
}

/** Local references (`#/$defs/Name`, `#/definitions/Name`): each definition is compiled once and its node shared. */
function buildRef(s: Record<string, unknown>, path: string, cx: BuildContext): SchemaNode {
  const ref = s.$ref as string;
  const siblings = Object.keys(s).filter((k) => k !== '$ref' && k !== '$defs' && k !== 'definitions' && !ANNOTATIONS.has(k));
  if (siblings.length) cx.problems.push(`${path}: keywords next to $ref (${siblings.join(', ')}) are not supported`);
  const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
  if (!m) {
    cx.problems.push(`${path}: $ref '${ref}' is not supported (only local #/$defs/<name> references)`);
    return { kind: 'any' };
  }
  if (cx.expanding.includes(ref)) {
    cx.problems.push(`${path}: recursive $ref '${ref}' is not supported`);
    return { kind: 'any' };
  }
  const defs = isObj(cx.root) ? cx.root[m[1]] : undefined;
  const name = m[2].replaceAll('~1', '/').replaceAll('~0', '~');
  const target = isObj(defs) ? defs[name] : undefined;
  if (target === undefined) {
    cx.problems.push(`${path}: $ref '${ref}' points to nothing`);
    return { kind: 'any' };
  }
  const compiled = cx.defs.get(ref);
  if (compiled) return compiled;
  cx.expanding.push(ref);
  const node = build(target, ref, cx);
  cx.expanding.pop();
  cx.defs.set(ref, node);
  return node;
}

function buildCore(s: Record<string, unknown>, path: string, cx: BuildContext): SchemaNode {
  const problems = cx.problems;
  if ('allOf' in s) {
    if (!Array.isArray(s.allOf) || s.allOf.length !== 1) {
      problems.push(`${path}: allOf is only supported with exactly one member`);
      return { kind: 'any' };
    }
    const rest = Object.keys(s).filter((k) => k !== 'allOf' && !ANNOTATIONS.has(k));
    if (rest.length) problems.push(`${path}: keywords next to allOf (${rest.join(', ')}) are not supported`);
    return build(s.allOf[0], `${path}/allOf/0`, cx);
  }
  if ('const' in s) return { kind: 'literal', options: [JSON.stringify(s.const)] };
  if ('enum' in s) {
    if (!Array.isArray(s.enum) || s.enum.length === 0) {
      problems.push(`${path}: enum must be a non-empty array`);
      return { kind: 'any' };
    }
    return { kind: 'literal', options: [...new Set(s.enum.map((v) => JSON.stringify(v)))] };
  }
  if ('anyOf' in s) {
    if (!Array.isArray(s.anyOf) || s.anyOf.length === 0) {
      problems.push(`${path}: anyOf must be a non-empty array`);
      return { kind: 'any' };
    }
    return union(s.anyOf.map((b, i) => build(b, `${path}/anyOf/${i}`, cx)), path, problems);
  }
  const types = s.type === undefined ? [inferType(s)] : Array.isArray(s.type) ? s.type : [s.type];
  const nodes = types.map((t) => buildType(String(t), s, path, cx));
  return nodes.length === 1 ? nodes[0] : union(nodes, path, problems);
}

/** An integer with its bounds made inclusive and exact (bigint: zod's int() bounds are ±(2^53 − 1)). */
function integerNode(s: Record<string, unknown>, path: string, problems: string[]): SchemaNode {
  const bound = (k: string, round: (x: number) => number, shift: number): bigint | undefined => {
    const v = s[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      problems.push(`${path}: ${k} must be a finite number`);
      return undefined;
    }
    const r = round(v);
    return BigInt(Number.isInteger(v) ? r + shift : r);
  };
  const lows = [bound('minimum', Math.ceil, 0), bound('exclusiveMinimum', Math.ceil, 1)].filter((x) => x !== undefined);
  const highs = [bound('maximum', Math.floor, 0), bound('exclusiveMaximum', Math.floor, -1)].filter((x) => x !== undefined);
  const min = lows.length ? lows.reduce((a, b) => (a > b ? a : b)) : undefined;
  const max = highs.length ? highs.reduce((a, b) => (a < b ? a : b)) : undefined;
  if (min !== undefined && max !== undefined && min > max) problems.push(`${path}: no integer lies between the bounds`);
  return { kind: 'number', integer: true, ...(min !== undefined ? { min } : {}), ...(max !== undefined ? { max } : {}) };
}

function inferType(s: Record<string, unknown>): string {
  if ('properties' in s || 'required' in s || 'additionalProperties' in s) return 'object';
  if ('items' in s || 'minItems' in s || 'maxItems' in s) return 'array';
  if ('minLength' in s || 'maxLength' in s) return 'string';
  return 'any';
}

function buildType(type: string, s: Record<string, unknown>, path: string, cx: BuildContext): SchemaNode {
  const problems = cx.problems;
  switch (type) {
    case 'any':
      return { kind: 'any' };
    case 'string': {
      const minLength = typeof s.minLength === 'number' ? s.minLength : 0;
      const maxLength = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
      if (minLength > maxLength) problems.push(`${path}: minLength > maxLength`);
      return { kind: 'string', minLength, maxLength };
    }
    case 'number':
      if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].some((k) => k in s)) problems.push(`${path}: bounds on a non-integer number are not supported`);
      return { kind: 'number', integer: false };
    case 'integer':
      return integerNode(s, path, problems);
    case 'boolean':
      return { kind: 'literal', options: ['true', 'false'] };
    case 'null':
      return { kind: 'literal', options: ['null'] };
    case 'array': {
      const minItems = typeof s.minItems === 'number' ? s.minItems : 0;
      const maxItems = typeof s.maxItems === 'number' ? s.maxItems : Infinity;
      if (minItems > maxItems) problems.push(`${path}: minItems > maxItems`);
      const items = s.items === undefined ? { kind: 'any' as const } : build(s.items, `${path}/items`, cx);
      return { kind: 'array', items, minItems, maxItems };
    }
    case 'object': {
      const required = Array.isArray(s.required) ? s.required.map(String) : [];
      const values: SchemaNode = isObj(s.additionalProperties) ? build(s.additionalProperties, `${path}/additionalProperties`, cx) : { kind: 'any' };
      if (!isObj(s.properties)) {
        if (required.length) problems.push(`${path}: 'required' without 'properties'`);
        return { kind: 'object', props: null, values, required: [] };
      }
      const props = Object.entries(s.properties).map(([key, sub]) => ({ key, node: build(sub, `${path}/properties/${key}`, cx) }));
      for (const r of required) if (!props.some((p) => p.key === r)) problems.push(`${path}: required property '${r}' is not in properties`);
      return { kind: 'object', props, values, required, ...(cx.orderedKeys ? { ordered: true } : {}) };
    }
    default:
      problems.push(`${path}: type '${type}' is not supported`);
      return { kind: 'any' };
  }
}

/** A union is decidable from its first character only when no two branches can start alike. */
function union(options: SchemaNode[], path: string, problems: string[]): SchemaNode {
  const flat = options.flatMap((o) => (o.kind === 'union' ? o.options : [o]));
  const seen = new Map<number, number>();
  flat.forEach((o, i) => {
    for (const b of firstBytes(o)) {
      if (seen.has(b) && seen.get(b) !== i) {
        problems.push(`${path}: alternatives that can start with the same character ('${String.fromCharCode(b)}') are not supported`);
        return;
      }
      seen.set(b, i);
    }
  });
  return { kind: 'union', options: flat };
}

const NUMBER_START = [...'-0123456789'].map((c) => c.charCodeAt(0));

/** The bytes a value of this schema may start with (after optional whitespace). */
export function firstBytes(node: SchemaNode): number[] {
  switch (node.kind) {
    case 'any':
      return [...'{["tfn'].map((c) => c.charCodeAt(0)).concat(NUMBER_START);
    case 'object':
      return [0x7b];
    case 'array':
      return [0x5b];
    case 'string':
      return [0x22];
    case 'number':
      return NUMBER_START;
    case 'literal':
      return [...new Set(node.options.map((o) => o.charCodeAt(0)))];
    case 'union':
      return node.options.flatMap(firstBytes);
  }
}

function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
