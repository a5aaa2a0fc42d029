// OpenAI-compatible inference: chat completions (both paths), completions, and the model list.
// The route validates, resolves the model name within the caller's entity, and hands the request to an
// inference worker through the queue; streamed chunks come back as they are made and go out as SSE.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { defineRoute, type RouteDef } from '../route.js';
import { sendEvent } from '../sse.js';
import type { AppContext } from '../context.js';
import { errorBody, wireErrorOf } from '../errors.js';
import { unavailable } from '../../errors/domain-errors.js';
import { z } from 'zod';
import { ModelEntry, ModelList } from '../../schemas/inference-models.js';
import { ChatCompletionRequest, ChatCompletionResponse, CompletionRequest, CompletionResponse } from '../../schemas/openai.js';
import { resolveModel } from '../../services/model-resolver.js';
import { hearthMetrics } from '../../metrics/metrics.js';

const DEFAULT_USAGE_PROJECT = 'inference';

/** `OpenAI-Project: <team>/<project>` (or the neutral Compat-Project) names the project usage is booked to. */
function usageProject(request: FastifyRequest): string {
  const raw = request.headers['openai-project'] ?? request.headers['compat-project'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value) return DEFAULT_USAGE_PROJECT;
  const project = value.includes('/') ? value.slice(value.indexOf('/') + 1) : value;
  return project.slice(0, 128) || DEFAULT_USAGE_PROJECT;
}

/** `worker;dur=…, total;dur=…` (ms, two decimals). */
function serverTimingHeader(workerMs: number, totalMs: number): string {
  return `worker;dur=${workerMs.toFixed(2)}, total;dur=${totalMs.toFixed(2)}`;
}

interface UsageLike {
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

async function runInference(
  ctx: AppContext,
  op: 'chat' | 'completion',
  body: { model: string; stream?: boolean | null },
  auth: { entity: string },
  request: FastifyRequest,
  reply: FastifyReply,
) {
  if (!ctx.queue) throw unavailable('No inference workers are attached to this server');
  const model = resolveModel(ctx.store, ctx.catalog, auth.entity, body.model);
  const project = usageProject(request);
  let usage: UsageLike['usage'] = null;
  const book = () => {
    if (!usage) return;
    ctx.store.usage.add({ entity: auth.entity, project, model: body.model, promptTokens: usage.prompt_tokens ?? 0, completionTokens: usage.completion_tokens ?? 0 });
    hearthMetrics.tokensGenerated.inc({ model: model.baseModel }, usage.completion_tokens ?? 0);
  };
  // The client went away: stop generating for it at once.
  let cancel: (() => void) | null = null;
  const cancelWith = (fn: () => void) => (cancel = fn);
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) cancel?.();
  });

  // Server-Timing (W3C): the worker's time to the first token (streams) or to the whole response, and this
  // server's from the request's arrival to the same point; the difference is what HTTP, the API and the queue add.
  let serverTiming: string | null = null;
  const onWorkerTime = (workerMs: number) => (serverTiming = serverTimingHeader(workerMs, reply.elapsedTime));

  if (!body.stream) {
    const result = (await ctx.queue.infer({ op, body, model, stream: false, queueKey: model.baseModel, cancelWith, onWorkerTime })) as UsageLike;
    if (serverTiming) reply.header('server-timing', serverTiming);
    usage = result?.usage ?? null;
    book();
    return result;
  }

  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-request-id': request.id,
      ...(serverTiming ? { 'server-timing': serverTiming } : {}),
    });
  };
  try {
    // The worker sends the chunks the client asked for (a usage chunk only with stream_options.include_usage)
    // and ends with the usage, which is booked for every stream.
    const result = (await ctx.queue.infer({
      op, body, model, stream: true, queueKey: model.baseModel, cancelWith, onWorkerTime,
      onDelta: (chunk) => {
        start();
        sendEvent(reply.raw, `data: ${JSON.stringify(chunk)}\n\n`);
      },
    })) as UsageLike | null;
    if (result?.usage) usage = result.usage;
    start();
    reply.raw.end('data: [DONE]\n\n');
    book();
  } catch (err) {
    if (!started) throw err; // nothing sent yet: a normal error response
    const wire = wireErrorOf(err) ?? { status: 500, message: 'Internal server error' };
    reply.raw.end(`data: ${JSON.stringify({ error: { ...(errorBody('openai', wire.message, wire).error as object), code: wire.status } })}\n\n`);
  }
  return undefined;
}

export function inferenceRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['inference'];
  return [
    defineRoute({
      method: 'POST', url: ['/v1/chat/completions', '/v1/chat/completions/'], operationId: 'create_chat_completion_v1_chat_completions_post',
      summary: 'Create Chat Completion', tags, auth: 'bearer', errorStyle: 'openai', body: ChatCompletionRequest, response: ChatCompletionResponse,
      errors: { 400: 'Bad parameters', 404: 'Unknown model', 429: 'Too many requests queued', 503: 'No worker available' },
      handler: ({ auth, body, request, reply }) => runInference(ctx, 'chat', body, auth, request, reply),
    }),
    defineRoute({
      method: 'POST', url: '/v1/completions', operationId: 'create_completion_v1_completions_post', summary: 'Create Completion', tags, auth: 'bearer', errorStyle: 'openai',
      body: CompletionRequest, response: CompletionResponse,
      errors: { 400: 'Bad parameters', 404: 'Unknown model', 429: 'Too many requests queued', 503: 'No worker available' },
      handler: ({ auth, body, request, reply }) => runInference(ctx, 'completion', body, auth, request, reply),
    }),
    defineRoute({
      method: 'GET', url: '/v1/models', operationId: 'list_models_v1_models_get', summary: 'List Models', tags, auth: 'bearer', errorStyle: 'openai', response: ModelList,
      handler: ({ auth }) => ({ object: 'list' as const, data: modelEntries(ctx, auth.entity) }),
    }),
    defineRoute({
      // The openai SDKs send the id URL-encoded (`publisher%2Fname`), which the router decodes into one parameter.
      method: 'GET', url: '/v1/models/:model', operationId: 'retrieve_model_v1_models__model__get', summary: 'Retrieve Model', tags, auth: 'bearer', errorStyle: 'openai',
      params: z.object({ model: z.string().min(1).max(1024) }), response: ModelEntry, errors: { 404: 'Unknown model' },
      handler: ({ auth, params }) => {
        const id = params.model;
        const listed = modelEntries(ctx, auth.entity).find((m) => m.id === id);
        if (listed) return listed;
        // Other names the inference routes accept (`…:step3`, `…:latest`, two slashes) are models too.
        const resolved = resolveModel(ctx.store, ctx.catalog, auth.entity, id);
        const base = modelEntries(ctx, auth.entity).find((m) => m.id === resolved.baseModel);
        return { id, object: 'model' as const, created: base?.created ?? 0, owned_by: id.startsWith('wandb-artifact:') ? auth.entity : 'system', root: resolved.baseModel };
      },
    }),
  ];
}

/** The models a caller may use: every installed base model, and the entity's trained models. */
function modelEntries(ctx: AppContext, entity: string): z.infer<typeof ModelEntry>[] {
  const base = ctx.catalog.list().map((m) => ({ id: m.id, object: 'model' as const, created: m.createdAt, owned_by: 'system', root: m.id }));
  const trained = ctx.store.models.listByEntity(entity).map((m) => ({
    id: `wandb-artifact:///${m.entity}/${m.project}/${m.name}`,
    object: 'model' as const,
    created: Math.floor(Date.parse(m.createdAt) / 1000),
    owned_by: m.entity,
    root: m.baseModel,
  }));
  return [...base, ...trained];
}
