// The Fastify application: parsing, auth, routes, errors and the OpenAPI document. No I/O of its own
// beyond what the services do; `hearth serve` (src/cli/commands/serve.ts) owns the process around it.
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Socket } from 'node:net';
import crypto from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AppContext } from './context.js';
import { anthropicValidationBody, errorBody, errorStyleOfUrl, HttpError, openAiValidationBody, ValidationError, validationStatus, wireErrorOf, type ErrorStyle } from './errors.js';
import { MAX_JSON_DEPTH } from '../domain/json-depth.js';
import { exceedsJsonBudget, exceedsJsonBudgetYielding, type JsonBudgetExcess } from '../domain/json-budget.js';
import { registerAuth } from './plugins/auth.js';
import { hostAllowed, hostPolicyOf } from './host-check.js';
import { registerRoutes, type RouteDef } from './route.js';
import { buildOpenApi } from './openapi.js';
import { allRoutes } from './routes/index.js';
import { registerMetrics } from './plugins/metrics.js';
import { registerConsole } from './plugins/console.js';
import { registerArtifactRoutes } from './plugins/artifacts.js';
import { lazyChildLogger } from './logger.js';

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

/** The value budget of a route's body and the setting that raises it (named in the 413 answer). */
interface ValueBudget {
  maxValues: number;
  setting: string;
}

function parseJson(text: string, budget: ValueBudget, parse: (text: string) => unknown = JSON.parse): unknown {
  if (text.trim() === '') return undefined;
  refuseOverBudget(exceedsJsonBudget(text, { maxValues: budget.maxValues, maxDepth: MAX_JSON_DEPTH }), budget);
  return parseScanned(text, parse);
}

/**
 * parseJson for a body long enough that its scan would hold the server's only thread for a noticeable time (a
 * 24 MiB body: 1–2 s on a loaded 2-core box): the scan pauses for the event loop every million characters, so
 * other tenants are answered while it is judged. The parse itself, of a body within its budget, stays one piece.
 */
async function parseJsonYielding(text: string, budget: ValueBudget, parse: (text: string) => unknown = JSON.parse): Promise<unknown> {
  if (text.trim() === '') return undefined;
  refuseOverBudget(await exceedsJsonBudgetYielding(text, { maxValues: budget.maxValues, maxDepth: MAX_JSON_DEPTH }), budget);
  return parseScanned(text, parse);
}

/** Bodies at least this long are scanned in slices (parseJsonYielding). */
const YIELDING_SCAN_CHARS = 1 << 20;

// One scan before the parse: FastAPI's answer when json.loads hits its recursion limit (deeper values would
// overflow our own stack later), and 413 for more values than the route's budget (the parse would take memory
// per value: src/domain/json-budget.ts). Short bodies (every chat request) skip the scan.
function refuseOverBudget(excess: JsonBudgetExcess, budget: ValueBudget): void {
  if (excess?.limit === 'depth') throw new HttpError(400, `There was an error parsing the body: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (excess?.limit === 'values') {
    throw new HttpError(413, `Request body holds more than ${excess.max} JSON values (${budget.setting} on the server)`, {}, 'request_too_large');
  }
}

function parseScanned(text: string, parse: (text: string) => unknown): unknown {
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

/**
 * Errors Fastify raises before any route runs (bad percent-encoding, overlong path parameter), answered in
 * the API's shape instead of Fastify's `{error, code, message, statusCode}`. The URL is not echoed back.
 */
function frameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const style = errorStyleOfUrl(request.url);
  if (err.code === 'FST_ERR_BAD_URL') return reply.code(400).send(errorBody(style, 'Malformed URL: invalid percent-encoding', { status: 400 }));
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return reply.code(414).send(errorBody(style, 'A path parameter is too long', { status: 414 }));
  const status = err.statusCode ?? 400;
  return reply.code(status).send(errorBody(style, 'Bad Request', { status }));
}

/** Requests Node cannot parse as HTTP: answer `{"detail"}` like every other error, then drop the connection. */
function clientError(err: NodeJS.ErrnoException, socket: Socket) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, text, detail] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', 'Request timed out']
    : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'Request headers are too large']
    : [400, 'Bad Request', 'Malformed HTTP request'];
  const body = JSON.stringify({ detail });
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${text}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** An unknown URL: OpenAI's answer on OpenAI paths (`Invalid URL (POST /v1/x)`), FastAPI's elsewhere. */
function notFound(request: FastifyRequest, reply: FastifyReply) {
  const style = errorStyleOfUrl(request.url);
  if (style === 'openai' || style === 'anthropic') return reply.code(404).send(errorBody(style, `Invalid URL (${request.method} ${request.url.split('?')[0]})`, { status: 404 }));
  return reply.code(404).send({ detail: 'Not Found' }); // FastAPI's answer, the Weave trace server's too
}

export async function buildApp(ctx: AppContext, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  // Request ids: a random prefix per app and a count (unique across restarts and API hosts, and no UUID to make
  // per request), unless the client sent a usable one.
  const idPrefix = `req_${crypto.randomBytes(6).toString('hex')}_`;
  let requests = 0;
  const app = Fastify({
    logger: opts.logger ?? false,
    childLoggerFactory: lazyChildLogger,
    bodyLimit: ctx.config.bodyLimit,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : idPrefix + (++requests).toString(36);
    },
    // Fastify's default (100) would answer 414 before a too-long id reaches validation (422 with a loc).
    routerOptions: { maxParamLength: 1024 },
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError,
    // On close, drop idle keep-alive connections at once and let in-flight requests finish.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  });

  // JSON everywhere, also when Content-Type is missing (the Weave client sends none), as FastAPI does.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const budgetOf = (req: FastifyRequest): ValueBudget => ({
    maxValues: req.routeOptions.config?.maxJsonValues ?? ctx.config.maxJsonValues,
    setting: req.routeOptions.config?.maxJsonValuesSetting ?? 'HEARTH_MAX_JSON_VALUES',
  });
  const jsonBody = (req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void): void => {
    const parse = req.routeOptions.config?.parseBody;
    if (body.length >= YIELDING_SCAN_CHARS) {
      parseJsonYielding(body, budgetOf(req), parse).then((value) => done(null, value), (err: Error) => done(err, undefined));
      return;
    }
    try {
      done(null, parseJson(body, budgetOf(req), parse));
    } catch (err) {
      done(err as Error, undefined);
    }
  };
  app.addContentTypeParser(['application/json', 'text/plain'], { parseAs: 'string' }, (req, body, done) => jsonBody(req, body as string, done));
  // JSONL uploads (SFT datasets) arrive as text and are validated line by line by their route.
  app.addContentTypeParser(['application/x-ndjson', 'application/jsonl'], { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => jsonBody(req, body as string, done));

  // Against DNS rebinding (src/api/host-check.ts): a Host name the server was not configured for is refused.
  const hostPolicy = hostPolicyOf(ctx.config.allowedHosts, ctx.config.host);
  if (hostPolicy.names) {
    app.addHook('onRequest', (request, _reply, done) => {
      if (hostAllowed(request.headers.host, hostPolicy)) return done();
      done(new HttpError(403, 'Host header not allowed: add the name to HEARTH_ALLOWED_HOSTS on the server'));
    });
  }

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  app.setErrorHandler((err, request, reply) => {
    // No route matched (a body that failed to parse on an unknown URL lands here too): the URL's family decides.
    const style: ErrorStyle = request.routeOptions.config?.errorStyle ?? errorStyleOfUrl(request.url);
    if (!request.routeOptions.url) return notFound(request, reply);
    if (err instanceof ValidationError) {
      if (style === 'anthropic') return reply.code(validationStatus(style)).send(anthropicValidationBody(err.issues));
      const detail = slimIssues(err);
      return reply.code(validationStatus(style)).send(style === 'openai' ? openAiValidationBody(err.issues, detail) : { detail });
    }
    const wire = wireErrorOf(err);
    if (wire) {
      reply.headers(wire.headers);
      return reply.code(wire.status).send(errorBody(style, wire.message, wire));
    }
    const status = (err as { statusCode?: number }).statusCode;
    const code = (err as { code?: string }).code;
    if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
      const limit = request.routeOptions.bodyLimit ?? ctx.config.bodyLimit;
      const setting = request.routeOptions.config?.bodyLimitSetting ?? 'HEARTH_BODY_LIMIT';
      const message = style === 'reason' ? 'Request too large' : `Request body exceeds the limit of ${limit} bytes (${setting} on the server)`;
      return reply.code(413).send(errorBody(style, message, { status: 413, code: 'request_too_large' }));
    }
    if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) {
      return reply.code(415).send(errorBody(style, 'Unsupported Content-Type: send application/json', { status: 415 }));
    }
    if (typeof status === 'number' && status >= 400 && status < 500) return reply.code(status).send(errorBody(style, (err as Error).message, { status }));
    request.log.error({ err: err as Error }, 'unhandled error');
    return reply.code(500).send(errorBody(style, 'Internal server error', { status: 500 }));
  });

  app.setNotFoundHandler(notFound);

  registerMetrics(app, undefined, { tenantDetail: { key: ctx.config.metricsKey } });
  const authFor = registerAuth(app, ctx.keys, ctx.config.rateLimitPerMinute, ctx.config.authFailuresPerMinute);

  const defs = [...allRoutes(ctx), ...(opts.extraRoutes ?? [])];
  registerRoutes(app, defs, authFor);
  registerArtifactRoutes(app, {
    home: ctx.config.home,
    workerToken: ctx.config.workerToken,
    uploadLimit: ctx.config.workerUploadLimit,
    runningJob: (id) => {
      const job = ctx.store.jobs.getById(id);
      return job?.status === 'running' ? { modelId: job.modelId } : null;
    },
  });

  const document = buildOpenApi(defs);
  app.get('/openapi.json', async () => document);
  await app.register(swagger, { mode: 'static', specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  registerConsole(app);
  return app;
}
