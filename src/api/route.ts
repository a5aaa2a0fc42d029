// One declaration per endpoint: zod schemas for params, query, body and the 200 response drive
// validation (FastAPI-style 422s), the handler's TypeScript types and the OpenAPI document.
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { z } from 'zod';
import { ValidationError, zodIssuesToDetail, type ErrorStyle, type ValidationIssue } from './errors.js';

/** 'api-key-or-bearer': Anthropic's `x-api-key: <key>` header, or the bearer token (the Anthropic SDK's authToken). */
export type AuthMode = 'bearer' | 'basic-or-bearer' | 'api-key-or-bearer' | 'none';

export interface AuthContext {
  entity: string;
  /** The key's hash prefix (never the key), for rate limiting and logs. */
  keyId: string;
}

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  auth: AuthContext;
  request: FastifyRequest;
  reply: FastifyReply;
}

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteDef<P extends z.ZodType | undefined = any, Q extends z.ZodType | undefined = any, B extends z.ZodType | undefined = any> {
  method: 'GET' | 'POST' | 'DELETE' | 'PUT';
  url: string | string[];
  operationId: string;
  summary: string;
  tags: string[];
  auth: AuthMode;
  errorStyle?: ErrorStyle;
  params?: P;
  query?: Q;
  body?: B;
  /** The body's schema for the OpenAPI document only, where the handler validates the body itself (a route
   * family that answers bad bodies other than 422: the Responses API's 400). */
  documentedBody?: z.ZodType;
  /** Schema of the 200 body, for the OpenAPI document. */
  response?: z.ZodType;
  /** Other documented statuses → description. */
  errors?: Record<number, string>;
  /** Parse the body text with this instead of JSON.parse (the table routes keep number text). */
  parseBody?: (text: string) => unknown;
  /** This route's body limit in bytes, instead of the app's (training uploads take more). */
  bodyLimit?: number;
  /** The setting that raises `bodyLimit`, named in the 413 answer. */
  bodyLimitSetting?: string;
  /** Most JSON values this route's body may hold, instead of the app's (src/domain/json-budget.ts). */
  maxJsonValues?: number;
  /** The setting that raises `maxJsonValues`, named in the 413 answer. */
  maxJsonValuesSetting?: string;
  /**
   * Checks on the parsed body before schema validation (which copies every value): throw to refuse it, e.g. a
   * ValidationError for counts over a route's limits (src/domain/rl-body-counts.ts).
   */
  precheck?: (body: unknown) => void;
  /** Return the body to send (200), or send it yourself through `reply` (streaming) and return undefined. */
  handler: (ctx: RouteContext<Infer<P>, Infer<Q>, Infer<B>>) => unknown | Promise<unknown>;
}

/** Identity function that gives a route declaration its inferred types. */
export function defineRoute<P extends z.ZodType | undefined, Q extends z.ZodType | undefined, B extends z.ZodType | undefined>(
  def: RouteDef<P, Q, B>,
): RouteDef<P, Q, B> {
  return def;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    errorStyle?: ErrorStyle;
    parseBody?: (text: string) => unknown;
    bodyLimitSetting?: string;
    maxJsonValues?: number;
    maxJsonValuesSetting?: string;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

function parsePart(schema: z.ZodType | undefined, value: unknown, where: 'path' | 'query' | 'body', issues: ValidationIssue[]): unknown {
  if (!schema) return undefined;
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data;
  issues.push(...zodIssuesToDetail(r.error.issues, where));
  return undefined;
}

/** Fastify keeps the body `undefined` when none was sent; FastAPI reports a missing body as one `missing` item. */
function bodyOrMissing(schema: z.ZodType | undefined, request: FastifyRequest, issues: ValidationIssue[]): unknown {
  if (!schema) return undefined;
  if (request.body === undefined || request.body === null) {
    if (schema.safeParse(undefined).success) return schema.parse(undefined);
    issues.push({ loc: ['body'], msg: 'Field required', type: 'missing' });
    return undefined;
  }
  return parsePart(schema, request.body, 'body', issues);
}

/** `authFor(mode)`: the onRequest hook that authenticates a route of that mode (src/api/plugins/auth.ts), if any. */
export function registerRoutes(app: FastifyInstance, defs: RouteDef[], authFor: (mode: AuthMode) => onRequestHookHandler | undefined): void {
  for (const def of defs) {
    const urls = Array.isArray(def.url) ? def.url : [def.url];
    const onRequest = authFor(def.auth);
    for (const url of urls) {
      app.route({
        method: def.method,
        url,
        config: {
          errorStyle: def.errorStyle ?? 'detail', parseBody: def.parseBody, bodyLimitSetting: def.bodyLimitSetting,
          maxJsonValues: def.maxJsonValues, maxJsonValuesSetting: def.maxJsonValuesSetting,
        },
        ...(def.bodyLimit !== undefined ? { bodyLimit: def.bodyLimit } : {}),
        ...(onRequest ? { onRequest } : {}),
        handler: async (request, reply) => {
          const issues: ValidationIssue[] = [];
          if (def.precheck && request.body !== undefined) def.precheck(request.body);
          const params = parsePart(def.params, request.params, 'path', issues);
          const query = parsePart(def.query, request.query, 'query', issues);
          const body = bodyOrMissing(def.body, request, issues);
          if (issues.length) throw new ValidationError(issues);
          const result = await def.handler({ params, query, body, auth: request.auth as AuthContext, request, reply } as RouteContext<any, any, any>);
          if (reply.sent) return reply;
          return result;
        },
      });
    }
  }
}
