// Wire shapes of POST /v1/embeddings (OpenAI's Embeddings API): the request as OpenAI documents it (input as a
// string, strings, token ids or lists of token ids; encoding_format float or base64; dimensions) and the response.
import { z } from 'zod';

/** OpenAI's own limits: at most 2048 inputs per request, no empty string, no empty token list. */
export const MAX_EMBEDDING_INPUTS = 2048;

const TokenIds = z.array(z.number().int().min(0)).min(1);

export const EmbeddingRequest = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1),
    z.array(z.string().min(1)).min(1).max(MAX_EMBEDDING_INPUTS),
    TokenIds,
    z.array(TokenIds).min(1).max(MAX_EMBEDDING_INPUTS),
  ]),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.number().int().min(1).nullish(),
  user: z.string().nullish(),
}).meta({ id: 'EmbeddingRequest' });
export type EmbeddingRequest = z.infer<typeof EmbeddingRequest>;

export const EmbeddingResponse = z.object({
  object: z.literal('list'),
  data: z.array(z.object({
    object: z.literal('embedding'),
    index: z.number().int(),
    /** float: the numbers; base64: the vector's little-endian float32 bytes, base64-encoded (as OpenAI sends them). */
    embedding: z.union([z.array(z.number()), z.string()]),
  })),
  model: z.string(),
  usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
}).meta({ id: 'EmbeddingResponse' });
export type EmbeddingResponse = z.infer<typeof EmbeddingResponse>;

/** Fields OpenAI's request has no place for that would change the result; answered 400 by name. */
export function unsupportedEmbeddingParams(req: EmbeddingRequest): string[] {
  const r = req as Record<string, unknown>;
  // vLLM's pooling extras: Hearth pools one way (see docs/architecture.md, Embeddings).
  return ['truncate_prompt_tokens', 'normalize', 'pooling_type', 'add_special_tokens', 'encoding_type'].filter((k) => r[k] !== undefined && r[k] !== null);
}
