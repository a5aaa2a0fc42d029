// Error shapes of the three APIs Hearth speaks, in one place.
// - Training / inference routes answer FastAPI-style: 422 {"detail":[{loc,msg,type}]}, else {"detail": "..."}.
// - Table routes answer like the Weave trace server: {"reason": "..."} (422 validation stays FastAPI-style).
import type { z } from 'zod';

export type ErrorStyle = 'detail' | 'reason';

export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
}

/** An error with an HTTP status whose message is safe to show to the client. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class ValidationError extends Error {
  readonly statusCode = 422;
  constructor(readonly issues: ValidationIssue[]) {
    super('validation failed');
  }
}

export const badRequest = (msg: string) => new HttpError(400, msg);
export const notFound = (msg: string) => new HttpError(404, msg);
export const conflict = (msg: string) => new HttpError(409, msg);
export const notImplemented = (msg: string) => new HttpError(501, msg);
export const unavailable = (msg: string) => new HttpError(503, msg);

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

/** The body of an error response for a given style. */
export function errorBody(style: ErrorStyle, message: string): Record<string, string> {
  return style === 'reason' ? { reason: message } : { detail: message };
}
