// The Fastify application: parsing, auth, routes, errors and the OpenAPI document. No I/O of its own
// beyond what the services do; `hearth serve` (src/cli/commands/serve.ts) owns the process around it.
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import crypto from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AppContext } from './context.js';
import { errorBody, HttpError, ValidationError, type ErrorStyle } from './errors.js';
import { registerAuth } from './plugins/auth.js';
import { registerRoutes, type RouteDef } from './route.js';
import { buildOpenApi } from './openapi.js';
import { allRoutes } from './routes/index.js';
import { registerMetrics } from './plugins/metrics.js';

export interface BuildAppOptions {
  logger?: FastifyServerOptions['logger'];
  /** Extra route groups (tests, later issues); registered like the built-in ones. */
  extraRoutes?: RouteDef[];
}

function jsonInvalid(err: Error, position: number | null) {
  return new ValidationError([
    { loc: ['body', position ?? 0], msg: 'JSON decode error', type: 'json_invalid', input: {}, ...{ ctx: { error: err.message } } },
  ]);
}

function parseJson(text: string, parse: (text: string) => unknown = JSON.parse): unknown {
  if (text.trim() === '') return undefined;
  try {
    return parse(text);
  } catch (err) {
    const m = /position (\d+)/.exec((err as Error).message);
    throw jsonInvalid(err as Error, m ? Number(m[1]) : null);
  }
}

/** Keep validation items small: echo primitive inputs only (never whole bodies back to the client). */
function slimIssues(err: ValidationError) {
  return err.issues.map((i) => {
    const item: Record<string, unknown> = { type: i.type, loc: i.loc, msg: i.msg };
    if (i.input === null || ['string', 'number', 'boolean'].includes(typeof i.input)) {
      item.input = typeof i.input === 'string' && i.input.length > 200 ? `${i.input.slice(0, 200)}…` : i.input;
    }
    const ctx = (i as { ctx?: unknown }).ctx;
    if (ctx) item.ctx = ctx;
    return item;
  });
}

export async function buildApp(ctx: AppContext, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: ctx.config.bodyLimit,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : crypto.randomUUID();
    },
    forceCloseConnections: false,
    return503OnClosing: true,
  });

  // JSON everywhere, also when Content-Type is missing (the Weave client sends none), as FastAPI does.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(['application/json', 'text/plain'], { parseAs: 'string' }, (req, body, done) => {
    try {
      done(null, parseJson(body as string, req.routeOptions.config?.parseBody));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // JSONL uploads (SFT datasets) arrive as text and are validated line by line by their route.
  app.addContentTypeParser(['application/x-ndjson', 'application/jsonl'], { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    try {
      done(null, parseJson(body as string, req.routeOptions.config?.parseBody));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  app.setErrorHandler((err, request, reply) => {
    const style: ErrorStyle = request.routeOptions.config?.errorStyle ?? 'detail';
    if (err instanceof ValidationError) return reply.code(422).send({ detail: slimIssues(err) });
    if (err instanceof HttpError) {
      reply.headers(err.headers);
      return reply.code(err.statusCode).send(errorBody(style, err.message));
    }
    const status = (err as { statusCode?: number }).statusCode;
    const code = (err as { code?: string }).code;
    if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
      return reply.code(413).send(errorBody(style, style === 'reason' ? 'Request too large' : `Request body exceeds the limit of ${ctx.config.bodyLimit} bytes`));
    }
    if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) return reply.code(415).send(errorBody(style, 'Unsupported Content-Type: send application/json'));
    if (typeof status === 'number' && status >= 400 && status < 500) return reply.code(status).send(errorBody(style, (err as Error).message));
    request.log.error({ err: err as Error }, 'unhandled error');
    return reply.code(500).send(errorBody(style, 'Internal server error'));
  });

  app.setNotFoundHandler((_request, reply) => {
    reply.code(404).send({ detail: 'Not Found' });
  });

  registerMetrics(app);
  registerAuth(app, ctx.keys, ctx.config.rateLimitPerMinute);

  const defs = [...allRoutes(ctx), ...(opts.extraRoutes ?? [])];
  registerRoutes(app, defs);

  const document = buildOpenApi(defs);
  app.get('/openapi.json', async () => document);
  await app.register(swagger, { mode: 'static', specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  return app;
}
