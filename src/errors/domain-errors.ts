// The errors services, the queue and the stores throw when a request cannot be served. They say what went
// wrong in the domain's words (not found, conflict, invalid, over capacity, …); only the API edge
// (src/api/error-mapping.ts) knows the HTTP status and the wire shape each route family answers with.

/** What kind of failure: the API maps each kind to one HTTP status. */
export type ErrorKind =
  | 'invalid' // bad input the schema could not catch (400)
  | 'unauthenticated' // no key or a bad key (401)
  | 'forbidden' // the caller may not do this (403)
  | 'not_found' // unknown resource, or another entity's (404)
  | 'conflict' // the resource's state forbids it (409)
  | 'too_large' // a body or prompt beyond a limit (413)
  | 'over_capacity' // too much queued for now: retry later (429)
  | 'client_closed' // the client went away (499)
  | 'not_implemented' // a feature this server does not have (501)
  | 'unavailable' // no worker / queue down: retry later (503)
  | 'internal'; // a bug or a crash; the message is not shown (500)

export interface DomainErrorOptions {
  /** A stable machine-readable code (OpenAI's `error.code`: `model_not_found`, `unsupported_parameter`, …). */
  code?: string;
  /** The request field at fault (OpenAI's `error.param`). */
  param?: string;
  /** Seconds after which a retry may succeed (over capacity, unavailable). */
  retryAfterSec?: number;
}

/** An error whose message is safe to show to the client. */
export class DomainError extends Error {
  readonly code: string | undefined;
  readonly param: string | undefined;
  readonly retryAfterSec: number | undefined;

  constructor(
    readonly kind: ErrorKind,
    message: string,
    opts: DomainErrorOptions = {},
  ) {
    super(message);
    this.name = 'DomainError';
    this.code = opts.code;
    this.param = opts.param;
    this.retryAfterSec = opts.retryAfterSec;
  }
}

export const invalid = (msg: string, opts?: DomainErrorOptions) => new DomainError('invalid', msg, opts);
export const forbidden = (msg: string, opts?: DomainErrorOptions) => new DomainError('forbidden', msg, opts);
export const notFound = (msg: string, opts?: DomainErrorOptions) => new DomainError('not_found', msg, opts);
export const conflict = (msg: string, opts?: DomainErrorOptions) => new DomainError('conflict', msg, opts);
export const overCapacity = (msg: string, opts?: DomainErrorOptions) => new DomainError('over_capacity', msg, opts);
export const notImplemented = (msg: string, opts?: DomainErrorOptions) => new DomainError('not_implemented', msg, opts);
export const unavailable = (msg: string, opts?: DomainErrorOptions) => new DomainError('unavailable', msg, opts);

/** One field that failed validation, located like pydantic does (`['body', 'messages', 0, 'role']`). */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

/** Input that failed validation field by field (FastAPI answers these 422). */
export class ValidationError extends Error {
  constructor(readonly issues: ValidationIssue[]) {
    super(issues.length ? `${issues[0].loc.join('.')}: ${issues[0].msg}` : 'validation failed');
    this.name = 'ValidationError';
  }
}
