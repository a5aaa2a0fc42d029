// Fuzzing every route of the API (issue #9, point 2): thousands of generated malformed bodies, query strings,
// path ids and headers. The route list comes from GET /openapi.json, so a new route is covered without
// touching this file. For every answer: never a 500 or a dropped connection, the documented error shape
// (422 FastAPI-style with loc body/query/path; else {detail} or {reason} on /table/*), the store unchanged
// by failed requests, and the server still healthy afterwards.
//
// Requests go over real HTTP (node:http, not fetch) so the test can send raw bytes, raw `../` in paths and
// arbitrary headers. fast-check generates them from a fixed seed: a failure prints its seed and the
// shrunk batch, and reruns identically.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { installManifestOnly, startServer, type TestServer } from '../helpers/server.js';
import { nowIso } from '../../src/store/records.js';

const SEED = 20261122;
const CONCURRENCY = 16;
/** fast-check runs per route; each run sends one batch of CONCURRENCY requests. */
const RUNS_PER_ROUTE = 13;
const SMALL_LIMIT = 64 * 1024;
const BASE = 'fuzz-pub/tiny-base';

// ---------------------------------------------------------------- raw HTTP

interface RawRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Send the body with Transfer-Encoding: chunked (no Content-Length), as a streaming client does. */
  chunked?: boolean;
}

interface RawResponse {
  status: number;
  text: string;
  json: unknown;
  contentType: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

function send(base: string, req: RawRequest): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...req.headers };
    if (req.body && !req.chunked) headers['content-length'] = String(req.body.length);
    // Node frames DELETE bodies only when told to: name the chunked encoding for every method.
    if (req.body && req.chunked) headers['transfer-encoding'] = 'chunked';
    let answered = false;
    const r = http.request({ host: url.hostname, port: url.port, method: req.method, path: req.path, headers, agent }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown = undefined;
        try {
          json = JSON.parse(text);
        } catch {
          /* not JSON: the shape checks below say so */
        }
        resolve({ status: res.statusCode ?? 0, text, json, contentType: String(res.headers['content-type'] ?? '') });
      });
    });
    // A server may answer early (413) and close the connection while the body is still being written
    // (RFC 9110 allows it): the client's write then fails, which is fine once the answer has arrived.
    r.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (req.body && req.chunked) {
      // Several chunks, so the server sees a streamed body.
      for (let i = 0; i < req.body.length; i += 16 * 1024) r.write(req.body.subarray(i, i + 16 * 1024));
      r.end();
    } else r.end(req.body);
  });
}

/** Write `text` on a fresh TCP connection and read everything the server answers until it closes. */
function rawExchange(base: string, text: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => socket.write(text));
    let out = '';
    socket.on('data', (d) => (out += d.toString('utf8')));
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
  });
}

/** Run `tasks` with at most `limit` in flight. */
async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  });
  await Promise.all(workers);
  return out;
}

// ---------------------------------------------------------------- routes from the OpenAPI document

interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  minLength?: number;
  minItems?: number;
  minimum?: number;
  exclusiveMinimum?: number;
  default?: unknown;
  additionalProperties?: unknown;
}

interface Param {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema?: JsonSchema;
}

interface Operation {
  method: string;
  /** OpenAPI path, e.g. /v1/preview/models/{model_id}. */
  template: string;
  params: Param[];
  bodySchema: JsonSchema | null;
  /** The body is raw text (JSONL datasets), not a JSON document. */
  textBody: boolean;
  secured: boolean;
  basicAllowed: boolean;
  /** Error style of the route: {reason} on /table/*, else {detail}. */
  reasonStyle: boolean;
  /** OpenAI routes (/v1/* outside the training API, /inference/*) answer {error: {message, type, param, code}}. */
  openAiStyle: boolean;
  /** Anthropic routes (/v1/messages…) answer {type: 'error', error: {type, message}}, validation too (400, never 422). */
  anthropicStyle: boolean;
}

const isAnthropic = (template: string) => template === '/v1/messages' || template.startsWith('/v1/messages/');

function operationsOf(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      const schema: JsonSchema | null = op.requestBody?.content?.['application/json']?.schema ?? null;
      const security: Record<string, unknown>[] = op.security ?? [];
      ops.push({
        method: method.toUpperCase(),
        template,
        params: op.parameters ?? [],
        bodySchema: schema,
        textBody: schema?.type === 'string',
        secured: security.length > 0,
        basicAllowed: security.some((s) => 'HTTPBasic' in s),
        // The Weave trace server's routes (tables, objects, refs) answer {"reason"}.
        reasonStyle: /^\/(table|obj|objs|refs)\//.test(template),
        openAiStyle: !isAnthropic(template) && (template.startsWith('/inference/') || (template.startsWith('/v1/') && !/^\/v1\/(preview|training|health|system-check|system)(\/|$)/.test(template))),
        anthropicStyle: isAnthropic(template),
      });
    }
  }
  return ops;
}

/**
 * Values for well-known field names that get a body past the checks a schema cannot express (project ids
 * the key's entity owns, installed base models, an existing model), so mutations reach the deeper code.
 */
const plausible: Record<string, unknown> = { project_id: 'alice/fuzz', base_model: BASE, model: BASE, entity: 'alice' };

/** A minimal value that satisfies `schema` (first union member, required fields only), to mutate from. */
function exampleOf(schema: JsonSchema | undefined, doc: any, depth = 0, name = ''): unknown {
  if (name in plausible) return plausible[name];
  if (!schema || depth > 12) return null;
  if (schema.$ref) return exampleOf(doc.components.schemas[schema.$ref.split('/').pop()!], doc, depth + 1);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return exampleOf(union.find((s) => s.type !== 'null') ?? union[0], doc, depth + 1);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s) => exampleOf(s, doc, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = exampleOf(schema.properties?.[key], doc, depth + 1, key);
      return out;
    }
    case 'array':
      // At least one item, so mutations can land inside list elements (table rows, trajectories, messages).
      return Array.from({ length: Math.max(1, schema.minItems ?? 0) }, (_, i) => exampleOf(schema.prefixItems?.[i] ?? schema.items, doc, depth + 1));
    case 'string':
      return 'a'.repeat(Math.max(1, schema.minLength ?? 1));
    case 'integer':
      return Math.max(1, schema.minimum ?? 1);
    case 'number':
      return Math.max(0.5, schema.minimum ?? 0.5);
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      return {};
  }
}

/** Field names a body mutation may target: the schema's own properties (optional ones too), first level. */
function fieldNames(schema: JsonSchema | null, doc: any): string[] {
  let s = schema;
  while (s?.$ref) s = doc.components.schemas[s.$ref.split('/').pop()!];
  return Object.keys(s?.properties ?? {});
}

// ---------------------------------------------------------------- generators

/** JSON text that JSON.stringify cannot produce: placed where a value goes in an otherwise valid body. */
const rawNumberText = fc.constantFrom(
  '1e400', '-1e400', '-0', '-0.0', 'NaN', 'Infinity', '-Infinity', '1E+2', '0x10', '01', '.5', '5.',
  '123456789012345678901234567890', '-99999999999999999999999', '9007199254740993', '1.0000000000000000000001',
  '9'.repeat(4400), '1e-400', 'true', 'null', '"\\ud800"', '"\\u0000"', '"\\uZZZZ"',
);

const hugeString = fc.constantFrom('x'.repeat(100_000), '\u{1F600}'.repeat(20_000), '\0'.repeat(10_000), '../'.repeat(5_000));

/** Odd JSON values: wrong types, boundaries, huge numbers and strings. */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: fc.constantFrom(-1, 0, -0, 1e9, 1e12, 2 ** 53 + 2, -(2 ** 63), 1.5, 1e308, -1e-308, Number.MAX_SAFE_INTEGER) },
  { weight: 2, arbitrary: fc.constantFrom('', ' ', '../../etc/passwd', '..', '\u0000', 'a\r\nb', '%00', '${x}', "'; DROP TABLE models; --", '\uFFFF', '\uD800') },
  { weight: 1, arbitrary: hugeString },
  { weight: 1, arbitrary: fc.constantFrom([], {}, [[[[[]]]]], { __proto__: { polluted: true } }, { constructor: { prototype: { x: 1 } } }) },
  { weight: 1, arbitrary: fc.array(fc.jsonValue({ maxDepth: 1 }), { minLength: 1000, maxLength: 1000 }) },
);

const deepNesting = fc.constantFrom(
  '['.repeat(10_000) + ']'.repeat(10_000),
  '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000),
  '['.repeat(10_000),
  '{"a":'.repeat(10_000),
  '[{"role":"user","content":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}]',
);

/** Bytes that are not UTF-8 (lone continuation bytes, overlongs, surrogates, truncated sequences). */
const invalidUtf8 = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 512 }).map((a) => Buffer.from(a)),
  fc.constantFrom(
    Buffer.from([0xff, 0xfe, 0xfd]),
    Buffer.from([0xc0, 0xaf]),
    Buffer.from([0xed, 0xa0, 0x80]),
    Buffer.from([0xe2, 0x82]),
    Buffer.from([0xf4, 0x90, 0x80, 0x80]),
  ),
);

const MARKER = '__FUZZ_SPLICE__';

/** The body with the value at `at` replaced by raw JSON text (numbers, nesting JSON.stringify never writes). */
function spliceRaw(body: unknown, at: string[], raw: string): string {
  return JSON.stringify(setPath(body, at, MARKER)).replace(`"${MARKER}"`, raw);
}

/** The body with raw bytes (invalid UTF-8) inside the string at `at`. */
function spliceBytes(body: unknown, at: string[], bytes: Buffer): Buffer {
  const [before, after] = JSON.stringify(setPath(body, at, MARKER)).split(MARKER);
  return Buffer.concat([Buffer.from(before), bytes, Buffer.from(after)]);
}

/** A copy of `body` with `value` at `at`; own properties even for keys like `__proto__`. */
function setPath(body: unknown, at: string[], value: unknown): unknown {
  const own = (node: any, key: string, v: unknown) => Object.defineProperty(node, key, { value: v, enumerable: true, writable: true, configurable: true });
  const copy: any = body && typeof body === 'object' ? structuredClone(body) : {};
  let node = copy;
  for (const k of at.slice(0, -1)) {
    if (!Object.hasOwn(node, k) || !node[k] || typeof node[k] !== 'object') own(node, k, {});
    node = node[k];
  }
  own(node, at[at.length - 1], value);
  return copy;
}

/**
 * Every nested key path of a value, plus slot 0 of every array (empty ones too) and a new key in every
 * object (loose objects keep unknown keys), for mutations deep inside bodies.
 */
function keyPaths(value: unknown, prefix: string[] = [], out: string[][] = []): string[][] {
  if (Array.isArray(value)) out.push([...prefix, '0']);
  else if (value && typeof value === 'object') out.push([...prefix, 'fuzz_extra']);
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push([...prefix, k]);
      keyPaths(v, [...prefix, k], out);
    }
  }
  return out;
}

interface BodyChoice {
  bytes: Buffer | undefined;
  contentType: string | undefined;
}

function bodyArb(op: Operation, doc: any): fc.Arbitrary<BodyChoice> {
  const base = exampleOf(op.bodySchema ?? undefined, doc);
  const fields = [...new Set([...fieldNames(op.bodySchema, doc), 'extra_field', '__proto__', 'constructor'])];
  // Where a mutation may land: any nested position of the valid body, or any top-level field.
  const targets = fc.constantFrom(...keyPaths(base), ...fields.map((f) => [f]));
  const json = (v: unknown) => Buffer.from(JSON.stringify(v) ?? 'null');
  const body = fc.oneof(
    // random JSON at the top level
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json) },
    // a valid body with one (possibly nested) field set to an odd value
    { weight: 6, arbitrary: fc.tuple(targets, oddValue).map(([at, v]) => json(setPath(base, at, v))) },
    // a valid body with a required field missing
    { weight: 2, arbitrary: fc.constantFrom(...(fields.length ? fields : ['x'])).map((f) => { const b: any = base && typeof base === 'object' ? { ...base } : {}; delete b[f]; return json(b); }) },
    // number/string text JSON.stringify never writes
    { weight: 3, arbitrary: fc.tuple(targets, rawNumberText).map(([at, raw]) => Buffer.from(spliceRaw(base, at, raw))) },
    // deep nesting as raw text, at the top or inside a field
    { weight: 1, arbitrary: deepNesting.map((t) => Buffer.from(t)) },
    { weight: 3, arbitrary: fc.tuple(targets, deepNesting).map(([at, t]) => Buffer.from(spliceRaw(base, at, t))) },
    // invalid UTF-8, raw or inside a string field
    { weight: 2, arbitrary: invalidUtf8 },
    { weight: 2, arbitrary: fc.tuple(targets, invalidUtf8).map(([at, b]) => spliceBytes(base, at, b)) },
    // broken JSON text and odd documents
    { weight: 2, arbitrary: fc.constantFrom('', ' ', '{', '{"a":1,}', "{'a':1}", '[1,2', 'undefined', '\u0000', '{"a":1}{"b":2}', '{"a":1} trailing', '\uFEFF{}', 'null', '0', '""', '{"__proto__":{"x":1}}').map((t) => Buffer.from(t)) },
    // JSONL-ish text (the dataset route's format) with broken lines
    { weight: op.textBody ? 4 : 1, arbitrary: fc.array(fc.oneof(fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)), fc.constantFrom('{"messages":[]}', '{"messages":[{"role":1}]}', '{"messages":[{"role":"user","content":"hi"}]}', '{', '\u0000', '\r')), { maxLength: 6 }).map((lines) => Buffer.from(lines.join('\n')))},
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
  const contentType = fc.oneof(
    { weight: 8, arbitrary: fc.constant(op.textBody ? 'application/x-ndjson' : 'application/json') },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-16', 'application/json; charset=latin1', 'text/plain', 'application/x-ndjson', 'application/jsonl',
        'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/octet-stream', 'image/png', '*/*', ';;;',
        'application/json, text/plain', 'application/json; boundary', 'Application/JSON', 'application/json\t', 'x'.repeat(2000),
      ),
    },
  );
  return fc.record({ bytes: body, contentType });
}

/** Header values Node's client will send (visible latin-1 and tabs). */
const headerText = fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) => String.fromCharCode(c)), maxLength: 300 });

function authArb(op: Operation, keys: { alice: string; revoked: string }): fc.Arbitrary<string | undefined> {
  const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');
  return fc.oneof(
    { weight: 14, arbitrary: fc.constant(`Bearer ${keys.alice}`) },
    { weight: op.basicAllowed ? 6 : 1, arbitrary: fc.constant(`Basic ${b64(`api:${keys.alice}`)}`) },
    {
      weight: 4,
      arbitrary: fc.oneof(
        fc.constant(undefined),
        headerText,
        headerText.map((t) => `Bearer ${t}`),
        headerText.map((t) => `Basic ${t}`),
        headerText.map((t) => `Basic ${b64(t)}`),
        fc.constantFrom(
          'Bearer', 'Bearer ', 'Basic', 'Basic :', `Basic ${b64(':')}`, `Basic ${b64('api')}`, `Basic ${b64(`api:${keys.revoked}`)}`,
          `Bearer ${keys.revoked}`, `bearer ${keys.alice}x`, `Bearer ${keys.alice.slice(0, -1)}`, `Bearer  ${' '.repeat(100)}`, `Digest ${keys.alice}`,
          `Bearer ${'hearth_'.padEnd(5000, 'A')}`, `Bearer ${keys.alice},Bearer ${keys.alice}`, 'Basic !!!!', 'Basic ====',
        ),
      ),
    },
  );
}

/** A path id: alice's real ids, plausible, odd, control characters, traversal, very long; percent-encoded or raw. */
const pathId = (known: string[]) => fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...known) },
  { weight: 3, arbitrary: fc.uuid().map(encodeURIComponent) },
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }).map(encodeURIComponent) },
  { weight: 2, arbitrary: fc.string({ unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 8 }).map(encodeURIComponent) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '..', '../..', '..%2F..%2Fetc%2Fpasswd', '%2e%2e', '%2e%2e%2f%2e%2e', '.', '%00', '%ZZ', '%', '%E0%A4%A', '%C0%AF', '%FF',
      'a'.repeat(129), 'a'.repeat(5000), encodeURIComponent('wandb-artifact:///alice/p/m'), '%20', '~', '%u0041', 'a%2Fb', '%3F', '%23',
    ),
  },
);

function queryArb(op: Operation): fc.Arbitrary<string> {
  const names = op.params.filter((p) => p.in === 'query').map((p) => p.name);
  const value = fc.oneof(
    fc.constantFrom('-1', '0', '1e9', '1e400', '1.5', 'NaN', '', '../../etc', '%00', '%ZZ', '101', '1', 'asc', 'desc', 'ASC', 'null', '[]', 'a'.repeat(5000), '9'.repeat(400)),
    fc.string({ maxLength: 30 }).map(encodeURIComponent),
  );
  const name = fc.oneof(fc.constantFrom(...names, 'api_key', 'limit', '__proto__', 'constructor', 'x[y]', 'a.b'), fc.string({ maxLength: 10 }).map(encodeURIComponent));
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 6, arbitrary: fc.array(fc.tuple(name, value), { maxLength: 5 }).map((pairs) => (pairs.length ? '?' + pairs.map(([k, v]) => `${k}=${v}`).join('&') : '')) },
    { weight: 1, arbitrary: fc.constantFrom('?', '?&&&', '?=', '?limit', '?limit=1&limit=2', '?a=%', '?' + 'x'.repeat(10_000), '?project=a&name=b', '?project=..&name=..', '?model=..%2F..') },
  );
}

function requestArb(op: Operation, doc: any, keys: { alice: string; revoked: string }): fc.Arbitrary<RawRequest> {
  const pathNames = op.params.filter((p) => p.in === 'path').map((p) => p.name);
  const ids = fc.array(pathId([plausible.model_id as string, plausible.training_job_id as string]), { minLength: pathNames.length, maxLength: pathNames.length });
  const extraHeaders = fc.dictionary(
    fc.constantFrom('x-request-id', 'openai-project', 'compat-project', 'accept', 'accept-encoding', 'x-forwarded-for', 'expect', 'cookie'),
    headerText,
    { maxKeys: 3 },
  );
  return fc
    .record({ ids, query: queryArb(op), auth: authArb(op, keys), body: bodyArb(op, doc), extra: extraHeaders, chunked: fc.boolean() })
    .map(({ ids, query, auth, body, extra, chunked }) => {
      let p = op.template;
      pathNames.forEach((n, i) => (p = p.replace(`{${n}}`, ids[i] || 'x')));
      const headers: Record<string, string> = { ...extra };
      // `Expect: 100-continue` would make node's client wait for the interim answer; keep bodies flowing.
      delete headers.expect;
      if (auth !== undefined) headers.authorization = auth;
      if (body.contentType !== undefined) headers['content-type'] = body.contentType;
      const withBody = op.method !== 'GET' && body.bytes !== undefined;
      return { method: op.method, path: p + query, headers, body: withBody ? body.bytes : undefined, chunked: withBody && chunked };
    });
}

// ---------------------------------------------------------------- checks

/** A short, readable account of a request for failure messages (the full batch is in fast-check's report). */
function describeRequest(req: RawRequest): string {
  const body = req.body ? ` body(${req.body.length}B${req.chunked ? ', chunked' : ''}): ${JSON.stringify(req.body.subarray(0, 80).toString('latin1'))}` : '';
  return `${req.method} ${req.path.slice(0, 120)} headers ${JSON.stringify(req.headers).slice(0, 300)}${body}`;
}

/** What is wrong with one answer (empty when it is fine). */
function problems(op: Operation, res: RawResponse): string[] {
  const out: string[] = [];
  if (res.status >= 500 && res.status !== 501 && res.status !== 503) out.push(`status ${res.status}`);
  if (res.status < 400) return out;
  const body = res.json as any;
  if (!body || typeof body !== 'object') return [...out, `error body is not JSON: ${res.text.slice(0, 200)}`];
  if (op.anthropicStyle) {
    const e = body.error;
    if (res.status === 422) out.push('422 on an Anthropic route (Anthropic answers validation errors 400)');
    if (Object.keys(body).sort().join(',') !== 'error,type' || body.type !== 'error' || typeof e?.message !== 'string' || typeof e.type !== 'string') {
      out.push(`${res.status} body ${res.text.slice(0, 200)} (want {type: 'error', error: {type, message}})`);
    }
    return out;
  }
  // Validation errors: 422 with FastAPI's detail list, on OpenAI routes 400 (OpenAI's status) with the list too.
  if (op.openAiStyle && res.status === 422) out.push(`422 on an OpenAI route (validation answers 400): ${res.text.slice(0, 200)}`);
  if (res.status === 422 || (op.openAiStyle && res.status === 400 && 'detail' in body)) {
    if (op.openAiStyle && (typeof body.error?.message !== 'string' || body.error.type !== 'invalid_request_error')) out.push(`validation error without an OpenAI error object: ${res.text.slice(0, 200)}`);
    if (!Array.isArray(body.detail) || body.detail.length === 0) out.push('validation error without a detail list');
    else
      for (const item of body.detail) {
        if (!Array.isArray(item.loc) || !['body', 'query', 'path'].includes(item.loc[0])) out.push(`422 loc ${JSON.stringify(item.loc)}`);
        if (typeof item.msg !== 'string' || typeof item.type !== 'string') out.push(`422 item ${JSON.stringify(item).slice(0, 200)}`);
      }
    return out;
  }
  const keys = Object.keys(body).sort().join(',');
  // Unknown paths (a path id that stops matching the route) answer the app-wide {detail: 'Not Found'}.
  // The system check answers its report (not an error body) with 503 while a check fails.
  if (res.status === 503 && op.template === '/v1/system-check') return out;
  if (op.openAiStyle) {
    const e = body.error;
    if (keys !== 'error' || typeof e?.message !== 'string' || typeof e.type !== 'string' || !('param' in e) || !('code' in e)) {
      out.push(`${res.status} body ${res.text.slice(0, 200)} (want {error: {message, type, param, code}})`);
    }
    return out;
  }
  const expected = op.reasonStyle && !(res.status === 404 && 'detail' in body) ? 'reason' : 'detail';
  if (keys !== expected || typeof body[expected] !== 'string') out.push(`${res.status} body ${res.text.slice(0, 200)} (want {${expected}: string})`);
  return out;
}

// ---------------------------------------------------------------- the suites

function rowCounts(s: TestServer): Record<string, number> {
  const db = s.store.db;
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as { name: string }[];
  const counts: Record<string, number> = {};
  for (const { name } of tables) counts[name] = (db.prepare(`SELECT count(*) AS n FROM "${name}"`).get() as { n: number }).n;
  return counts;
}

function fileCount(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  return fs.readdirSync(dir, { recursive: true }).length;
}

/** Store rows and files on disk: what a failed request must leave as it was. */
function footprint(s: TestServer) {
  return { rows: rowCounts(s), datasetFiles: fileCount(path.join(s.home, 'datasets')), checkpointFiles: fileCount(path.join(s.home, 'checkpoints')) };
}

async function healthy(s: TestServer): Promise<boolean> {
  const r = await s.call('GET', '/v1/health');
  return r.status === 200 && r.body?.status === 'ok';
}

let s: TestServer;
let doc: any;
let ops: Operation[];
let keys: { alice: string; revoked: string };
const stats = { requests: 0, byStatus: {} as Record<number, number>, checkedBatches: 0, batches: 0 };

beforeAll(async () => {
  // No rate limits: the fuzzer sends thousands of requests with one key and must reach validation each time, and
  // its odd Authorization headers (revoked, truncated keys) would otherwise lock its address out (429) for the rest.
  s = await startServer({ env: { HEARTH_RATE_LIMIT: '0', HEARTH_AUTH_FAILURE_LIMIT: '0' } });
  installManifestOnly(s.home, BASE);
  const revoked = s.ctx.keys.create('alice');
  expect(s.ctx.keys.revoke(revoked.prefix)).toBe(1);
  keys = { alice: s.key('alice'), revoked: revoked.key };
  doc = (await s.call('GET', '/openapi.json')).body;
  const model = await s.call('POST', '/v1/preview/models', { key: keys.alice, body: { project: 'fuzz', name: 'target', base_model: BASE } });
  expect(model.status).toBe(200);
  plausible.model_id = model.body.id;
  // A job with events (no engine runs here), so job routes and plot.png get past their 404.
  const jobId = crypto.randomUUID();
  s.store.jobs.insert({ id: jobId, entity: 'alice', modelId: model.body.id, kind: 'rl', status: 'running', payload: { trajectory_groups: [] }, dedupKey: null, errorMessage: null, createdAt: nowIso(), startedAt: nowIso(), finishedAt: null });
  for (let i = 0; i < 5; i++) s.ctx.trainingJobs.recordEvent(jobId, 'gradient_step', { loss: 1 / (i + 1), reward: i / 5 });
  plausible.training_job_id = jobId;
  // Served outside the document: metrics, the document itself and the Swagger UI with its static files.
  const undocumented = (template: string, params: Param[] = []): Operation => ({
    method: 'GET', template, params, bodySchema: null, textBody: false, secured: false, basicAllowed: false, reasonStyle: false, openAiStyle: false, anthropicStyle: false,
  });
  ops = [
    ...operationsOf(doc),
    undocumented('/metrics'), undocumented('/openapi.json'), undocumented('/docs'),
    undocumented('/docs/static/{file}', [{ name: 'file', in: 'path' }]),
  ];
});
afterAll(async () => {
  await s?.close();
  agent.destroy();
});

describe('fuzzing every route', () => {
  it('reads the routes from /openapi.json', () => {
    // A floor, so a broken document cannot make the fuzzer silently test nothing.
    expect(ops.length).toBeGreaterThanOrEqual(29);
    const templates = ops.map((o) => o.template);
    for (const must of ['/table/create', '/v1/chat/completions', '/v1/completions', '/v1/preview/datasets', '/v1/preview/training-jobs/{training_job_id}/plot.png']) {
      expect(templates).toContain(must);
    }
    expect(ops.find((o) => o.template === '/v1/preview/datasets')?.textBody).toBe(true);
    expect(ops.filter((o) => o.basicAllowed).every((o) => o.reasonStyle)).toBe(true);
  });

  it('answers every malformed request without a 500, in the documented error shape, leaving the store as it was', async () => {
    for (const [i, op] of ops.entries()) {
      await fc.assert(
        fc.asyncProperty(fc.array(requestArb(op, doc, keys), { minLength: CONCURRENCY, maxLength: CONCURRENCY }), async (batch) => {
          const before = footprint(s);
          const answers = await pool(batch, CONCURRENCY, (req) => send(s.url, req).then((res) => ({ req, res })));
          stats.batches++;
          const failures: string[] = [];
          for (const { req, res } of answers) {
            stats.requests++;
            stats.byStatus[res.status] = (stats.byStatus[res.status] ?? 0) + 1;
            for (const p of problems(op, res)) failures.push(`${describeRequest(req)} → ${p}`);
          }
          expect(failures).toEqual([]);
          if (answers.every(({ res }) => res.status >= 400)) {
            stats.checkedBatches++;
            expect(footprint(s)).toEqual(before);
          }
        }),
        { seed: SEED + i, numRuns: RUNS_PER_ROUTE, endOnFailure: true },
      );
    }
    expect(await healthy(s)).toBe(true);
    // Most batches are all failures; the store check must actually have run.
    expect(stats.checkedBatches).toBeGreaterThan(stats.batches / 3);
    expect(stats.requests).toBeGreaterThanOrEqual(5000);
    console.log(`fuzz: ${stats.requests} requests over ${ops.length} routes; statuses ${JSON.stringify(stats.byStatus)}; store checked after ${stats.checkedBatches}/${stats.batches} batches`);
  }, 120_000);

  it('validates chat and completion bodies (400, OpenAI\'s status for validation) before looking for an inference worker (503)', async () => {
    const bad = [
      {},
      { model: 'm' },
      { messages: [{ role: 'user', content: 'hi' }] },
      { model: 'm', messages: [] },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }], n: 1e9 },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' },
      { model: 'm', messages: [{ role: 'wizard', content: 'hi' }] },
    ];
    for (const url of ['/v1/chat/completions', '/v1/chat/completions/']) {
      for (const body of bad) {
        const r = await s.call('POST', url, { key: keys.alice, body });
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.body.detail[0].loc[0]).toBe('body');
        expect(r.body.error.type).toBe('invalid_request_error');
      }
      const ok = await s.call('POST', url, { key: keys.alice, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
      expect(ok.status).toBe(503);
      expect(ok.body.error).toMatchObject({ message: 'No inference workers are attached to this server', type: 'server_error' });
    }
    const completion = await s.call('POST', '/v1/completions', { key: keys.alice, body: { model: 'm', prompt: 7 } });
    expect(completion.status).toBe(400);
  });
});

describe('regressions found by the fuzzer', () => {
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
  const basic = () => `Basic ${Buffer.from(`api:${keys.alice}`).toString('base64')}`;

  it('refuses JSON nested deeper than 1000 levels with 400 in the route style (was a 500: stack overflow)', async () => {
    const before = footprint(s);
    const cases: [string, string, Record<string, string>, 'detail' | 'reason' | 'error'][] = [
      ['/table/create', `{"table":{"project_id":"alice/deep","rows":[{"x":${nested(10_000)}}]}}`, { authorization: basic() }, 'reason'],
      ['/table/update', `{"project_id":"alice/deep","base_digest":"x","updates":[{"append":{"row":{"x":${nested(5_000)}}}}]}`, { authorization: `Bearer ${keys.alice}` }, 'reason'],
      [`/v1/preview/models/${plausible.model_id}/log`, `{"split":"train","trajectory_groups":[{"trajectories":[{"messages_and_choices":[{"role":"user","content":${nested(10_000)}}]}]}]}`, { authorization: `Bearer ${keys.alice}` }, 'detail'],
      ['/v1/chat/completions', `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"x":${nested(100_000)}}}}]}`, { authorization: `Bearer ${keys.alice}` }, 'error'],
    ];
    for (const [url, body, headers, style] of cases) {
      const r = await send(s.url, { method: 'POST', path: url, headers: { ...headers, 'content-type': 'application/json' }, body: Buffer.from(body) });
      expect(r.status, url).toBe(400);
      expect(Object.keys(r.json as object)).toEqual([style]);
      const json = r.json as Record<string, any>;
      expect(style === 'error' ? json.error.message : json[style]).toContain('nested deeper than 1000 levels');
    }
    const dataset = await send(s.url, {
      method: 'POST', path: '/v1/preview/datasets?project=p&name=deep', headers: { authorization: `Bearer ${keys.alice}`, 'content-type': 'application/x-ndjson' },
      body: Buffer.from(`{"messages":[{"role":"user","content":${nested(10_000)}}]}`),
    });
    expect(dataset.status).toBe(422);
    expect(footprint(s)).toEqual(before);
    // Nesting under the limit is still accepted and stored.
    const ok = await send(s.url, { method: 'POST', path: '/table/create', headers: { authorization: basic(), 'content-type': 'application/json' }, body: Buffer.from(`{"table":{"project_id":"alice/deep","rows":[{"x":${nested(900)}}]}}`) });
    expect(ok.status).toBe(200);
  });

  it('answers bad percent-encoding, overlong ids and unparsable HTTP in the API shape (was Fastify\'s {error, code, statusCode})', async () => {
    const bad = await send(s.url, { method: 'GET', path: '/v1/preview/models/%E0%A4%A/checkpoints', headers: { authorization: `Bearer ${keys.alice}` } });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ detail: 'Malformed URL: invalid percent-encoding' });
    const long = await send(s.url, { method: 'DELETE', path: `/v1/preview/models/${'a'.repeat(2000)}`, headers: { authorization: `Bearer ${keys.alice}` } });
    expect(long.status).toBe(414);
    expect(Object.keys(long.json as object)).toEqual(['detail']);
    // Between Fastify's old 100-character cap and the schema's 128: validation answers, with a loc.
    const over = await send(s.url, { method: 'DELETE', path: `/v1/preview/models/${'a'.repeat(129)}`, headers: { authorization: `Bearer ${keys.alice}` } });
    expect(over.status).toBe(422);
    expect((over.json as any).detail[0].loc).toEqual(['path', 'model_id']);
    for (const garbage of ['GARBAGE\r\n\r\n', 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n', 'POST /table/create HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n']) {
      const text = await rawExchange(s.url, garbage);
      expect(text, garbage).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ detail: 'Malformed HTTP request' });
    }
    const huge = await rawExchange(s.url, `GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4))).toEqual({ detail: 'Request headers are too large' });
    expect(await healthy(s)).toBe(true);
  });
});

describe(`bodies over a small HEARTH_BODY_LIMIT and HEARTH_TRAINING_BODY_LIMIT (${SMALL_LIMIT} bytes)`, () => {
  let small: TestServer;
  let key: string;
  beforeAll(async () => {
    small = await startServer({ env: { HEARTH_RATE_LIMIT: '0', HEARTH_BODY_LIMIT: String(SMALL_LIMIT), HEARTH_TRAINING_BODY_LIMIT: String(SMALL_LIMIT) } });
    key = small.key('alice');
  });
  afterAll(async () => small?.close());

  it('answers 413 in the route style for every POST route, with and without Content-Length', async () => {
    const posts = ops.filter((o) => o.method !== 'GET');
    const sizes = [SMALL_LIMIT + 1, SMALL_LIMIT * 2, 1024 * 1024];
    const reqs: { op: Operation; req: RawRequest }[] = [];
    for (const op of posts) {
      const p = op.template.replace(/\{[^}]+\}/g, 'x');
      for (const size of sizes) {
        for (const chunked of [false, true]) {
          const text = `{"a":"${'x'.repeat(size)}"}`;
          const auth = op.basicAllowed ? `Basic ${Buffer.from(`api:${key}`).toString('base64')}` : `Bearer ${key}`;
          const contentType = op.textBody ? 'application/x-ndjson' : 'application/json';
          reqs.push({ op, req: { method: op.method, path: p + (op.textBody ? '?project=p&name=n' : ''), headers: { authorization: auth, 'content-type': contentType }, body: Buffer.from(text), chunked } });
        }
      }
    }
    const before = footprint(small);
    const answers = await pool(reqs, CONCURRENCY, ({ op, req }) => send(small.url, req).then((res) => ({ op, req, res })));
    for (const { op, req, res } of answers) {
      expect(problems(op, res), `${req.method} ${req.path}`).toEqual([]);
      // Routes without a body (DELETE of a model) may 404 first; all others refuse the size.
      if (op.bodySchema) expect(res.status, `${req.method} ${req.path} chunked=${req.chunked}`).toBe(413);
    }
    expect(footprint(small)).toEqual(before);
    expect(await healthy(small)).toBe(true);
    stats.requests += answers.length;
  });
});
