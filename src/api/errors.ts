// Error shapes of the three APIs Hearth speaks, in one place: services and the queue throw domain errors
// (src/errors/domain-errors.ts); this module alone turns them into HTTP statuses and wire bodies. An inference
// worker's error comes with its status already (InferenceFailure, src/protocol/inference-events.ts): it is taken as it is.
// - Training routes answer FastAPI-style: 422 {"detail":[{loc,msg,type}]}, else {"detail": "..."}.
// - OpenAI routes answer {"error":{message,type,param,code}}; validation errors are 400 there, with `detail` too
//   (see validationStatus and openAiValidationBody).
// - Table routes answer like the Weave trace server: {"reason": "..."} (422 validation stays FastAPI-style).
// - Anthropic routes (/v1/messages) answer {"type":"error","error":{type,message}}, validation included (400).
import type { z } from 'zod';
import { DomainError, ValidationError, type ErrorKind, type ValidationIssue } from '../errors/domain-errors.js';
import { InferenceFailure } from '../protocol/inference-events.js';

export { ValidationError, type ValidationIssue };

export type ErrorStyle = 'detail' | 'reason' | 'openai' | 'anthropic';

/** An error raised by the API layer itself (auth, body parsing), with its HTTP status and headers. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly code?: string,
  ) {
    super(message);
  }
}

const STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid: 400, unauthenticated: 401, forbidden: 403, not_found: 404, conflict: 409, too_large: 413,
  over_capacity: 429, client_closed: 499, not_implemented: 501, unavailable: 503, internal: 500,
};

/** An error as it goes on the wire, before the route family's shape is applied. */
export interface WireError {
  status: number;
  message: string;
  headers: Record<string, string>;
  code?: string;
  param?: string;
}

/** Domain, API and inference errors → status, message and headers; anything else is null (a bug: answer 500). */
export function wireErrorOf(err: unknown): WireError | null {
  if (err instanceof DomainError) {
    const headers: Record<string, string> = err.retryAfterSec !== undefined ? { 'retry-after': String(err.retryAfterSec) } : {};
    return { status: STATUS_OF_KIND[err.kind], message: err.message, headers, code: err.code, param: err.param };
  }
  if (err instanceof HttpError) return { status: err.statusCode, message: err.message, headers: err.headers, code: err.code };
  // A worker's error event: its status and OpenAI fields as the worker gave them (src/protocol/inference-events.ts).
  if (err instanceof InferenceFailure) return { status: err.status, message: err.message, headers: {}, code: err.code, param: err.param };
  return null;
}

/**
 * The family of a URL no route declared (unknown paths, errors before routing): the OpenAI paths are
 * `/v1/…` except the training API (`/v1/preview/…`, `/v1/training/…`) and the service checks, and `/inference/…`.
 */
export function errorStyleOfUrl(url: string): ErrorStyle {
  const path = url.split('?')[0];
  if (/^\/(table|obj|objs|refs)\//.test(path)) return 'reason';
  if (path === '/v1/messages' || path.startsWith('/v1/messages/')) return 'anthropic';
  if (path.startsWith('/inference/')) return 'openai';
  if (path.startsWith('/v1/') && !/^\/v1\/(preview|training|health|system-check|system)(\/|$)/.test(path)) return 'openai';
  return 'detail';
}

/** OpenAI's `error.type` for a status (what api.openai.com answers: 429 is "requests", 5xx "server_error"). */
function openAiType(status: number): string {
  if (status === 429) return 'requests';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** Anthropic's `error.type` for a status (as its API and SDK name them). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401: return 'authentication_error';
    case 402: return 'billing_error';
    case 403: return 'permission_error';
    case 404: return 'not_found_error';
    case 413: return 'request_too_large';
    case 429: return 'rate_limit_error';
    case 503: case 529: return 'overloaded_error';
    case 504: return 'timeout_error';
    default: return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** The body of an error response for a route family. */
export function errorBody(style: ErrorStyle, message: string, extra: { status?: number; code?: string; param?: string } = {}): Record<string, unknown> {
  if (style === 'reason') return { reason: message };
  if (style === 'anthropic') return { type: 'error', error: { type: anthropicErrorType(extra.status ?? 400), message } };
  if (style === 'openai') return { error: { message, type: openAiType(extra.status ?? 400), param: extra.param ?? null, code: extra.code ?? null } };
  return { detail: message };
}

/**
 * The status of a request that fails validation, decided here for every route family: 422 on the W&B training
 * and Weave routes (FastAPI's, which their OpenAPI documents), 400 on the OpenAI-compatible routes, as OpenAI and
 * vLLM answer. It matters beyond the number: OpenAI's SDKs and LangChain.js retry a 422 (LangChain sent 7
 * requests over 82 s for one out-of-range `top_logprobs`), never a 400.
 */
export function validationStatus(style: ErrorStyle): 400 | 422 {
  return style === 'openai' || style === 'anthropic' ? 400 : 422;
}

/** OpenAI names nested fields `messages[0].role`; pydantic's loc is `['body', 'messages', 0, 'role']`. */
export function openAiParam(loc: readonly (string | number)[]): string | null {
  const path = loc[0] === 'body' || loc[0] === 'query' || loc[0] === 'path' ? loc.slice(1) : loc;
  if (path.length === 0) return null;
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

/** OpenAI's codes for field errors: missing_required_parameter, unknown_parameter, invalid_type, invalid_value. */
function openAiValidationCode(type: string): string {
  if (type === 'missing') return 'missing_required_parameter';
  if (type === 'extra_forbidden') return 'unknown_parameter';
  if (type === 'json_invalid') return 'invalid_json';
  if (type.endsWith('_type') || type === 'model_type') return 'invalid_type';
  return 'invalid_value';
}

/**
 * A validation error on an OpenAI route (400, see validationStatus): OpenAI's `error` object (so the openai SDKs show the first problem and name its
 * field) and FastAPI's `detail` list (so clients written against FastAPI/vLLM still see every field).
 */
export function openAiValidationBody(issues: readonly ValidationIssue[], detail: unknown[]): Record<string, unknown> {
  const first = issues[0];
  const param = first ? openAiParam(first.loc) : null;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? 's' : ''}, listed in \`detail\`)` : '';
  const message = first ? `Invalid request: ${param ?? first.loc.join('.')}: ${first.msg}${more}` : 'Invalid request';
  return { error: { message, type: 'invalid_request_error', param, code: first ? openAiValidationCode(first.type) : null }, detail };
}

/** A validation failure on an Anthropic route: 400, the first problem as `field.path: message` (as Anthropic words them). */
export function anthropicValidationBody(issues: readonly ValidationIssue[]): Record<string, unknown> {
  const first = issues[0];
  const path = first ? first.loc.filter((_, i) => !(i === 0 && ['body', 'query', 'path'].includes(String(first.loc[0])))).join('.') : '';
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? 's' : ''})` : '';
  return errorBody('anthropic', first ? `${path ? `${path}: ` : ''}${first.msg}${more}` : 'Invalid request', { status: 400 });
}

type Loc = 'body' | 'query' | 'path' | 'header';

function describeValues(values: readonly unknown[]): string {
  const parts = values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v)));
  return parts.length <= 1 ? parts.join('') : `${parts.slice(0, -1).join(', ')} or ${parts[parts.length - 1]}`;
}

const TYPE_NAMES: Record<string, [string, string]> = {
  string: ['string_type', 'Input should be a valid string'],
  number: ['float_type', 'Input should be a valid number'],
  int: ['int_type', 'Input should be a valid integer'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  object: ['dict_type', 'Input should be a valid dictionary'],
  record: ['dict_type', 'Input should be a valid dictionary'],
  array: ['list_type', 'Input should be a valid list'],
  null: ['none_required', 'Input should be None'],
};

/** Translate zod issues into FastAPI/pydantic-v2 style validation items (same `type` names and wording). */
export function zodIssuesToDetail(issues: readonly z.core.$ZodIssue[], where: Loc): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const walk = (list: readonly z.core.$ZodIssue[], prefix: PropertyKey[]) => {
    for (const issue of list) {
      const path = [...prefix, ...issue.path].map((p) => (typeof p === 'number' ? p : String(p)));
      const loc = [where, ...path];
      const input = (issue as { input?: unknown }).input;
      switch (issue.code) {
        case 'invalid_type': {
          if (input === undefined || issue.message.endsWith('received undefined')) {
            out.push({ loc, msg: 'Field required', type: 'missing' });
          } else {
            const [type, msg] = TYPE_NAMES[issue.expected] ?? ['type_error', `Input should be a valid ${issue.expected}`];
            out.push({ loc, msg, type, input });
          }
          break;
        }
        case 'unrecognized_keys':
          for (const key of issue.keys) out.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
          break;
        case 'too_small': {
          const n = Number(issue.minimum);
          if (issue.origin === 'string') out.push({ loc, msg: `String should have at least ${n} character${n === 1 ? '' : 's'}`, type: 'string_too_short', input });
          else if (issue.origin === 'array') out.push({ loc, msg: `List should have at least ${n} item${n === 1 ? '' : 's'} after validation`, type: 'too_short', input });
          else if (issue.inclusive) out.push({ loc, msg: `Input should be greater than or equal to ${n}`, type: 'greater_than_equal', input });
          else out.push({ loc, msg: `Input should be greater than ${n}`, type: 'greater_than', input });
          break;
        }
        case 'too_big': {
          const n = Number(issue.maximum);
          if (issue.origin === 'string') out.push({ loc, msg: `String should have at most ${n} character${n === 1 ? '' : 's'}`, type: 'string_too_long', input });
          else if (issue.origin === 'array') out.push({ loc, msg: `List should have at most ${n} item${n === 1 ? '' : 's'} after validation`, type: 'too_long', input });
          else if (issue.inclusive) out.push({ loc, msg: `Input should be less than or equal to ${n}`, type: 'less_than_equal', input });
          else out.push({ loc, msg: `Input should be less than ${n}`, type: 'less_than', input });
          break;
        }
        case 'invalid_value':
          out.push({
            loc,
            msg: `Input should be ${describeValues(issue.values)}`,
            type: issue.values.length === 1 ? 'literal_error' : 'enum',
            input,
          });
          break;
        case 'invalid_union':
          // pydantic reports the errors of every union member; so do we.
          if (issue.errors.length === 0) out.push({ loc, msg: issue.message, type: 'union_error', input });
          for (const member of issue.errors) walk(member, [...prefix, ...issue.path]);
          break;
        case 'invalid_format':
          out.push({ loc, msg: `String should match format ${issue.format}`, type: 'string_pattern_mismatch', input });
          break;
        default:
          out.push({ loc, msg: issue.message, type: 'value_error', input });
      }
    }
  };
  walk(issues, []);
  return out;
}
