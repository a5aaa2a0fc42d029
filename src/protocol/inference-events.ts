// The one vocabulary of an inference request's answer, from the worker's OpenAI adapter to the API's routes
// (docs/architecture.md, "Request paths"). The adapter (worker/inference/openai-adapter.ts) emits these events, the
// worker host wraps each in a WorkerMessage (`inference.event`, messages.ts) as it is, either transport carries it,
// and the API's gateway hands it to the route's exchange: a chunk to `onChunk`, the result or the error as the
// settled call. A request ends with exactly one result or error.
//
//   stream:     chunk … chunk, then result { usage }      (the route writes its own ending: `data: [DONE]`, …)
//   whole:      result <the response object>               (chat / text completion, embeddings, { prompt_tokens }, …)
//   failure:    error { status, message, param?, code? }   (at any point; after chunks, the route ends the stream with it)
//
// `data` is left as the worker made it (z.unknown()): a chunk is parsed by no one between the adapter and the
// socket (a schema parse per token cost time to first token: src/queue/embedded.ts), and its shape is the OpenAI
// types' (openai.ts). An error's HTTP status and OpenAI fields travel once, as numbers and strings: the status the
// worker gives is the status the client gets (src/api/errors.ts), not a kind that is mapped back to a status.
import { z } from 'zod';

/** One streamed piece of the answer: a chat.completion.chunk or text_completion chunk. */
export const InferenceChunkEvent = z.object({ type: z.literal('chunk'), data: z.unknown() });

/** The end of a request that succeeded: the whole response, or `{ usage }` after a stream's chunks. */
export const InferenceResultEvent = z.object({ type: z.literal('result'), data: z.unknown() });

/** The end of a request that failed, as the client will see it: HTTP status, message, OpenAI's `param` and `code`. */
export const InferenceErrorEvent = z.object({
  type: z.literal('error'),
  status: z.number().int(),
  message: z.string(),
  param: z.string().optional(),
  code: z.string().optional(),
});

export const InferenceEvent = z.discriminatedUnion('type', [InferenceChunkEvent, InferenceResultEvent, InferenceErrorEvent]);
export type InferenceEvent = z.infer<typeof InferenceEvent>;
export type InferenceErrorEvent = z.infer<typeof InferenceErrorEvent>;

/** Whether the event ends its request (a result or an error). */
export function isTerminal(event: InferenceEvent): boolean {
  return event.type !== 'chunk';
}

/**
 * An inference request that ended with an error event: the error the API's call rejects with, carrying the event
 * unchanged (its status is the response's status; src/api/errors.ts reads it as it is).
 */
export class InferenceFailure extends Error {
  readonly status: number;
  readonly param: string | undefined;
  readonly code: string | undefined;

  constructor(readonly event: InferenceErrorEvent) {
    super(event.message);
    this.name = 'InferenceFailure';
    this.status = event.status;
    this.param = event.param;
    this.code = event.code;
  }
}
