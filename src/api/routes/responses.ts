// OpenAI's Responses API, POST /v1/responses, on the chat-completions engine: the body is validated here
// (400 in OpenAI's shape, as api.openai.com answers), translated to a chat request
// (src/services/responses/request.ts), sent to an inference worker exactly as /v1/chat/completions sends
// it, and the worker's answer or chunks are translated back (output.ts, stream.ts). Stateless: nothing is
// stored, so the routes that read a stored response answer 400 saying so.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route.js';
import { cancelWhenClientCloses, sendEvent, startEventStream } from '../sse.js';
import type { AppContext } from '../context.js';
import { openAiValidationBody, wireErrorOf, zodIssuesToDetail } from '../errors.js';
import { DomainError, invalid, unavailable } from '../../errors/domain-errors.js';
import { InferenceFailure } from '../../protocol/inference-events.js';
import type { ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, Usage } from '../../protocol/openai.js';
import { ResponseObject, ResponsesRequest } from '../../schemas/responses.js';
import { resolveModel, type ResolvedModel } from '../../services/model-resolver.js';
import { relabelParam, responseSkeleton, translateResponsesRequest } from '../../services/responses/request.js';
import { newResponsesId, responseFromChatCompletion } from '../../services/responses/output.js';
import { ResponseEventStream, sseOf, type ResponsesStreamEvent } from '../../services/responses/stream.js';
import type { InferenceCall } from '../../queue/inference-gateway.js';
import type { QueueService } from '../../queue/queue-service.js';
import { bookUsage, serverTimingHeader } from './inference.js';

const STATELESS = 'Hearth does not store responses (its Responses API is stateless, like Ollama\'s), so there is none to';

/** The body, validated: a 400 with OpenAI's error object naming the first field at fault. */
function parseBody(body: unknown): ResponsesRequest {
  if (body === undefined || body === null) throw invalid('Invalid request: a JSON body is required', { code: 'missing_required_parameter' });
  const r = ResponsesRequest.safeParse(body, { reportInput: true });
  if (r.success) return r.data;
  const issues = zodIssuesToDetail(r.error.issues, 'body');
  const { error } = openAiValidationBody(issues, []) as { error: { param: string | null; code: string | null } };
  const first = issues[0];
  const unknown = first.type === 'extra_forbidden';
  const message = unknown ? `Unknown parameter: '${error.param}'.` : `Invalid request: ${error.param ?? 'body'}: ${first.msg}${issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? 's' : ''})` : ''}`;
  throw invalid(message, { param: error.param ?? undefined, code: error.code ?? undefined });
}

/** A chat-side error (the worker's checks, the API's) re-labelled with the Responses field it is about. */
function relabelled(err: unknown): unknown {
  if (err instanceof InferenceFailure && err.param) return new InferenceFailure({ ...err.event, param: relabelParam({ param: err.param }).param });
  if (!(err instanceof DomainError) || !err.param) return err;
  return new DomainError(err.kind, err.message, relabelParam({ code: err.code, param: err.param, retryAfterSec: err.retryAfterSec }));
}

/**
 * One Responses request in flight: the chat call handed to the queue, its translation back, the SSE stream,
 * cancelling the worker's work when the client goes away, and the usage booked at the end (as chat's).
 */
class ResponsesExchange implements InferenceCall {
  readonly op = 'chat' as const;
  readonly stream: boolean;
  readonly queueKey: string;
  private cancel: (() => void) | null = null;
  private serverTiming: string | null = null;
  private started = false;
  private readonly skeleton: ResponseObject;
  private readonly events: ResponseEventStream;

  constructor(
    private readonly ctx: AppContext,
    readonly body: ChatCompletionRequest,
    private readonly request: ResponsesRequest,
    private readonly logprobs: boolean,
    readonly model: ResolvedModel,
    readonly entity: string,
    private readonly http: { request: FastifyRequest; reply: FastifyReply },
  ) {
    this.stream = !!body.stream;
    this.queueKey = model.baseModel;
    this.skeleton = responseSkeleton(request, newResponsesId('resp'), Math.floor(Date.now() / 1000));
    this.events = new ResponseEventStream(this.skeleton, { logprobs });
    cancelWhenClientCloses(http.reply, () => this.cancel?.());
  }

  cancelWith(cancel: () => void): void {
    this.cancel = cancel;
  }

  onWorkerTime(workerMs: number): void {
    this.serverTiming = serverTimingHeader(workerMs, this.http.reply.elapsedTime);
  }

  onChunk(chunk: unknown): void {
    this.send(this.events.onChunk(chunk as ChatCompletionChunk));
  }

  async respond(queue: QueueService): Promise<unknown> {
    if (!this.stream) {
      const completion = (await queue.gateway.submit(this).catch((err: unknown) => Promise.reject(relabelled(err)))) as ChatCompletionResponse;
      if (this.serverTiming) this.http.reply.header('server-timing', this.serverTiming);
      this.book(completion.usage);
      return responseFromChatCompletion(this.skeleton, completion, { logprobs: this.logprobs });
    }
    try {
      const result = (await queue.gateway.submit(this)) as { usage?: Usage | null } | null;
      const usage = result?.usage ?? null;
      this.send(this.events.finish(usage));
      this.http.reply.raw.end();
      this.book(usage);
    } catch (err) {
      if (!this.started) throw relabelled(err); // nothing sent yet: a normal error response
      const wire = wireErrorOf(relabelled(err)) ?? { status: 500, message: 'Internal server error', code: undefined, param: undefined };
      this.send(this.events.fail(wire.message, wire.code ?? null, wire.param ?? null));
      this.http.reply.raw.end();
    }
    return undefined;
  }

  private send(events: ResponsesStreamEvent[]): void {
    if (!events.length) return;
    this.startStream();
    sendEvent(this.http.reply.raw, events.map(sseOf).join(''));
  }

  private startStream(): void {
    if (this.started) return;
    this.started = true;
    startEventStream(this.http.request, this.http.reply, this.serverTiming ? { 'server-timing': this.serverTiming } : {});
  }

  private book(usage: Usage | null | undefined): void {
    if (!usage) return;
    bookUsage(this.ctx, this.http.request, { entity: this.entity, model: this.request.model, baseModel: this.model.baseModel }, usage.prompt_tokens, usage.completion_tokens);
  }
}

export function responsesRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['inference'];
  const responseId = z.object({ response_id: z.string() });
  const stored = (what: string) => () => {
    throw invalid(`${STATELESS} ${what}; send the whole conversation in \`input\` of POST /v1/responses`, { code: 'unsupported_parameter' });
  };
  return [
    defineRoute({
      method: 'POST', url: '/v1/responses', operationId: 'create_response_v1_responses_post', summary: 'Create Response (OpenAI Responses API, stateless)',
      tags, auth: 'bearer', errorStyle: 'openai', documentedBody: ResponsesRequest, response: ResponseObject,
      errors: { 400: 'Bad or unsupported parameters', 404: 'Unknown model', 429: 'Too many requests queued', 503: 'No worker available' },
      handler: ({ auth, request, reply }) => {
        // Validated here rather than by the route declaration: the Responses API answers bad bodies 400, not 422.
        const body = parseBody(request.body);
        const { chat, logprobs } = translateResponsesRequest(body);
        if (!ctx.queue) throw unavailable('No inference workers are attached to this server');
        const model = resolveModel(ctx.store, ctx.catalog, auth.entity, body.model);
        return new ResponsesExchange(ctx, chat, body, logprobs, model, auth.entity, { request, reply }).respond(ctx.queue);
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/responses/:response_id', operationId: 'retrieve_response_v1_responses__response_id__get', summary: 'Retrieve Response (not stored: 400)',
      tags, auth: 'bearer', errorStyle: 'openai', params: responseId, errors: { 400: 'Responses are not stored' }, handler: stored('retrieve'),
    }),
    defineRoute({
      method: 'DELETE', url: '/v1/responses/:response_id', operationId: 'delete_response_v1_responses__response_id__delete', summary: 'Delete Response (not stored: 400)',
      tags, auth: 'bearer', errorStyle: 'openai', params: responseId, errors: { 400: 'Responses are not stored' }, handler: stored('delete'),
    }),
    defineRoute({
      method: 'GET', url: '/v1/responses/:response_id/input_items', operationId: 'list_input_items_v1_responses__response_id__input_items_get',
      summary: 'List Input Items (not stored: 400)', tags, auth: 'bearer', errorStyle: 'openai', params: responseId, errors: { 400: 'Responses are not stored' },
      handler: stored('list the input items of'),
    }),
    defineRoute({
      method: 'POST', url: '/v1/responses/:response_id/cancel', operationId: 'cancel_response_v1_responses__response_id__cancel_post', summary: 'Cancel Response (not stored: 400)',
      tags, auth: 'bearer', errorStyle: 'openai', params: responseId, errors: { 400: 'Responses are not stored' },
      handler: stored('cancel (background responses are not supported)'),
    }),
  ];
}
