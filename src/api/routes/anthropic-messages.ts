// Anthropic's Messages API on the chat-completions machinery: POST /v1/messages (whole or streamed) and
// POST /v1/messages/count_tokens. The request is translated to a chat request (src/api/anthropic/to-chat.ts), run
// by an inference worker like any chat completion, and its result or chunks translated back (from-chat.ts).
// Auth by `x-api-key` (the Anthropic SDK's apiKey) or bearer (its authToken); errors in Anthropic's shape.
import crypto from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { defineRoute, type AuthContext, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { cancelWhenClientCloses, sendEvent, startEventStream } from '../sse.js';
import { errorBody, wireErrorOf } from '../errors.js';
import { invalid, unavailable } from '../../errors/domain-errors.js';
import { AnthropicMessage, MessageCountTokensRequest, MessageCreateRequest, MessageTokensCount } from '../../schemas/anthropic.js';
import { ChatCompletionRequest, type ChatCompletionChunk, type ChatCompletionResponse, type Usage } from '../../protocol/openai.js';
import { chatRequestOf, promptOf } from '../anthropic/to-chat.js';
import { AnthropicEventStream, formatEvent, messageOf, type AnthropicEvent, type MessageMeta } from '../anthropic/from-chat.js';
import { resolveModel, type ResolvedModel } from '../../services/model-resolver.js';
import type { InferenceCall } from '../../queue/inference-gateway.js';
import type { QueueService } from '../../queue/queue-service.js';
import { bookUsage, runInference } from './inference.js';

/** The translated body as the chat route would have parsed it (defaults applied); a translation the chat schema refuses is a 400. */
function chatBody(translated: Record<string, unknown>): ChatCompletionRequest {
  const r = ChatCompletionRequest.safeParse(translated);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw invalid(`${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  return r.data;
}

/**
 * A streamed request: the worker's chat chunks go out as Anthropic's events. Headers are sent with the first chunk,
 * so a request that fails before it (bad tool schema, unknown adapter) still gets a plain error response.
 */
class AnthropicStreamExchange implements InferenceCall {
  readonly op = 'chat' as const;
  readonly stream = true;
  readonly queueKey: string;
  private readonly events: AnthropicEventStream;
  private cancel: (() => void) | null = null;
  private started = false;

  constructor(
    private readonly ctx: AppContext,
    readonly body: ChatCompletionRequest,
    readonly model: ResolvedModel,
    meta: MessageMeta,
    readonly entity: string,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    this.queueKey = model.baseModel;
    this.events = new AnthropicEventStream(meta);
    cancelWhenClientCloses(reply, () => this.cancel?.());
  }

  cancelWith(cancel: () => void): void {
    this.cancel = cancel;
  }

  onChunk(chunk: unknown): void {
    this.send(this.events.onChunk(chunk as ChatCompletionChunk));
  }

  async respond(queue: QueueService): Promise<undefined> {
    try {
      const result = (await queue.gateway.submit(this)) as { usage: Usage };
      this.send(this.events.end(result.usage));
      this.reply.raw.end();
      bookUsage(this.ctx, this.request, { entity: this.entity, model: this.model.name, baseModel: this.model.baseModel }, result.usage.prompt_tokens, result.usage.completion_tokens);
    } catch (err) {
      if (!this.started) throw err; // nothing sent yet: a normal error response
      const wire = wireErrorOf(err) ?? { status: 500, message: 'Internal server error' };
      this.reply.raw.end(formatEvent({ event: 'error', data: errorBody('anthropic', wire.message, { status: wire.status }) }));
    }
    return undefined;
  }

  private send(events: AnthropicEvent[]): void {
    if (!events.length) return;
    if (!this.started) {
      this.started = true;
      startEventStream(this.request, this.reply, { 'request-id': this.request.id });
    }
    sendEvent(this.reply.raw, events.map(formatEvent).join(''));
  }
}

async function createMessage(ctx: AppContext, body: MessageCreateRequest, auth: AuthContext, request: FastifyRequest, reply: FastifyReply) {
  const chat = chatBody(chatRequestOf(body));
  const meta: MessageMeta = { id: `msg_${crypto.randomBytes(12).toString('hex')}`, model: body.model, maxTokens: body.max_tokens, stopSequences: body.stop_sequences ?? [] };
  reply.header('request-id', request.id);
  if (!body.stream) return messageOf((await runInference(ctx, 'chat', chat, auth, request, reply)) as ChatCompletionResponse, meta);
  if (!ctx.queue) throw unavailable('No inference workers are attached to this server');
  const model = resolveModel(ctx.store, ctx.catalog, auth.entity, body.model);
  return new AnthropicStreamExchange(ctx, chat, model, meta, auth.entity, request, reply).respond(ctx.queue);
}

export function anthropicMessageRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['anthropic'];
  const errors = { 401: 'Missing or invalid API key', 404: 'Unknown model', 429: 'Too many requests queued', 503: 'No worker available' };
  return [
    defineRoute({
      method: 'POST', url: '/v1/messages', operationId: 'create_message_v1_messages_post', summary: 'Create Message (Anthropic Messages API)', tags,
      auth: 'api-key-or-bearer', errorStyle: 'anthropic', body: MessageCreateRequest, response: AnthropicMessage, errors,
      handler: ({ auth, body, request, reply }) => createMessage(ctx, body, auth, request, reply),
    }),
    defineRoute({
      method: 'POST', url: '/v1/messages/count_tokens', operationId: 'count_message_tokens_v1_messages_count_tokens_post', summary: 'Count Message Tokens (Anthropic Messages API)', tags,
      auth: 'api-key-or-bearer', errorStyle: 'anthropic', body: MessageCountTokensRequest, response: MessageTokensCount, errors,
      handler: async ({ auth, body, request, reply }) => {
        reply.header('request-id', request.id);
        const counted = (await runInference(ctx, 'chat_tokens', chatBody(promptOf(body)), auth, request, reply)) as { prompt_tokens: number };
        return { input_tokens: counted.prompt_tokens };
      },
    }),
  ];
}
